"""The Spark apply job (its listener's /metrics): freshness of the target, apply lag, failures, data loss.

Freshness is the end-to-end alert: it must not clear when the driver's series vanish, so for
`durations.memory` it goes on from the last reading plus the time since.
"""

from cdcwatch.mixin.alerts.examples import SPARK
from cdcwatch.mixin.alerts.model import Alert, Case, Group, Recording, labels_of

__all__ = ["GROUP"]

_KEY = "job, instance, query, server"
_Q = f'{SPARK},server="inventory"'
_FRESHNESS = "cdcwatch_spark_freshness_seconds"

RECORDINGS = (
    Recording("query:cdcwatch_spark_apply_lag_seconds:p99",
              f'max by ({_KEY}) (cdcwatch_spark_apply_lag_seconds{{%(spark)s, percentile="99"}})',
              Case("the 99th percentile", {f'cdcwatch_spark_apply_lag_seconds{{{_Q},percentile="99"}}': "300x40",
                                           f'cdcwatch_spark_apply_lag_seconds{{{_Q},percentile="max"}}': "900x40"},
                   labels=labels_of(_Q), value=300)),
    Recording("query:cdcwatch_spark_changes_applied:rate5m",
              f"sum by ({_KEY}) (rate(cdcwatch_spark_changes_applied_total{{%(spark)s}}[5m]))",
              Case("60 a minute", {f"cdcwatch_spark_changes_applied_total{{{_Q}}}": "0+60x40"}, labels=labels_of(_Q), value=1)),
    Recording("query:cdcwatch_spark_duplicates:ratio_rate5m",
              f"sum by ({_KEY}) (rate(cdcwatch_spark_duplicates_total{{%(spark)s}}[5m]))\n"
              f"/ sum by ({_KEY}) (rate(cdcwatch_spark_changes_total{{%(spark)s}}[5m]))",
              Case("one in ten", {f"cdcwatch_spark_duplicates_total{{{_Q}}}": "0+10x40",
                                  f"cdcwatch_spark_changes_total{{{_Q}}}": "0+100x40"}, labels=labels_of(_Q), value=0.1)),
)

