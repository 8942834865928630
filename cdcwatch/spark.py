"""What the exporter's side knows of the Spark listener (`spark_listeners`, which runs in the Spark driver).

The listener's metrics are declared here, as data, so `cdcwatch docs metrics` and the mixin list them without
pyspark; its port and the job it pushes under are what the reference docs and the mixin's selectors name.
Nothing here imports Spark or `spark_listeners`: the listener imports this module, never the reverse.
"""

from __future__ import annotations

from cdcwatch.specs import MetricSpec, metric_specs

__all__ = ["DEFAULT_METRICS_ADDRESS", "DEFAULT_METRICS_PORT", "PUSH_JOB", "SPARK_METRICS", "QUERY_STATE", "QUERY_FAILURE_INFO",
           "QUERY_COMMIT_GROUP_INFO",
           "BATCHES_TOTAL", "INPUT_ROWS_TOTAL", "EVENTS_TOTAL", "CHANGES_TOTAL", "CHANGES_APPLIED_TOTAL", "DUPLICATES_TOTAL",
           "STALE_EVENTS_TOTAL", "MALFORMED_EVENTS_TOTAL", "LOST_OFFSETS_TOTAL", "INPUT_ROWS_PER_SECOND", "PROCESSED_ROWS_PER_SECOND",
           "APPLY_LAG_SECONDS", "NEWEST_APPLIED_CHANGE_TIMESTAMP_SECONDS", "NEWEST_APPLIED_HEARTBEAT_TIMESTAMP_SECONDS",
           "FRESHNESS_SECONDS", "SOURCE_OFFSETS_BEHIND_LATEST", "LAST_PROGRESS_TIMESTAMP_SECONDS", "BATCH_DURATION_SECONDS",
           "STAGE_LATENCY_SECONDS", "CLOCK_SKEW_CHANGES_TOTAL"]

DEFAULT_METRICS_PORT = 10122
"""Port of the listener's /metrics in the Spark driver."""
DEFAULT_METRICS_ADDRESS = "0.0.0.0"
"""Address the listener's /metrics binds to: every interface, as exporters do, because the driver runs on a host
(or in a pod) that Prometheus reaches from elsewhere. Pass the driver's own address (or 127.0.0.1) to restrict it."""
PUSH_JOB = "cdcwatch-spark"
"""The `job` the listener pushes under to a Pushgateway: the one the mixin's `Selectors.spark` selects."""

_QUERY = ("query",)
_QUERY_SERVER = ("query", "server")
_QUERY_SERVER_TABLE = ("query", "server", "table")
"""`table`: the source table (`database.schema.table` as the events name it) where the sink counts per table, as the
reference apply job's targets do; empty for a sink that reports batch totals only."""

# served by the listener's own /metrics in the Spark driver
QUERY_STATE = MetricSpec("cdcwatch_spark_query_state", "gauge", (
    "1 for the query's state (active, terminated, failed), 0 for the others."),
    ("query", "state"))
QUERY_FAILURE_INFO = MetricSpec("cdcwatch_spark_query_failure_info", "gauge", (
    "1 for a failed query; `exception` is its exception class (a fixed set, else other)."),
    ("query", "exception"))
QUERY_COMMIT_GROUP_INFO = MetricSpec("cdcwatch_spark_query_commit_group_info", "gauge", (
    "1 for the Kafka consumer group the query's finished offsets are committed under for lag monitors"
    " (`--commit-group`); the query's checkpoint holds its offsets, so that group's stall is the query's"
    " staleness, which the freshness alert pages."),
    ("query", "group"))
BATCHES_TOTAL = MetricSpec("cdcwatch_spark_batches_total", "counter", "Micro-batches completed.", _QUERY)
INPUT_ROWS_TOTAL = MetricSpec("cdcwatch_spark_input_rows_total", "counter", "Records read by the query's sources.", _QUERY)
EVENTS_TOTAL = MetricSpec("cdcwatch_spark_events_total", "counter", (
    "Kafka records decoded (row changes, heartbeats, DDL, transaction markers, malformed)."),
    _QUERY_SERVER)
CHANGES_TOTAL = MetricSpec("cdcwatch_spark_changes_total", "counter", (
    "Row changes (create, update, delete, snapshot read) seen by the query."),
    _QUERY_SERVER)
CHANGES_APPLIED_TOTAL = MetricSpec("cdcwatch_spark_changes_applied_total", "counter", (
    "Row changes the sink applied to the target, by source table."),
    _QUERY_SERVER_TABLE)
DUPLICATES_TOTAL = MetricSpec("cdcwatch_spark_duplicates_total", "counter", (
    "Row changes whose key and source position were already applied (at-least-once re-deliveries), within"
    " a batch and across batches; by source table."),
    _QUERY_SERVER_TABLE)
STALE_EVENTS_TOTAL = MetricSpec("cdcwatch_spark_stale_events_total", "counter", (
    "Row changes older than the target's row (out of order); they never overwrite it. By source table."),
    _QUERY_SERVER_TABLE)
