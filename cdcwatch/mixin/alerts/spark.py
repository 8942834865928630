"""The Spark apply job (its listener's /metrics): freshness of the target, apply lag, latency by stage,
failures, data loss.

Freshness is the end-to-end alert: it must not clear when the driver's series vanish, so for
`durations.memory` it goes on from the last reading plus the time since.

The end-to-end p99 is the listener's apply lag of the last batch (commit → applied, per change). It cannot
come from the stage histograms: apply is known only once the batch is over, after the other stages were
bucketed, and quantiles of stages do not add up. The stage histograms say where the time goes.
"""

# ruff: noqa: E501 (each rule's PromQL is one literal block, its lines as long as in the rule file)

from cdcwatch.mixin.alerts.examples import SPARK
from cdcwatch.mixin.alerts.model import Alert, Case, Group, Recording, labels_of

__all__ = ["GROUP"]

_Q = f'{SPARK},server="inventory"'
_FRESHNESS = "cdcwatch_spark_freshness_seconds"
_BUCKET = "cdcwatch_spark_stage_latency_seconds_bucket"


def _stage(stage: str, per_minute: dict[str, int], timestamp_type: str = "") -> dict[str, str]:
    """Bucket series of one stage growing by `per_minute` changes at most each bound (`+Inf`: all of them)."""
    labels = f'{_Q},stage="{stage}"' + (f',timestamp_type="{timestamp_type}"' if timestamp_type else "")
    return {f'{_BUCKET}{{{labels},le="{le}"}}': f"0+{n}x40" for le, n in per_minute.items()}


_FAST_CAPTURE = _stage("capture", {"0.25": 60, "+Inf": 60})
_SLOW_QUEUE = _stage("queue", {"30.0": 0, "60.0": 0, "120.0": 60, "+Inf": 60}, "create_time")
_APPLY = _stage("apply", {"1.0": 60, "+Inf": 60})


def _stage_quantile(record: str, expr: str, why: str, per_minute: dict[str, int], value: float) -> Recording:
    """A quantile of the stage latencies, proven on the queue stage's buckets (`per_minute` below each bound, of 100)."""
    return Recording(record, expr, Case(why, _stage("queue", {**per_minute, "+Inf": 100}, "create_time"),
                                        labels=labels_of(_Q, 'stage="queue",timestamp_type="create_time"'), value=value))


RECORDINGS = (
    Recording("query:cdcwatch_spark_apply_lag_seconds:p99",
              'max by (job, instance, query, server) (cdcwatch_spark_apply_lag_seconds{%(spark)s, percentile="99"})',
              Case("the 99th percentile", {f'cdcwatch_spark_apply_lag_seconds{{{_Q},percentile="99"}}': "300x40",
                                           f'cdcwatch_spark_apply_lag_seconds{{{_Q},percentile="max"}}': "900x40"},
                   labels=labels_of(_Q), value=300)),
    Recording("query:cdcwatch_spark_changes_applied:rate5m",
              "sum by (job, instance, query, server) (rate(cdcwatch_spark_changes_applied_total{%(spark)s}[5m]))",
              Case("60 a minute", {f"cdcwatch_spark_changes_applied_total{{{_Q}}}": "0+60x40"}, labels=labels_of(_Q), value=1)),
    Recording("query:cdcwatch_spark_duplicates:ratio_rate5m",
              """
              sum by (job, instance, query, server) (rate(cdcwatch_spark_duplicates_total{%(spark)s}[5m]))
              / sum by (job, instance, query, server) (rate(cdcwatch_spark_changes_total{%(spark)s}[5m]))
              """,
              Case("one in ten", {f"cdcwatch_spark_duplicates_total{{{_Q}}}": "0+10x40",
                                  f"cdcwatch_spark_changes_total{{{_Q}}}": "0+100x40"}, labels=labels_of(_Q), value=0.1)),
    _stage_quantile("query_stage:cdcwatch_spark_stage_latency_seconds:p50",
                    "histogram_quantile(0.50, sum by (job, instance, query, server, stage, timestamp_type, le) (rate(cdcwatch_spark_stage_latency_seconds_bucket{%(spark)s}[5m])))",
                    "half the changes within 1 s, all within 2.5 s", {"1.0": 50, "2.5": 100}, 1.0),
    _stage_quantile("query_stage:cdcwatch_spark_stage_latency_seconds:p95",
                    "histogram_quantile(0.95, sum by (job, instance, query, server, stage, timestamp_type, le) (rate(cdcwatch_spark_stage_latency_seconds_bucket{%(spark)s}[5m])))",
                    "none within 1 s, all within 3 s", {"1.0": 0, "3.0": 100}, 2.9),
    _stage_quantile("query_stage:cdcwatch_spark_stage_latency_seconds:p99",
                    "histogram_quantile(0.99, sum by (job, instance, query, server, stage, timestamp_type, le) (rate(cdcwatch_spark_stage_latency_seconds_bucket{%(spark)s}[5m])))",
                    "half the changes within 1 s, all within 2.5 s", {"1.0": 50, "2.5": 100}, 2.47),
)

