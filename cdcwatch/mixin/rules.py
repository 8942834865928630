"""Alert and recording rules, as data, rendered with a `MixinConfig`.

Every alert carries an `Example`: input series on which it must fire (with the exact labels and
value expected) and series on which it must stay quiet. `promtool_tests()` turns the examples into a
`promtool test rules` file, so every rule is proven against Prometheus' own evaluator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from cdcwatch.mixin.config import MixinConfig

__all__ = ["ALERTS", "RECORDING_RULES", "Alert", "Example", "Recording", "promtool_tests", "render_annotation",
           "rule_groups"]


@dataclass(frozen=True)
class Recording:
    record: str
    expr: Callable[[MixinConfig], str]


@dataclass(frozen=True)
class Example:
    fires: dict[str, str]
    """series → promtool values on which the alert fires at `at`."""
    labels: dict[str, str]
    """The labels the firing alert has (besides alertname and severity)."""
    value: float
    quiet: dict[str, str]
    """series on which it must not fire."""
    at: str = "20m"


@dataclass(frozen=True)
class Alert:
    name: str
    expr: Callable[[MixinConfig], str]
    severity: str  # critical | warning
    urgency: str   # critical | warning | instant: picks the `for` from config.durations
    summary: str
    description: Callable[[MixinConfig], str]
    example: Example
    extra: dict[str, Any] = field(default_factory=dict)

    def for_(self, config: MixinConfig) -> str:
        return getattr(config.durations, self.urgency)


def _job(which: str = "cdcwatch") -> Callable[[MixinConfig], str]:
    return lambda c: getattr(c.selectors, which)


# Example series use the default selectors: job="cdcwatch" for the exporter, job="cdcwatch-spark" for Spark.
_E = 'job="cdcwatch",instance="exporter:10121"'
_S = 'job="cdcwatch-spark",instance="driver:10122"'
_DBZ = f'{_E},target="pg",plugin="postgres",server="inventory"'
_DBZ_LABELS = {"target": "pg", "plugin": "postgres", "server": "inventory"}


def _e(extra: str = "") -> dict[str, str]:
    """The labels of an exporter example series as a dict."""
    text = ",".join(filter(None, (_E, extra)))
    return dict(re.findall(r'(\w+)="([^"]*)"', text))


RECORDING_RULES: tuple[Recording, ...] = (
    Recording("server:cdcwatch_debezium_lag_behind_source_seconds:max",
              lambda c: f'max by (target, plugin, server) (cdcwatch_debezium_lag_behind_source_seconds{{{c.selectors.cdcwatch},context="streaming"}})'),
    Recording("server:cdcwatch_debezium_events_seen:rate5m",
              lambda c: f'sum by (target, plugin, server) (rate(cdcwatch_debezium_events_seen_total{{{c.selectors.cdcwatch},context="streaming"}}[5m]))'),
    Recording("group_topic:cdcwatch_kafka_consumergroup_lag_seconds:max",
              lambda c: f"max by (group, topic, server) (cdcwatch_kafka_consumergroup_topic_lag_seconds{{{c.selectors.cdcwatch}}})"),
    Recording("query:cdcwatch_spark_apply_lag_seconds:p99",
              lambda c: f'max by (query, server) (cdcwatch_spark_apply_lag_seconds{{{c.selectors.spark},percentile="99"}})'),
    Recording("query:cdcwatch_spark_duplicates:ratio_rate5m",
              lambda c: f"sum by (query, server) (rate(cdcwatch_spark_duplicates_total{{{c.selectors.spark}}}[5m]))"
                        f" / sum by (query, server) (rate(cdcwatch_spark_changes_total{{{c.selectors.spark}}}[5m]))"),
)

ALERTS: tuple[Alert, ...] = (
    # --- Debezium -------------------------------------------------------------------------------------
    Alert("CdcDebeziumConnectorDisconnected",
          lambda c: f'cdcwatch_debezium_connected{{{c.selectors.cdcwatch},context="streaming"}} == 0',
          "critical", "critical", "Debezium connector {{ $labels.server }} is disconnected from its database",
          lambda c: f"The {{{{ $labels.plugin }}}} connector {{{{ $labels.server }}}} on {{{{ $labels.target }}}} has not been "
                    f"connected to its source database for {c.durations.critical}: no changes are captured.",
          Example({f'cdcwatch_debezium_connected{{{_DBZ},context="streaming"}}': "0x40"},
                  {**_e('target="pg",plugin="postgres",server="inventory",context="streaming"')}, 0,
                  {f'cdcwatch_debezium_connected{{{_DBZ},context="streaming"}}': "1x40"})),
    Alert("CdcDebeziumSourceLagHigh",
          lambda c: f"server:cdcwatch_debezium_lag_behind_source_seconds:max > {c.thresholds.debezium_lag_seconds:g}",
          "warning", "warning", "Debezium connector {{ $labels.server }} lags behind its source",
          lambda c: f"The connector {{{{ $labels.server }}}} on {{{{ $labels.target }}}} processes changes "
                    f"{{{{ $value | printf \"%.0f\" }}}}s after they were committed (threshold {c.thresholds.debezium_lag_seconds:g}s).",
          Example({f'cdcwatch_debezium_lag_behind_source_seconds{{{_DBZ},context="streaming"}}': "120x40"},
                  _DBZ_LABELS, 120, {f'cdcwatch_debezium_lag_behind_source_seconds{{{_DBZ},context="streaming"}}': "5x40"})),
    Alert("CdcDebeziumNoEventsWhileSourceBusy",
          lambda c: f"sum by (server) (server:cdcwatch_debezium_events_seen:rate5m) == 0 and on (server) "
                    f"max by (server) (deriv(cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes{{{c.selectors.cdcwatch}}}[10m])) > 0",
          "critical", "warning", "Debezium connector {{ $labels.server }} emits nothing while its source writes",
          lambda c: "The connector {{ $labels.server }} has seen no change for 5 minutes while the WAL its replication slot "
                    "has not confirmed keeps growing: the connector is stuck (its lag reading is frozen), not idle.",
          Example({f'cdcwatch_debezium_events_seen_total{{{_DBZ},context="streaming"}}': "500x40",
                   f'cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes{{{_E},slot="inventory_slot",server="inventory"}}': "0+4096x40"},
                  {"server": "inventory"}, 0,
                  {f'cdcwatch_debezium_events_seen_total{{{_DBZ},context="streaming"}}': "500+20x40",
                   f'cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes{{{_E},slot="inventory_slot",server="inventory"}}': "0+4096x40"},
                  at="25m")),
    Alert("CdcDebeziumQueueSaturated",
          lambda c: f"cdcwatch_debezium_queue_remaining_capacity{{{c.selectors.cdcwatch}}} / "
                    f"cdcwatch_debezium_queue_capacity{{{c.selectors.cdcwatch}}} < {c.thresholds.debezium_queue_free_ratio:g}",
          "warning", "warning", "Debezium connector {{ $labels.server }}: its change queue is nearly full",
          lambda c: "Only {{ $value | printf \"%.2f\" }} of the queue between the {{ $labels.context }} reader and Kafka "
                    "is free: the connector produces faster than Kafka Connect ships.",
          Example({f'cdcwatch_debezium_queue_remaining_capacity{{{_DBZ},context="streaming"}}': "82x40",
                   f'cdcwatch_debezium_queue_capacity{{{_DBZ},context="streaming"}}': "8192x40"},
                  _e('target="pg",plugin="postgres",server="inventory",context="streaming"'), 82 / 8192,
                  {f'cdcwatch_debezium_queue_remaining_capacity{{{_DBZ},context="streaming"}}': "8000x40",
                   f'cdcwatch_debezium_queue_capacity{{{_DBZ},context="streaming"}}': "8192x40"})),
    Alert("CdcDebeziumSnapshotAborted",
          lambda c: f'cdcwatch_debezium_snapshot_state{{{c.selectors.cdcwatch},state="aborted"}} == 1',
          "warning", "instant", "Debezium connector {{ $labels.server }}: its snapshot was aborted",
          lambda c: "The snapshot of {{ $labels.server }} on {{ $labels.target }} was aborted; the target misses the rows "
                    "it had not copied yet.",
          Example({f'cdcwatch_debezium_snapshot_state{{{_DBZ},context="snapshot",state="aborted"}}': "1x40"},
                  _e('target="pg",plugin="postgres",server="inventory",context="snapshot",state="aborted"'), 1,
                  {f'cdcwatch_debezium_snapshot_state{{{_DBZ},context="snapshot",state="aborted"}}': "0x40"})),
    Alert("CdcDebeziumSnapshotTooLong",
          lambda c: f"cdcwatch_debezium_snapshot_duration_seconds{{{c.selectors.cdcwatch}}} > {c.thresholds.snapshot_max_seconds:g} "
                    f'and on (target, plugin, server) cdcwatch_debezium_snapshot_state{{{c.selectors.cdcwatch},state="running"}} == 1',
          "warning", "warning", "Debezium connector {{ $labels.server }}: the snapshot runs too long",
          lambda c: f"The snapshot of {{{{ $labels.server }}}} has run for {{{{ $value | printf \"%.0f\" }}}}s "
                    f"(threshold {c.thresholds.snapshot_max_seconds:g}s); streaming starts only after it.",
          Example({f'cdcwatch_debezium_snapshot_duration_seconds{{{_DBZ},context="snapshot"}}': "30000+60x40",
                   f'cdcwatch_debezium_snapshot_state{{{_DBZ},context="snapshot",state="running"}}': "1x40"},
                  _e('target="pg",plugin="postgres",server="inventory",context="snapshot"'), 30000 + 60 * 20,
                  {f'cdcwatch_debezium_snapshot_duration_seconds{{{_DBZ},context="snapshot"}}': "30000+60x40",
                   f'cdcwatch_debezium_snapshot_state{{{_DBZ},context="snapshot",state="running"}}': "0x40"})),
    Alert("CdcDebeziumSchemaHistoryNotRunning",
          lambda c: f'max by (target, plugin, server) (cdcwatch_debezium_schema_history_state{{{c.selectors.cdcwatch},state=~"stopped|recovering"}}) == 1',
          "critical", "critical", "Debezium connector {{ $labels.server }}: schema history is not running",
          lambda c: f"The schema history of {{{{ $labels.server }}}} has not been RUNNING for {c.durations.critical}: "
                    "the connector cannot read the log with the right table schemas.",
          Example({f'cdcwatch_debezium_schema_history_state{{{_DBZ},context="schema-history",state="stopped"}}': "1x40"},
                  _DBZ_LABELS, 1,
                  {f'cdcwatch_debezium_schema_history_state{{{_DBZ},context="schema-history",state="stopped"}}': "0x40"})),
    Alert("CdcDebeziumErroneousEvents",
          lambda c: f"sum by (target, plugin, server) (increase(cdcwatch_debezium_erroneous_events_total{{{c.selectors.cdcwatch}}}[10m])) > 0",
          "warning", "instant", "Debezium connector {{ $labels.server }} hits erroneous events",
          lambda c: "The connector {{ $labels.server }} on {{ $labels.target }} counted events it could not process in the "
                    "last 10 minutes; see its log for the failing records.",
          Example({f'cdcwatch_debezium_erroneous_events_total{{{_DBZ},context="streaming"}}': "0+1x40"}, _DBZ_LABELS, 0,
                  {f'cdcwatch_debezium_erroneous_events_total{{{_DBZ},context="streaming"}}': "3x40"})),
    Alert("CdcDebeziumMetricsVanished",
          lambda c: f"cdcwatch_debezium_mbeans{{{c.selectors.cdcwatch}}} == 0 and "
                    f"max_over_time(cdcwatch_debezium_mbeans{{{c.selectors.cdcwatch}}}[1h]) > 0",
          "critical", "critical", "Debezium beans vanished from {{ $labels.target }}",
          lambda c: "The JVM of {{ $labels.target }} answers but no longer registers Debezium connector beans: "
                    "the connector or its task stopped (see Kafka Connect's task state).",
          Example({f'cdcwatch_debezium_mbeans{{{_E},target="pg"}}': "3 3 3 0x40"}, _e('target="pg"'), 0,
                  {f'cdcwatch_debezium_mbeans{{{_E},target="pg"}}': "3x40"})),
    # --- Kafka Connect, PostgreSQL slots --------------------------------------------------------------
    Alert("CdcConnectTaskFailed",
          lambda c: f"max by (connector, server, task, exception) (cdcwatch_connect_task_failure_info{{{c.selectors.cdcwatch}}}) == 1",
          "critical", "instant", "Kafka Connect task {{ $labels.connector }}/{{ $labels.task }} FAILED",
          lambda c: "Task {{ $labels.task }} of {{ $labels.connector }} (server {{ $labels.server }}) failed with "
                    "{{ $labels.exception }}; it stays FAILED until restarted.",
          Example({f'cdcwatch_connect_task_failure_info{{{_E},target="w",connector="inv",server="inventory",task="0",exception="org.apache.kafka.connect.errors.ConnectException"}}': "1x40"},
                  {"connector": "inv", "server": "inventory", "task": "0",
                   "exception": "org.apache.kafka.connect.errors.ConnectException"}, 1,
                  {f'cdcwatch_connect_task_state{{{_E},target="w",connector="inv",server="inventory",task="0",state="FAILED"}}': "0x40"})),
    Alert("CdcConnectConnectorFailed",
          lambda c: f"max by (connector, server, exception) (cdcwatch_connect_connector_failure_info{{{c.selectors.cdcwatch}}}) == 1",
          "critical", "instant", "Kafka Connect connector {{ $labels.connector }} FAILED",
          lambda c: "The connector {{ $labels.connector }} (server {{ $labels.server }}) failed with {{ $labels.exception }}; "
                    "a connector that fails at start-up has no Debezium beans at all.",
          Example({f'cdcwatch_connect_connector_failure_info{{{_E},target="w",connector="inv",server="inventory",exception="java.lang.ClassNotFoundException"}}': "1x40"},
                  {"connector": "inv", "server": "inventory", "exception": "java.lang.ClassNotFoundException"}, 1,
                  {f'cdcwatch_connect_connector_state{{{_E},target="w",connector="inv",server="inventory",state="FAILED"}}': "0x40"})),
    Alert("CdcPostgresSlotInactive",
          lambda c: f"cdcwatch_postgres_replication_slot_active{{{c.selectors.cdcwatch}}} == 0",
          "warning", "warning", "Replication slot {{ $labels.slot }} has no consumer",
          lambda c: f"Nobody has read slot {{{{ $labels.slot }}}} (server {{{{ $labels.server }}}}) for {c.durations.warning}; "
                    "it keeps WAL on the database's disk until its connector comes back.",
          Example({f'cdcwatch_postgres_replication_slot_active{{{_E},target="pg",slot="inventory_slot",slot_type="logical",plugin="pgoutput",database="shop",server="inventory"}}': "0x40"},
                  _e('target="pg",slot="inventory_slot",slot_type="logical",plugin="pgoutput",database="shop",server="inventory"'), 0,
                  {f'cdcwatch_postgres_replication_slot_active{{{_E},target="pg",slot="inventory_slot",slot_type="logical",plugin="pgoutput",database="shop",server="inventory"}}': "1x40"})),
    Alert("CdcPostgresSlotRetainedWalHigh",
          lambda c: f"max by (slot, server) (cdcwatch_postgres_replication_slot_retained_wal_bytes{{{c.selectors.cdcwatch}}}) > {c.thresholds.slot_retained_wal_bytes:g}",
          "warning", "warning", "Replication slot {{ $labels.slot }} holds back too much WAL",
          lambda c: f"Slot {{{{ $labels.slot }}}} keeps {{{{ $value | printf \"%.0f\" }}}} bytes of WAL "
                    f"(threshold {c.thresholds.slot_retained_wal_bytes:.0f}); the database disk fills while its connector lags.",
          Example({f'cdcwatch_postgres_replication_slot_retained_wal_bytes{{{_E},target="pg",slot="inventory_slot",server="inventory"}}': "20000000000x40"},
                  {"slot": "inventory_slot", "server": "inventory"}, 20000000000,
                  {f'cdcwatch_postgres_replication_slot_retained_wal_bytes{{{_E},target="pg",slot="inventory_slot",server="inventory"}}': "1000000x40"})),
    Alert("CdcPostgresSlotWalAtRisk",
          lambda c: f'max by (slot, server, wal_status) (cdcwatch_postgres_replication_slot_wal_status{{{c.selectors.cdcwatch},wal_status=~"unreserved|lost"}}) == 1',
          "critical", "instant", "Replication slot {{ $labels.slot }} is losing WAL",
          lambda c: "Slot {{ $labels.slot }} is {{ $labels.wal_status }}: WAL its connector still needs is past "
                    "max_slot_wal_keep_size; once lost, the connector must snapshot again.",
          Example({f'cdcwatch_postgres_replication_slot_wal_status{{{_E},target="pg",slot="inventory_slot",server="inventory",wal_status="unreserved"}}': "1x40"},
                  {"slot": "inventory_slot", "server": "inventory", "wal_status": "unreserved"}, 1,
                  {f'cdcwatch_postgres_replication_slot_wal_status{{{_E},target="pg",slot="inventory_slot",server="inventory",wal_status="unreserved"}}': "0x40"})),
    # --- Kafka ----------------------------------------------------------------------------------------
    Alert("CdcKafkaConsumerLagHigh",
          lambda c: f"group_topic:cdcwatch_kafka_consumergroup_lag_seconds:max > {c.thresholds.kafka_lag_seconds:g}",
          "warning", "warning", "Consumer group {{ $labels.group }} lags on {{ $labels.topic }}",
          lambda c: f"The next message group {{{{ $labels.group }}}} will read from {{{{ $labels.topic }}}} is "
                    f"{{{{ $value | printf \"%.0f\" }}}}s old (threshold {c.thresholds.kafka_lag_seconds:g}s).",
          Example({f'cdcwatch_kafka_consumergroup_topic_lag_seconds{{{_E},target="main",group="apply",topic="inventory.public.items",server="inventory"}}': "900x40"},
                  {"group": "apply", "topic": "inventory.public.items", "server": "inventory"}, 900,
                  {f'cdcwatch_kafka_consumergroup_topic_lag_seconds{{{_E},target="main",group="apply",topic="inventory.public.items",server="inventory"}}': "3x40"})),
    Alert("CdcKafkaConsumerNotProgressing",
          lambda c: f'cdcwatch_kafka_consumergroup_topic_status{{{c.selectors.cdcwatch},status=~"STALL|STOP|REWIND"}} == 1',
          "warning", "critical", "Consumer group {{ $labels.group }} is {{ $labels.status }} on {{ $labels.topic }}",
          lambda c: "Group {{ $labels.group }} on {{ $labels.topic }}: STALL = members connected but no commit while lag > 0; "
                    "STOP = no member and no commit; REWIND = the committed offset went backwards (re-processing).",
          Example({f'cdcwatch_kafka_consumergroup_topic_status{{{_E},target="main",group="apply",topic="inventory.public.items",status="STALL"}}': "1x40"},
                  _e('target="main",group="apply",topic="inventory.public.items",status="STALL"'), 1,
                  {f'cdcwatch_kafka_consumergroup_topic_status{{{_E},target="main",group="apply",topic="inventory.public.items",status="STALL"}}': "0x40"})),
    Alert("CdcKafkaDataTooOld",
          lambda c: f"time() - max by (server) (cdcwatch_kafka_newest_source_commit_timestamp_seconds{{{c.selectors.cdcwatch}}}) "
                    f"> {c.thresholds.kafka_data_age_seconds:g}",
          "warning", "warning", "The newest change of {{ $labels.server }} in Kafka is old",
          lambda c: f"The newest change any topic of {{{{ $labels.server }}}} holds was committed {{{{ $value | printf \"%.0f\" }}}}s "
                    f"ago (threshold {c.thresholds.kafka_data_age_seconds:g}s): the connector does not deliver, or the source is idle.",
          Example({f'cdcwatch_kafka_newest_source_commit_timestamp_seconds{{{_E},target="main",topic="inventory.public.items",partition="0",server="inventory"}}': "0x100"},
                  {"server": "inventory"}, 4800,
                  {f'cdcwatch_kafka_newest_source_commit_timestamp_seconds{{{_E},target="main",topic="inventory.public.items",partition="0",server="inventory"}}': "0+60x100"},
                  at="80m")),
    # --- Spark ----------------------------------------------------------------------------------------
    Alert("CdcSparkApplyLagHigh",
          lambda c: f"query:cdcwatch_spark_apply_lag_seconds:p99 > {c.thresholds.spark_apply_lag_seconds:g}",
          "warning", "warning", "Spark query {{ $labels.query }} applies changes late",
          lambda c: f"99% of the changes of {{{{ $labels.server }}}} that {{{{ $labels.query }}}} applied in its last batch were "
                    f"committed up to {{{{ $value | printf \"%.0f\" }}}}s before (threshold {c.thresholds.spark_apply_lag_seconds:g}s).",
          Example({f'cdcwatch_spark_apply_lag_seconds{{{_S},query="apply",server="inventory",percentile="99"}}': "300x40"},
                  {"query": "apply", "server": "inventory"}, 300,
                  {f'cdcwatch_spark_apply_lag_seconds{{{_S},query="apply",server="inventory",percentile="99"}}': "4x40"})),
    Alert("CdcSparkFreshnessTooOld",
          lambda c: f"max by (query, server) (cdcwatch_spark_freshness_seconds{{{c.selectors.spark}}}) > {c.thresholds.spark_freshness_seconds:g}",
          "critical", "critical", "The target of {{ $labels.query }} is stale",
          lambda c: f"The newest change or heartbeat of {{{{ $labels.server }}}} applied by {{{{ $labels.query }}}} is "
                    f"{{{{ $value | printf \"%.0f\" }}}}s old (threshold {c.thresholds.spark_freshness_seconds:g}s): "
                    "something between the source and the target has stopped.",
          Example({f'cdcwatch_spark_freshness_seconds{{{_S},query="apply",server="inventory"}}': "900x40"},
                  {"query": "apply", "server": "inventory"}, 900,
                  {f'cdcwatch_spark_freshness_seconds{{{_S},query="apply",server="inventory"}}': "2x40"})),
    Alert("CdcSparkDuplicatesHigh",
          lambda c: f"query:cdcwatch_spark_duplicates:ratio_rate5m > {c.thresholds.spark_duplicates_ratio:g}",
          "warning", "warning", "Spark query {{ $labels.query }} receives many duplicates",
          lambda c: f"{{{{ $value | printf \"%.2f\" }}}} of the changes {{{{ $labels.query }}}} reads are re-deliveries "
                    f"(threshold {c.thresholds.spark_duplicates_ratio:g}): the connector restarts without flushed offsets.",
          Example({f'cdcwatch_spark_duplicates_total{{{_S},query="apply",server="inventory"}}': "0+10x40",
                   f'cdcwatch_spark_changes_total{{{_S},query="apply",server="inventory"}}': "0+100x40"},
                  {"query": "apply", "server": "inventory"}, 0.1,
                  {f'cdcwatch_spark_duplicates_total{{{_S},query="apply",server="inventory"}}': "0x40",
                   f'cdcwatch_spark_changes_total{{{_S},query="apply",server="inventory"}}': "0+100x40"})),
    Alert("CdcSparkQueryFailed",
          lambda c: f"cdcwatch_spark_query_failure_info{{{c.selectors.spark}}} == 1",
          "critical", "instant", "Spark query {{ $labels.query }} failed",
          lambda c: "The query {{ $labels.query }} stopped with {{ $labels.exception }}; nothing is applied until it is restarted.",
          Example({f'cdcwatch_spark_query_failure_info{{{_S},query="apply",exception="DatabaseError"}}': "1x40"},
                  dict(re.findall(r'(\w+)="([^"]*)"', f'{_S},query="apply",exception="DatabaseError"')), 1,
                  {f'cdcwatch_spark_query_state{{{_S},query="apply",state="failed"}}': "0x40"})),
    Alert("CdcSparkNoProgress",
          lambda c: f"time() - cdcwatch_spark_last_progress_timestamp_seconds{{{c.selectors.spark}}} > {c.thresholds.spark_progress_max_age_seconds:g} "
                    f'and on (query, instance, job) cdcwatch_spark_query_state{{{c.selectors.spark},state="active"}} == 1',
          "warning", "warning", "Spark query {{ $labels.query }} makes no progress",
          lambda c: f"The active query {{{{ $labels.query }}}} last reported a micro-batch {{{{ $value | printf \"%.0f\" }}}}s ago "
                    f"(threshold {c.thresholds.spark_progress_max_age_seconds:g}s).",
          Example({f'cdcwatch_spark_last_progress_timestamp_seconds{{{_S},query="apply"}}': "0x40",
                   f'cdcwatch_spark_query_state{{{_S},query="apply",state="active"}}': "1x40"},
                  dict(re.findall(r'(\w+)="([^"]*)"', f'{_S},query="apply"')), 1200,
                  {f'cdcwatch_spark_last_progress_timestamp_seconds{{{_S},query="apply"}}': "0+60x40",
                   f'cdcwatch_spark_query_state{{{_S},query="apply",state="active"}}': "1x40"})),
    # --- the exporter -----------------------------------------------------------------------------------
    Alert("CdcwatchTargetDown",
          lambda c: f"cdcwatch_up{{{c.selectors.cdcwatch}}} == 0",
          "critical", "critical", "cdcwatch cannot reach {{ $labels.target }} ({{ $labels.collector }})",
          lambda c: f"The {{{{ $labels.collector }}}} collection from {{{{ $labels.target }}}} has failed for {c.durations.critical}; "
                    "cdcwatch's log says why (refused, timeout, authentication).",
          Example({f'cdcwatch_up{{{_E},collector="debezium",target="pg"}}': "0x40"}, _e('collector="debezium",target="pg"'), 0,
                  {f'cdcwatch_up{{{_E},collector="debezium",target="pg"}}': "1x40"})),
    Alert("CdcwatchScrapeSlow",
          lambda c: f"cdcwatch_scrape_duration_seconds{{{c.selectors.cdcwatch}}} > {c.thresholds.scrape_duration_seconds:g}",
          "warning", "warning", "Collecting from {{ $labels.target }} is slow",
          lambda c: f"The {{{{ $labels.collector }}}} collection from {{{{ $labels.target }}}} takes {{{{ $value | printf \"%.1f\" }}}}s "
                    f"(threshold {c.thresholds.scrape_duration_seconds:g}s); keep it well below Prometheus' scrape timeout.",
          Example({f'cdcwatch_scrape_duration_seconds{{{_E},collector="kafka",target="main"}}': "8x40"},
                  _e('collector="kafka",target="main"'), 8,
                  {f'cdcwatch_scrape_duration_seconds{{{_E},collector="kafka",target="main"}}': "0.2x40"})),
    Alert("CdcwatchEndpointDown",
          lambda c: f"up{{{c.selectors.cdcwatch}}} == 0 or up{{{c.selectors.spark}}} == 0",
          "critical", "critical", "Prometheus cannot scrape {{ $labels.job }} at {{ $labels.instance }}",
          lambda c: f"{{{{ $labels.instance }}}} ({{{{ $labels.job }}}}) has not answered Prometheus for {c.durations.critical}: "
                    "its metrics, and every alert built on them, are blind.",
          Example({f"up{{{_S}}}": "0x40"}, dict(re.findall(r'(\w+)="([^"]*)"', _S)), 0, {f"up{{{_S}}}": "1x40"})),
)


def _annotations(alert: Alert, config: MixinConfig) -> dict[str, str]:
    return {"summary": alert.summary, "description": alert.description(config),
            "runbook_url": f"{config.runbook_url}#{alert.name.lower()}"}


def rule_groups(config: MixinConfig) -> dict[str, Any]:
    """The Prometheus rule file."""
    return {"groups": [
        {"name": "cdcwatch.recording", "rules": [{"record": r.record, "expr": r.expr(config)} for r in RECORDING_RULES]},
        {"name": "cdcwatch.alerts", "rules": [
            {"alert": a.name, "expr": a.expr(config), "for": a.for_(config), "labels": {"severity": a.severity},
             "annotations": _annotations(a, config), **a.extra} for a in ALERTS]},
    ]}


_TEMPLATE = re.compile(r'\{\{ \$(labels\.(\w+)|value \| printf "%\.(\d)f") \}\}')


def render_annotation(text: str, labels: dict[str, str], value: float) -> str:
    """What Prometheus makes of the annotation templates the rules use ($labels.x, $value | printf)."""
    def replace(match: re.Match[str]) -> str:
        return labels[match.group(2)] if match.group(2) else f"{value:.{int(match.group(3))}f}"
    return _TEMPLATE.sub(replace, text)


def promtool_tests(config: MixinConfig, rule_file: str) -> dict[str, Any]:
    """A `promtool test rules` file: per alert, one case where it fires exactly as expected, one where it must not."""
    tests = []
    for alert in ALERTS:
        example = alert.example
        labels = {**example.labels, "severity": alert.severity}
        annotations = {k: render_annotation(v, labels, example.value) for k, v in _annotations(alert, config).items()}
        for series, expected in ((example.fires, [{"exp_labels": labels, "exp_annotations": annotations}]),
                                 (example.quiet, [])):
            tests.append({"interval": "1m",
                          "input_series": [{"series": s, "values": v} for s, v in series.items()],
                          "alert_rule_test": [{"eval_time": example.at, "alertname": alert.name, "exp_alerts": expected}]})
    return {"rule_files": [rule_file], "evaluation_interval": "1m", "tests": tests}
