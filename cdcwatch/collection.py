"""What a collector of one configured target is, and what one collection gives back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client.metrics_core import Metric

__all__ = ["Collection", "TargetCollector"]


@dataclass
class Collection:
    """What one collection from one target produced."""

    families: list[Metric] = field(default_factory=list)
    summary: str = ""  # key figures for `cdcwatch check`


class TargetCollector(Protocol):
    """Collects one target; raises on failure (the caller turns that into up=0)."""

    kind: str
    """What is collected: its `kind` in the collector registry (cdcwatch/collectors.py), the `collector` label."""
    target: str

    def collect(self) -> Collection: ...

    def close(self) -> None: ...

    # optional: `inherit(previous)`, to carry on what the collector it replaces at a reload learned (Exporter.replace)
