"""Building fresh metric families on every scrape (no global state, no stale series)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

__all__ = ["Collection", "FamilyBuilder", "TargetCollector"]


class FamilyBuilder:
    """Collects samples into families by metric name; counters get their `_total` sample name."""

    def __init__(self) -> None:
        self._families: dict[str, Metric] = {}

    def add(self, metric: str, type: str, help: str, labels: Mapping[str, str], value: float) -> None:
        self.family(metric, type, help).samples.append(Sample(metric, dict(labels), value))

    def family(self, metric: str, type: str, help: str) -> Metric:
        """The family of `metric`; hot paths append `Sample(metric, labels, value)` to its samples."""
        family = self._families.get(metric)
        if family is None:
            base = metric[: -len("_total")] if type == "counter" and metric.endswith("_total") else metric
            family = Metric(base, help, type)
            self._families[metric] = family
        return family

    def families(self) -> list[Metric]:
        return list(self._families.values())


@dataclass
class Collection:
    """What one collection from one target produced."""

    families: list[Metric] = field(default_factory=list)
    summary: str = ""  # key figures for `cdcwatch check`


class TargetCollector(Protocol):
    """Collects one target; raises on failure (the caller turns that into up=0)."""

    kind: str
    """What is collected: debezium, kafka, connect or postgres (the `collector` label)."""
    target: str

    def collect(self) -> Collection: ...

    def close(self) -> None: ...
