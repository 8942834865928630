"""A scrape's samples as a dict, and one sample looked up by name and labels: for the integration tests and the
benchmarks alike."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

Values = dict[tuple[str, frozenset[tuple[str, str]]], float]
"""Samples of a scrape: (name, its labels as a set of pairs) -> value."""


def parse(text: str) -> Values:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(values: Values, name: str, **labels: str) -> float | None:
    """The one sample of `name` whose labels include `labels` (None if absent)."""
    found = [v for (n, ls), v in values.items() if n == name and set(labels.items()) <= set(ls)]
    assert len(found) <= 1, f"{name}{labels} matches {len(found)} series"
    return found[0] if found else None