ALERTS = (
    Alert(
        "CdcSparkApplyLagHigh",
        """
        query:cdcwatch_spark_apply_lag_seconds:p99 > %(spark_apply_lag_seconds)s
        and on (job, instance, query, server)
          query:cdcwatch_spark_changes_applied:rate5m > 0
        """,
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
        "CdcPipelineStageSlow",
        """
        (
            query:cdcwatch_spark_apply_lag_seconds:p99 > %(pipeline_latency_p99_seconds)s
          and on (job, instance, query, server)
            query:cdcwatch_spark_changes_applied:rate5m > 0
        )
        + on (job, instance, query, server) group_left (stage)
          0 * topk by (job, instance, query, server) (1, query_stage:cdcwatch_spark_stage_latency_seconds:p99 >= 0)
        """,
        "warning", "warning",
        "Changes of {{ $labels.server }} take too long end to end; the slowest stage is {{ $labels.stage }}",
        "99 %% of the changes {{ $labels.query }} applied in its last batch were committed up to "
        "{{ $value | humanizeDuration }} before (objective %(pipeline_latency_p99_seconds)ss). Of capture, produce, "
        "queue and apply, {{ $labels.stage }} has the highest p99 over the last 5 minutes.",
        fires=Case("5 minutes end to end, most of it queued in Kafka", {
            f'cdcwatch_spark_apply_lag_seconds{{{_Q},percentile="99"}}': "300x40",
            f"cdcwatch_spark_changes_applied_total{{{_Q}}}": "0+60x40", **_FAST_CAPTURE, **_SLOW_QUEUE, **_APPLY},
            labels=labels_of(_Q, 'stage="queue"'), value=300),
        quiet=Case("20 seconds end to end", {
            f'cdcwatch_spark_apply_lag_seconds{{{_Q},percentile="99"}}': "20x40",
            f"cdcwatch_spark_changes_applied_total{{{_Q}}}": "0+60x40", **_FAST_CAPTURE, **_SLOW_QUEUE, **_APPLY}),
        since="1m",
        more=(Case("an idle source: the last batch's reading stays frozen", {
                  f'cdcwatch_spark_apply_lag_seconds{{{_Q},percentile="99"}}': "300x40",
                  f"cdcwatch_spark_changes_applied_total{{{_Q}}}": "1000x40", **_SLOW_QUEUE}),
              Case("the connector is the slow one", {
                  f'cdcwatch_spark_apply_lag_seconds{{{_Q},percentile="99"}}': "300x40",
                  f"cdcwatch_spark_changes_applied_total{{{_Q}}}": "0+60x40",
                  **_stage("capture", {"60.0": 0, "300.0": 60, "+Inf": 60}), **_SLOW_QUEUE, **_APPLY},
                  labels=labels_of(_Q, 'stage="capture"'), value=300)),
    ),
    Alert(
        "CdcSparkFreshnessTooOld",
        """
        max by (query, server) (cdcwatch_spark_freshness_seconds{%(spark)s}) > %(spark_freshness_seconds)s
        or
        (
            max by (query, server) (
                last_over_time(cdcwatch_spark_freshness_seconds{%(spark)s}[%(memory)s])
              + time() - max_over_time(timestamp(cdcwatch_spark_freshness_seconds{%(spark)s})[%(memory)s:1m])
            )
          unless on (query, server) cdcwatch_spark_freshness_seconds{%(spark)s}
        ) > %(spark_freshness_seconds)s
        """,
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
                   at="30m"),
              Case("fresh again at this evaluation: firing on while the stall it inhibits clears", {
                  f"{_FRESHNESS}{{{_Q}}}": "900x18 2x21"}, at="19m", labels=labels_of('query="apply",server="inventory"'),
                  value=900),
              Case("fresh again 2 minutes ago: resolved", {f"{_FRESHNESS}{{{_Q}}}": "900x17 2x22"})),
        # a frozen job's consumer group, which this inhibits, reads STALL until its status window sees commits again
        through_catch_up=True,
    ),
    Alert(
        "CdcSparkDriverAbsent",
        # a driver seen within `durations.memory` that stopped answering (frozen, killed) is CdcSparkFreshnessTooOld's
        # page, which names its query and server: this one is for a job never seen, or gone longer than that
        """
        absent(cdcwatch_spark_query_state{%(spark)s})
        unless on () count(last_over_time(cdcwatch_spark_freshness_seconds{%(spark)s}[%(memory)s]))
        """,
        "critical", "warning",
        "No Spark apply job reports its metrics",
        "No series of the Spark listener ({{ $labels.job }}) has reached Prometheus for %(for)s, nor any in the last "
        "%(memory)s: the apply job's driver is gone from discovery, or never started. Nothing is applied.",
        fires=Case("nothing reports", {}, labels=labels_of(SPARK.split(",instance")[0]), value=1),
        quiet=Case("a query reports", {f'cdcwatch_spark_query_state{{{SPARK},state="active"}}': "1x40",
                                        f"{_FRESHNESS}{{{_Q}}}": "2x40"}),
        more=(Case("the driver stopped answering 10 minutes ago: the stale target is the page", {
                   f'cdcwatch_spark_query_state{{{SPARK},state="active"}}': "1x9 stale",
                   f"{_FRESHNESS}{{{_Q}}}": "2x9 stale"}),),
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
        """
        time() - cdcwatch_spark_last_progress_timestamp_seconds{%(spark)s} > %(spark_progress_max_age_seconds)s
        and on (job, instance, query)
          cdcwatch_spark_query_state{%(spark)s, state="active"} == 1
        """,
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
        "sum by (job, instance, query, server) (increase(cdcwatch_spark_lost_offsets_total{%(spark)s}[10m])) > 0",
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
        "sum by (job, instance, query, server) (increase(cdcwatch_spark_malformed_events_total{%(spark)s}[10m])) > 0",
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

GROUP = Group("cdcwatch-spark", RECORDINGS, ALERTS, stage="spark")
