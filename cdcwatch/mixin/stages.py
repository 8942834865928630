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

from cdcwatch.collectors import COLLECTORS, Registry, Stage
from cdcwatch.config import Config
from cdcwatch.spark import SPARK_METRICS

__all__ = ["SPARK", "STAGES", "configured_stages", "metric_stage", "pipeline_stages", "stage_names", "stages_of"]

SPARK = Stage("spark", "The Spark listener in the apply job's driver (`spark_listeners`).")
"""The apply job's stage: its listener is no target of the exporter's, so no entry of the registry."""


def pipeline_stages(registry: Registry = COLLECTORS) -> tuple[Stage, ...]:
    """Every stage: each registered kind's, in the registry's order, then the Spark listener's."""
    return (*(stage for entry in registry for stage in entry.pipeline_stages()), SPARK)


def stage_names(registry: Registry = COLLECTORS) -> tuple[str, ...]:
    return tuple(stage.name for stage in pipeline_stages(registry))


STAGES = stage_names()
"""The fields of `MixinConfig.stages`, and the order of the chart's shape bits."""

_SELF = frozenset({"up", "cdcwatch_kafka_series_dropped_total"})
"""Series of the monitor itself (Prometheus' `up`, the exporter's own limits): every deployment has them."""


@cache
def _table(registry: Registry) -> dict[str, str]:
    table = {spec.name: entry.stage_of(spec) for entry in registry for spec in entry.specs()}
    return table | {spec.name: SPARK.name for spec in SPARK_METRICS.values()}


def metric_stage(name: str, registry: Registry = COLLECTORS) -> str | None:
    """The stage whose collector (or listener) exports `name`; None for the monitor's own series."""
    if name in _SELF:
        return None
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    return _table(registry).get(name) or _table(registry).get(base)


def stages_of(metrics: Iterable[str], registry: Registry = COLLECTORS) -> frozenset[str]:
    return frozenset(stage for name in metrics if (stage := metric_stage(name, registry)) is not None)


def configured_stages(config: Config, spark: bool, registry: Registry = COLLECTORS) -> frozenset[str]:
    """The stages the exporter's configuration collects, as the chart decides the stages it leaves at `auto`: a kind's
    stage when its section has an entry (one that sets the stage's `key`, where it has one); the Spark listener's,
    which the exporter does not scrape, when `spark` says Prometheus scrapes it."""
    found = {stage.name for entry in registry for stage in entry.pipeline_stages()
             if any(not stage.key or getattr(target, stage.key, None) is not None
                    for target in config.targets(entry.section))}
    return frozenset(found | ({SPARK.name} if spark else set()))
