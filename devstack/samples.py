"""The one parser of a scrape (the exposition text of any /metrics) into its samples, and their look-ups by name
and labels: for the demo, the integration and unit tests and the benchmarks alike."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["Values", "largest", "matching", "parse", "total", "value"]

Values = dict[tuple[str, frozenset[tuple[str, str]]], float]
"""Samples of a scrape: (name, its labels as a set of pairs) -> value."""


def parse(text: str) -> Values:
    """Every sample of the exposition `text`, histogram buckets, sums and counts included."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(values: Values, name: str, **labels: str) -> float | None:
    """The one sample of `name` whose labels include `labels` (None if absent)."""
    found = matching(values, name, **labels)
    assert len(found) <= 1, f"{name}{labels} matches {len(found)} series"
    return found[0] if found else None


def matching(values: Values, name: str, **labels: str) -> list[float]:
    """The values of every sample of `name` whose labels include `labels`."""
    return [v for (n, ls), v in values.items() if n == name and set(labels.items()) <= ls]


def largest(values: Values, name: str, **labels: str) -> float | None:
    """The largest of the samples `matching`; None if there is none."""
    found = matching(values, name, **labels)
    return max(found) if found else None


def total(values: Values, name: str, **labels: str) -> float | None:
    """The sum of the samples `matching`; None if there is none."""
    found = matching(values, name, **labels)
    return sum(found) if found else None
