"""The Spark apply job: lag and freshness, latency by stage, throughput, correctness and data loss, query state."""

from cdcwatch.mixin.dashboards.model import QUERY_STATES, DashboardSpec, PanelSpec, Query, Threshold, Variable, state_code

__all__ = ["SPARK"]

_SEL = '%(spark_board)s, query=~"$query", server=~"$server"'
_QUERY = '%(spark_board)s, query=~"$query"'
_RECORDED = '{%(scope)s, query=~"$query", server=~"$server"}'

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
                      (Query(f"max by (query, percentile) (cdcwatch_spark_apply_lag_seconds{{{_SEL}}})",
                             "{{query}} p{{percentile}}"),), threshold=Threshold("spark_apply_lag_seconds")),
            PanelSpec("Freshness of the target", "Age of the newest change or heartbeat applied.", "s",
                      (Query(f"max by (query, server) (cdcwatch_spark_freshness_seconds{{{_SEL}}})", "{{query}} ({{server}})"),),
                      threshold=Threshold("spark_freshness_seconds")),
            PanelSpec("Offsets behind latest", "Records in Kafka the query has not read yet, after its last batch.", "short",
                      (Query(f"sum by (query) (cdcwatch_spark_source_offsets_behind_latest{{{_QUERY}}})", "{{query}}"),)),
        )),
        ("Latency by stage", (
            PanelSpec("Latency by stage", "p50, p95 and p99 over 5 minutes of each stage of a change: capture (source "
                      "commit → connector), produce (connector → the Kafka record's timestamp; timestamp_type says whose), "
                      "queue (→ start of the batch reading it), apply (batch start → end); and the end-to-end p99 of the "
                      "last batch with changes.", "s",
                      (*(Query(f"query_stage:cdcwatch_spark_stage_latency_seconds:p{q}{_RECORDED}",
                               f"{{{{query}}}} {{{{stage}}}} {{{{timestamp_type}}}} p{q}") for q in ("50", "95", "99")),
                       Query(f"query:cdcwatch_spark_apply_lag_seconds:p99{_RECORDED}", "{{query}} end to end p99")),
                      threshold=Threshold("pipeline_latency_p99_seconds")),
            PanelSpec("Changes with clock skew", "Changes per second whose stage came out negative (the clocks at its two "
                      "ends disagree), counted as 0 s in the latency by stage.", "ops",
                      (Query(f"sum by (query, stage, timestamp_type) (rate(cdcwatch_spark_clock_skew_changes_total{{{_SEL}}}"
                             "[$__rate_interval]))", "{{query}} {{stage}} {{timestamp_type}}"),)),
        )),
        ("Throughput", (
            PanelSpec("Rows processed", "Processing rate of the last micro-batch.", "ops",
                      (Query(f"max by (query) (cdcwatch_spark_processed_rows_per_second{{{_QUERY}}})", "{{query}}"),)),
            PanelSpec("Changes applied", "Row changes written to the target per second.", "ops",
                      (Query(f"sum by (query) (rate(cdcwatch_spark_changes_applied_total{{{_SEL}}}[$__rate_interval]))",
                             "{{query}}"),)),
            PanelSpec("Batch duration p95", "95th percentile of the micro-batch duration.", "s",
                      (Query("histogram_quantile(0.95, sum by (query, le) (rate(cdcwatch_spark_batch_duration_seconds_bucket"
                             f"{{{_QUERY}}}[$__rate_interval])))", "{{query}}"),), alerts=("CdcSparkNoProgress",)),
        )),
        ("Correctness and data loss", (
            PanelSpec("Duplicates per change", "Share of the changes read that are re-deliveries.", "percentunit",
                      (Query('query:cdcwatch_spark_duplicates:ratio_rate5m{%(scope)s, query=~"$query", server=~"$server"}',
                             "{{query}}"),), threshold=Threshold("spark_duplicates_ratio")),
            PanelSpec("Stale events", "Out-of-order changes older than the target's row, ignored, per second.", "ops",
                      (Query(f"sum by (query) (rate(cdcwatch_spark_stale_events_total{{{_SEL}}}[$__rate_interval]))",
                             "{{query}}"),)),
            PanelSpec("Malformed records and lost offsets", "Records that are no Debezium event, and offsets deleted "
                      "before they were read, per interval.", "short",
                      (Query(f"sum by (query) (increase(cdcwatch_spark_malformed_events_total{{{_SEL}}}[$__rate_interval]))",
                             "{{query}} malformed"),
                       Query(f"sum by (query) (increase(cdcwatch_spark_lost_offsets_total{{{_SEL}}}[$__rate_interval]))",
                             "{{query}} lost offsets", when="the query runs with failOnDataLoss=false")),
                      alerts=("CdcSparkMalformedEvents", "CdcSparkLostOffsets")),
            PanelSpec("Query state", "The state of each query (active, terminated, failed).", "none",
                      (Query(state_code("cdcwatch_spark_query_state", _QUERY, "query", QUERY_STATES), "{{query}}"),),
                      kind="state", mappings=QUERY_STATES, alerts=("CdcSparkQueryFailed",)),
        )),
    ), stage="spark")