MALFORMED_EVENTS_TOTAL = MetricSpec("cdcwatch_spark_malformed_events_total", "counter", (
    "Records that are no readable Debezium event; counted and skipped."),
    _QUERY_SERVER)
LOST_OFFSETS_TOTAL = MetricSpec("cdcwatch_spark_lost_offsets_total", "counter", (
    "Offsets gone from the broker before the query read them (data loss, failOnDataLoss=false)."),
    _QUERY_SERVER)
INPUT_ROWS_PER_SECOND = MetricSpec("cdcwatch_spark_input_rows_per_second", "gauge", "Input rate of the last micro-batch.", _QUERY)
PROCESSED_ROWS_PER_SECOND = MetricSpec("cdcwatch_spark_processed_rows_per_second", "gauge", (
    "Processing rate of the last micro-batch."),
    _QUERY)
APPLY_LAG_SECONDS = MetricSpec("cdcwatch_spark_apply_lag_seconds", "gauge", (
    "Now minus the source commit time of the changes in the last batch with changes, when it was applied;"
    " `percentile` 50, 99 or max."),
    ("query", "server", "percentile"))
NEWEST_APPLIED_CHANGE_TIMESTAMP_SECONDS = MetricSpec("cdcwatch_spark_newest_applied_change_timestamp_seconds", "gauge", (
    "Source commit time of the newest applied change."),
    _QUERY_SERVER)
NEWEST_APPLIED_HEARTBEAT_TIMESTAMP_SECONDS = MetricSpec("cdcwatch_spark_newest_applied_heartbeat_timestamp_seconds", "gauge", (
    "Emit time of the newest Debezium heartbeat applied; for TiCDC, the commit time of the newest WATERMARK "
    "applied (every change before it was sent)."),
    _QUERY_SERVER)
FRESHNESS_SECONDS = MetricSpec("cdcwatch_spark_freshness_seconds", "gauge", (
    "End-to-end freshness: age of the newest applied change or heartbeat, at scrape time; grows while "
    "changes wait to be applied, stays low on an idle source with heartbeats."),
    _QUERY_SERVER)
SOURCE_OFFSETS_BEHIND_LATEST = MetricSpec("cdcwatch_spark_source_offsets_behind_latest", "gauge", (
    "Records in Kafka the query has not read yet, per topic, after the last batch."),
    ("query", "topic"))
LAST_PROGRESS_TIMESTAMP_SECONDS = MetricSpec("cdcwatch_spark_last_progress_timestamp_seconds", "gauge", (
    "When the query last reported progress."),
    _QUERY)
BATCH_DURATION_SECONDS = MetricSpec("cdcwatch_spark_batch_duration_seconds", "histogram", (
    "Micro-batch duration (trigger execution)."),
    _QUERY)
STAGE_LATENCY_SECONDS = MetricSpec("cdcwatch_spark_stage_latency_seconds", "histogram", (
    "Latency of each row change by stage: capture (source commit → connector, payload.ts_ms − source.ts_ms),"
    " produce (connector → the Kafka record's timestamp), queue (that timestamp → start of the micro-batch"
    " reading it), apply (batch start → batch end, the same for every change of the batch). `timestamp_type`"
    " (produce, queue): the record's timestamp is the producer's send (create_time) or the broker's append"
    " (log_append_time). A negative stage (clock skew) counts as 0. Where the sink reports which changes it"
    " took as new (the reference PostgreSQL target does), re-deliveries are left out; else every change read."),
    ("query", "server", "stage", "timestamp_type"))
CLOCK_SKEW_CHANGES_TOTAL = MetricSpec("cdcwatch_spark_clock_skew_changes_total", "counter", (
    "Row changes whose stage came out negative (the clocks at its two ends disagree); counted as 0 s in"
    " cdcwatch_spark_stage_latency_seconds."),
    ("query", "server", "stage", "timestamp_type"))

SPARK_METRICS = metric_specs(
    QUERY_STATE,
    QUERY_FAILURE_INFO,
    QUERY_COMMIT_GROUP_INFO,
    BATCHES_TOTAL,
    INPUT_ROWS_TOTAL,
    EVENTS_TOTAL,
    CHANGES_TOTAL,
    CHANGES_APPLIED_TOTAL,
    DUPLICATES_TOTAL,
    STALE_EVENTS_TOTAL,
    MALFORMED_EVENTS_TOTAL,
    LOST_OFFSETS_TOTAL,
    INPUT_ROWS_PER_SECOND,
    PROCESSED_ROWS_PER_SECOND,
    APPLY_LAG_SECONDS,
    NEWEST_APPLIED_CHANGE_TIMESTAMP_SECONDS,
    NEWEST_APPLIED_HEARTBEAT_TIMESTAMP_SECONDS,
    FRESHNESS_SECONDS,
    SOURCE_OFFSETS_BEHIND_LATEST,
    LAST_PROGRESS_TIMESTAMP_SECONDS,
    BATCH_DURATION_SECONDS,
    STAGE_LATENCY_SECONDS,
    CLOCK_SKEW_CHANGES_TOTAL,
)
