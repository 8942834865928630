"""Which stage of the pipeline each metric comes from, and so which rules and panels a deployment gets.

A rule (or a panel) belongs to the stages whose series it reads, recording rules followed to what they read;
it is generated only when the mixin config's `stages` has all of them. A rule whose expression differs by
deployment (an idle proof from another stage, an estimate from either source database) says so with
`shaped`; it is rendered for the stages at hand and never reads a stage that is left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache

from cdcwatch.collectors import COLLECTORS
from cdcwatch.spark import SPARK_METRICS

__all__ = ["STAGES", "metric_stage", "stages_of"]

STAGES = ("debezium", "connect_rest", "connect_jmx", "kafka", "postgres", "mysql", "spark", "reconcile", "canary")
"""The fields of `MixinConfig.stages`, in pipeline order, then the checks of the whole pipeline's result
(reconciliation, the canary; the canary last: the chart's shape bits of the others stay as they were)."""

_SELF = frozenset({"up", "cdcwatch_kafka_series_dropped_total"})
"""Series of the monitor itself (Prometheus' `up`, the exporter's own limits): every deployment has them."""


@cache
def _table() -> dict[str, str]:
    table = {spec.name: entry.stage_of(spec) for entry in COLLECTORS for spec in entry.specs()}
    return table | {spec.name: "spark" for spec in SPARK_METRICS.values()}


def metric_stage(name: str) -> str | None:
    """The stage whose collector (or listener) exports `name`; None for the monitor's own series."""
    if name in _SELF:
        return None
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    return _table().get(name) or _table().get(base)


def stages_of(metrics: Iterable[str]) -> frozenset[str]:
    return frozenset(stage for name in metrics if (stage := metric_stage(name)) is not None)
