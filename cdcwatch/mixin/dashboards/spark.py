"""The Spark apply job: lag and freshness, latency by stage, throughput, correctness and data loss, query state."""

# ruff: noqa: E501 (each panel's PromQL is one literal block, its lines as long as on the dashboard)

from cdcwatch.mixin.dashboards.model import QUERY_STATES, DashboardSpec, PanelSpec, Query, Threshold, Variable

__all__ = ["SPARK"]


SPARK = DashboardSpec(
    "cdcwatch-spark", "CDC: Spark apply",
    "Apply lag and freshness, latency by stage, throughput, duplicates and data loss, and the state of the apply jobs' "
    "queries.",
    "cdcwatch_spark_query_state{%(spark)s",
    (Variable("query", "label_values(cdcwatch_spark_query_state{%(spark_board)s}, query)"),
     Variable("server", 'label_values(cdcwatch_spark_changes_total{%(spark_board)s, query=~"$query"}, server)')),
    (
        ("Lag", (
            PanelSpec("Apply lag", "How long after their source commit the last batch's changes were applied, by "
                      "percentile (frozen while the source is idle).", "s",
                      (Query('max by (query, percentile) (cdcwatch_spark_apply_lag_seconds{%(spark_board)s, query=~"$query", server=~"$server"})',
                             "{{query}} p{{percentile}}"),), threshold=Threshold("spark_apply_lag_seconds")),
            PanelSpec("Freshness of the target", "Age of the newest change or heartbeat applied.", "s",
                      (Query('max by (query, server) (cdcwatch_spark_freshness_seconds{%(spark_board)s, query=~"$query", server=~"$server"})', "{{query}} ({{server}})"),),
                      threshold=Threshold("spark_freshness_seconds")),
            PanelSpec("Offsets behind latest", "Records in Kafka the query has not read yet, after its last batch.", "short",
                      (Query('sum by (query) (cdcwatch_spark_source_offsets_behind_latest{%(spark_board)s, query=~"$query"})', "{{query}}"),)),
        )),
        ("Latency by stage", (
            PanelSpec("Latency by stage", "p50, p95 and p99 over 5 minutes of each stage of a change: capture (source "
                      "commit → connector), produce (connector → the Kafka record's timestamp; timestamp_type says whose), "
                      "queue (→ start of the batch reading it), apply (batch start → end); and the end-to-end p99 of the "
                      "last batch with changes.", "s",
                      (Query('query_stage:cdcwatch_spark_stage_latency_seconds:p50{%(scope)s, query=~"$query", server=~"$server"}', "{{query}} {{stage}} {{timestamp_type}} p50"),
                       Query('query_stage:cdcwatch_spark_stage_latency_seconds:p95{%(scope)s, query=~"$query", server=~"$server"}', "{{query}} {{stage}} {{timestamp_type}} p95"),
                       Query('query_stage:cdcwatch_spark_stage_latency_seconds:p99{%(scope)s, query=~"$query", server=~"$server"}', "{{query}} {{stage}} {{timestamp_type}} p99"),
                       Query('query:cdcwatch_spark_apply_lag_seconds:p99{%(scope)s, query=~"$query", server=~"$server"}', "{{query}} end to end p99")),
                      threshold=Threshold("pipeline_latency_p99_seconds")),
            PanelSpec("Changes with clock skew", "Changes per second whose stage came out negative (the clocks at its two "
                      "ends disagree), counted as 0 s in the latency by stage.", "ops",
                      (Query('sum by (query, stage, timestamp_type) (rate(cdcwatch_spark_clock_skew_changes_total{%(spark_board)s, query=~"$query", server=~"$server"}[$__rate_interval]))', "{{query}} {{stage}} {{timestamp_type}}"),)),
        )),
        ("Throughput", (
            PanelSpec("Rows processed", "Processing rate of the last micro-batch.", "ops",
                      (Query('max by (query) (cdcwatch_spark_processed_rows_per_second{%(spark_board)s, query=~"$query"})', "{{query}}"),)),
            PanelSpec("Changes applied", "Row changes written to the target per second.", "ops",
                      (Query('sum by (query) (rate(cdcwatch_spark_changes_applied_total{%(spark_board)s, query=~"$query", server=~"$server"}[$__rate_interval]))',
                             "{{query}}"),)),
            PanelSpec("Batch duration p95", "95th percentile of the micro-batch duration.", "s",
                      (Query('histogram_quantile(0.95, sum by (query, le) (rate(cdcwatch_spark_batch_duration_seconds_bucket{%(spark_board)s, query=~"$query"}[$__rate_interval])))', "{{query}}"),), alerts=("CdcSparkNoProgress",)),
        )),
        ("Correctness and data loss", (
            PanelSpec("Duplicates per change", "Share of the changes read that are re-deliveries.", "percentunit",
                      (Query('query:cdcwatch_spark_duplicates:ratio_rate5m{%(scope)s, query=~"$query", server=~"$server"}',
                             "{{query}}"),), threshold=Threshold("spark_duplicates_ratio")),
            PanelSpec("Stale events", "Out-of-order changes older than the target's row, ignored, per second.", "ops",
                      (Query('sum by (query) (rate(cdcwatch_spark_stale_events_total{%(spark_board)s, query=~"$query", server=~"$server"}[$__rate_interval]))',
                             "{{query}}"),)),
            PanelSpec("By source table", "Changes applied, duplicates and stale events of each source table over the "
                      "board's range, where the sink counts by table (the reference apply job's targets do).", "short",
                      (Query('sum by (query, table) (increase(cdcwatch_spark_changes_applied_total{%(spark_board)s, query=~"$query", server=~"$server", table!=""}[$__range]))', ""),
                       Query('sum by (query, table) (increase(cdcwatch_spark_duplicates_total{%(spark_board)s, query=~"$query", server=~"$server", table!=""}[$__range]))', ""),
                       Query('sum by (query, table) (increase(cdcwatch_spark_stale_events_total{%(spark_board)s, query=~"$query", server=~"$server", table!=""}[$__range]))', "")),
                      kind="table"),
            PanelSpec("Malformed records and lost offsets", "Records that are no Debezium event, and offsets deleted "
                      "before they were read, per interval.", "short",
                      (Query('sum by (query) (increase(cdcwatch_spark_malformed_events_total{%(spark_board)s, query=~"$query", server=~"$server"}[$__rate_interval]))',
                             "{{query}} malformed"),
                       Query('sum by (query) (increase(cdcwatch_spark_lost_offsets_total{%(spark_board)s, query=~"$query", server=~"$server"}[$__rate_interval]))',
                             "{{query}} lost offsets", when="the query runs with failOnDataLoss=false")),
                      alerts=("CdcSparkMalformedEvents", "CdcSparkLostOffsets")),
            PanelSpec("Query state", "The state of each query (active, terminated, failed).", "none",
                      (Query("""
                                 max by (query) (
                                   cdcwatch_spark_query_state{%(spark_board)s, query=~"$query", state="active"} * 1
                                   or cdcwatch_spark_query_state{%(spark_board)s, query=~"$query", state="terminated"} * 2
                                   or cdcwatch_spark_query_state{%(spark_board)s, query=~"$query", state="failed"} * 3
                                 )
                                 """, "{{query}}"),),
                      kind="state", mappings=QUERY_STATES, alerts=("CdcSparkQueryFailed",)),
        )),
    ), stage="spark")
