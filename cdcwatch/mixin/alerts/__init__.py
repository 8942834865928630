"""The rule groups, one module per area of the pipeline."""

from cdcwatch.mixin.alerts import canary, connect, debezium, delta, exporter, kafka, mysql, pipeline, postgres, reconcile, spark
from cdcwatch.mixin.alerts.model import Alert, Case, Group, Recording

__all__ = ["ALERTS", "GROUPS", "RECORDING_RULES", "Alert", "Case", "Group", "Recording"]

GROUPS: tuple[Group, ...] = (debezium.GROUP, connect.GROUP, postgres.GROUP, mysql.GROUP, kafka.GROUP, spark.GROUP,
                            pipeline.GROUP, reconcile.GROUP, canary.GROUP, delta.GROUP, exporter.GROUP)
ALERTS: tuple[Alert, ...] = tuple(a for g in GROUPS for a in g.alerts)
RECORDING_RULES: tuple[Recording, ...] = tuple(r for g in GROUPS for r in g.recordings)
