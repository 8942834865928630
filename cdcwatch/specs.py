"""Metrics declared once, as data: each collector exports from its specs, the reference documents them, the mixin
finds each one's stage by its name."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["MetricSpec", "UndeclaredLabel", "metric_specs", "reference_row", "referenced_specs"]

_UNITS = ("seconds", "bytes")


class UndeclaredLabel(ValueError):
    """A sample carries a label its metric's spec does not declare (a bug in the collector)."""


@dataclass(frozen=True)
class MetricSpec:
    """One metric as declared once: the collectors build its samples from it and the reference documents it.

    `name` is the sample name (a counter's ends in `_total`); `labels` are the labels a collector adds
    besides the ones every series of that collector carries (target and static labels); `unit` is the
    name's unit suffix (seconds, bytes), empty for plain counts and states; `source` says where the value
    is read when the collector has several (REST or JMX, which bean), for the reference.
    """

    name: str
    type: Literal["gauge", "counter", "histogram"]
    help: str
    labels: tuple[str, ...] = ()
    unit: str = ""
    source: str = ""
    _declared: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if (self.type == "counter") != self.name.endswith("_total"):
            raise ValueError(f"{self.name}: a counter's name, and only a counter's, ends in _total")
        object.__setattr__(self, "_declared", frozenset(self.labels))
        if not self.unit:
            base = self.name.removesuffix("_total")
            object.__setattr__(self, "unit", next((u for u in _UNITS if base.endswith(f"_{u}")), ""))

    def check_labels(self, labels: Iterable[str]) -> None:
        """Raise UndeclaredLabel for a label the spec does not declare."""
        undeclared = set(labels) - self._declared
        if undeclared:
            raise UndeclaredLabel(f"{self.name}: label(s) {', '.join(sorted(undeclared))} not declared (declared: "
                                  f"{', '.join(self.labels) or 'none'})")


def reference_row(spec: MetricSpec, source: str | None = None) -> str:
    """A metric's row in the metrics reference: name, type, (extra) labels, where it is read when given, help."""
    cells = [f"`{spec.name}`", spec.type, ", ".join(spec.labels) or "-", *([source] if source else []), spec.help]
    return "| " + " | ".join(cells) + " |"


def metric_specs(*specs: MetricSpec) -> dict[str, MetricSpec]:
    """Specs by name, in declaration order; a name declared twice is an error."""
    by_name = {spec.name: spec for spec in specs}
    if len(by_name) != len(specs):
        raise ValueError("a metric is declared twice")
    return by_name


def referenced_specs(specs: Iterable[MetricSpec]) -> tuple[MetricSpec, ...]:
    """The specs a table of rules refers to, each once by identity (the rules of one family share one spec
    object), for `metric_specs`: two specs of one name, even equal ones, are then an error."""
    return tuple({id(spec): spec for spec in specs}.values())