ALERTS = (
    Alert(
        "CdcSparkApplyLagHigh",
        "query:cdcwatch_spark_apply_lag_seconds:p99 > %(spark_apply_lag_seconds)s\n"
        f"and on ({_KEY})\n  query:cdcwatch_spark_changes_applied:rate5m > 0",
        "warning", "warning",
        "Spark query {{ $labels.query }} applies changes late",
        "99 %% of the changes of {{ $labels.server }} that {{ $labels.query }} applied in its last batch were "
        "committed up to {{ $value | humanizeDuration }} before (threshold %(spark_apply_lag_seconds)ss).",
        fires=Case("changes applied 5 minutes late", {
            f'cdcwatch_spark_apply_lag_seconds{{{_Q},percentile="99"}}': "300x40",
            f"cdcwatch_spark_changes_applied_total{{{_Q}}}": "0+50x40"}, labels=labels_of(_Q), value=300),
        quiet=Case("an idle source: the last batch's lag reading stays frozen", {
            f'cdcwatch_spark_apply_lag_seconds{{{_Q},percentile="99"}}': "300x40",
            f"cdcwatch_spark_changes_applied_total{{{_Q}}}": "1000x40"}),
        since="1m",
        more=(Case("changes applied on time", {f'cdcwatch_spark_apply_lag_seconds{{{_Q},percentile="99"}}': "4x40",
                                               f"cdcwatch_spark_changes_applied_total{{{_Q}}}": "0+50x40"}),),
    ),
    Alert(
        "CdcSparkFreshnessTooOld",
        f"max by (query, server) ({_FRESHNESS}{{%(spark)s}}) > %(spark_freshness_seconds)s\n"
        "or\n"
        "(\n"
        "    max by (query, server) (\n"
        f"        last_over_time({_FRESHNESS}{{%(spark)s}}[%(memory)s])\n"
        f"      + time() - max_over_time(timestamp({_FRESHNESS}{{%(spark)s}})[%(memory)s:1m])\n"
        "    )\n"
        f"  unless on (query, server) {_FRESHNESS}{{%(spark)s}}\n"
        ") > %(spark_freshness_seconds)s",
        "critical", "critical",
        "The target of {{ $labels.query }} is stale",
        "The newest change or heartbeat of {{ $labels.server }} applied by {{ $labels.query }} is "
        "{{ $value | humanizeDuration }} old (threshold %(spark_freshness_seconds)ss), or the job's metrics vanished "
        "that long after their last reading: something between the source and the target has stopped.",
        fires=Case("15 minutes old", {f"{_FRESHNESS}{{{_Q}}}": "900x40"}, labels=labels_of('query="apply",server="inventory"'),
                   value=900),
        quiet=Case("2 seconds old", {f"{_FRESHNESS}{{{_Q}}}": "2x40"}),
        more=(Case("the driver's series vanish: the alert fires from the last reading on",
                   {f"{_FRESHNESS}{{{_Q}}}": "2x10 stale"}, at="30m",
                   labels=labels_of('query="apply",server="inventory"'), value=2 + 20 * 60),
              Case("the driver's series vanish and come back fresh", {f"{_FRESHNESS}{{{_Q}}}": "2x10 stale _x3 2x20"},
                   at="30m")),
    ),
    Alert(
        "CdcSparkDriverAbsent",
        "absent(cdcwatch_spark_query_state{%(spark)s})",
        "critical", "warning",
        "No Spark apply job reports its metrics",
        "No series of the Spark listener ({{ $labels.job }}) has reached Prometheus for %(for)s: the apply job's "
        "driver is gone from discovery, or never started. Nothing is applied.",
        fires=Case("nothing reports", {}, labels=labels_of(SPARK.split(",instance")[0]), value=1),
        quiet=Case("a query reports", {f'cdcwatch_spark_query_state{{{SPARK},state="active"}}': "1x40"}),
    ),
    Alert(
        "CdcSparkDuplicatesHigh",
        "query:cdcwatch_spark_duplicates:ratio_rate5m > %(spark_duplicates_ratio)s",
        "warning", "warning",
        "Spark query {{ $labels.query }} receives many duplicates",
        "{{ $value | humanizePercentage }} of the changes {{ $labels.query }} reads are re-deliveries "
        "(threshold %(spark_duplicates_ratio)s): the connector restarts without flushed offsets.",
        fires=Case("one in ten", {f"cdcwatch_spark_duplicates_total{{{_Q}}}": "0+10x40",
                                  f"cdcwatch_spark_changes_total{{{_Q}}}": "0+100x40"}, labels=labels_of(_Q), value=0.1),
        quiet=Case("none", {f"cdcwatch_spark_duplicates_total{{{_Q}}}": "0x40",
                            f"cdcwatch_spark_changes_total{{{_Q}}}": "0+100x40"}),
        since="1m",
    ),
    Alert(
        "CdcSparkQueryFailed",
        "cdcwatch_spark_query_failure_info{%(spark)s} == 1",
        "critical", "instant",
        "Spark query {{ $labels.query }} failed",
        "The query {{ $labels.query }} stopped with {{ $labels.exception }}; nothing is applied until it is restarted.",
        fires=Case("failed", {f'cdcwatch_spark_query_failure_info{{{SPARK},exception="DatabaseError"}}': "1x40"},
                   labels=labels_of(SPARK, 'exception="DatabaseError"'), value=1),
        quiet=Case("not failed", {f'cdcwatch_spark_query_failure_info{{{SPARK},exception="DatabaseError"}}': "0x40"}),
    ),
    Alert(
        "CdcSparkNoProgress",
        "time() - cdcwatch_spark_last_progress_timestamp_seconds{%(spark)s} > %(spark_progress_max_age_seconds)s\n"
        'and on (job, instance, query)\n  cdcwatch_spark_query_state{%(spark)s, state="active"} == 1',
        "critical", "warning",
        "Spark query {{ $labels.query }} makes no progress",
        "The active query {{ $labels.query }} last reported a micro-batch {{ $value | humanizeDuration }} ago "
        "(threshold %(spark_progress_max_age_seconds)ss): a batch hangs.",
        fires=Case("no batch for 20 minutes", {f"cdcwatch_spark_last_progress_timestamp_seconds{{{SPARK}}}": "0x40",
                                               f'cdcwatch_spark_query_state{{{SPARK},state="active"}}': "1x40"},
                   labels=labels_of(SPARK), value=1200),
        quiet=Case("a batch a minute", {f"cdcwatch_spark_last_progress_timestamp_seconds{{{SPARK}}}": "0+60x40",
                                        f'cdcwatch_spark_query_state{{{SPARK},state="active"}}': "1x40"}),
        since="6m", boundary_value=16 * 60,
    ),
    Alert(
        "CdcSparkLostOffsets",
        f"sum by ({_KEY}) (increase(cdcwatch_spark_lost_offsets_total{{%(spark)s}}[10m])) > 0",
        "critical", "instant",
        "Spark query {{ $labels.query }} lost changes",
        "Offsets of {{ $labels.server }} were deleted from Kafka before {{ $labels.query }} read them (it runs with "
        "failOnDataLoss=false): the target misses those changes.",
        fires=Case("100 offsets lost", {f"cdcwatch_spark_lost_offsets_total{{{_Q}}}": "0x10 100x30"}, at="15m",
                   labels=labels_of(_Q), value=100),
        quiet=Case("none lost since the last restart", {f"cdcwatch_spark_lost_offsets_total{{{_Q}}}": "7x40"}),
        since="11m",
    ),
    Alert(
        "CdcSparkMalformedEvents",
        f"sum by ({_KEY}) (increase(cdcwatch_spark_malformed_events_total{{%(spark)s}}[10m])) > 0",
        "warning", "instant",
        "Spark query {{ $labels.query }} skips malformed records",
        "{{ $labels.query }} read records of {{ $labels.server }} that are no readable Debezium event and skipped "
        "them in the last 10 minutes.",
        fires=Case("one malformed record", {f"cdcwatch_spark_malformed_events_total{{{_Q}}}": "0x10 1x30"}, at="15m",
                   labels=labels_of(_Q), value=1),
        quiet=Case("none new", {f"cdcwatch_spark_malformed_events_total{{{_Q}}}": "2x40"}),
        since="11m",
    ),
)

GROUP = Group("cdcwatch-spark", RECORDINGS, ALERTS)
