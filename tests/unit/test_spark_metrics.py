"""The listener's own logic on recorded-shape progress: lag, freshness, offsets behind, failure classes."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from cdcwatch.failures import exception_class
from spark_listeners.latency import (
    NEGATIVE_CODE,
    STAGE_CODES,
    STAGE_LATENCY_BUCKETS,
    TIMESTAMP_TYPES,
    stage_codes,
    stage_sum,
)
from spark_listeners.metrics import SPARK_EXCEPTIONS, CommitSpread, Counts, SinkOutcome, SparkMetrics
from tests.integration.conftest import promtool_check


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


PROGRESS = {  # the parts of StreamingQueryProgress.json the listener reads
    "numInputRows": 12, "inputRowsPerSecond": 6.0, "processedRowsPerSecond": 10.0,
    "durationMs": {"triggerExecution": 700},
    "sources": [{"description": "cdcwatch_kafka", "endOffset": {"shop.public.items": {"0": 40, "1": 7}},
                 "latestOffset": '{"shop.public.items": {"0": 45, "1": 7}}'}],
}
OBSERVED = {"events": 12, "changes": 10, "malformed": 1, "lost_offsets": 0, "oldest_commit": 990.0,
            "newest_commit": 998.0, "p01_commit": 990.5, "p50_commit": 995.0, "newest_heartbeat": 999.0,
            "server_min": "shop", "server_max": "shop"}


def sample(metrics: SparkMetrics, name: str, **labels: str) -> float | None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    return registry.get_sample_value(name, labels)


def test_progress_gives_lag_against_the_time_the_batch_was_applied() -> None:
    clock = Clock(1000.0)
    metrics = SparkMetrics(clock)
    metrics.started("q")
    metrics.progress("q", PROGRESS, OBSERVED)
    assert sample(metrics, "cdcwatch_spark_apply_lag_seconds", query="q", server="shop", percentile="max") == 10.0
    assert sample(metrics, "cdcwatch_spark_apply_lag_seconds", query="q", server="shop", percentile="99") == 9.5
    assert sample(metrics, "cdcwatch_spark_apply_lag_seconds", query="q", server="shop", percentile="50") == 5.0
    assert sample(metrics, "cdcwatch_spark_source_offsets_behind_latest", query="q", topic="shop.public.items") == 5
    assert sample(metrics, "cdcwatch_spark_malformed_events_total", query="q", server="shop") == 1
    assert sample(metrics, "cdcwatch_spark_batch_duration_seconds_bucket", query="q", le="1.0") == 1
    assert sample(metrics, "cdcwatch_spark_batch_duration_seconds_bucket", query="q", le="0.5") == 0


def _lag(metrics: SparkMetrics, percentile: str) -> float | None:
    return sample(metrics, "cdcwatch_spark_apply_lag_seconds", query="q", server="shop", percentile=percentile)


def test_a_replay_the_sink_reports_never_raises_the_apply_lag() -> None:
    """Batch 7 re-delivers changes committed at 900-950 (counted as duplicates) along with new ones from 995-998:
    the lag is measured on the new ones the sink reported; a batch of re-deliveries only leaves it as it was."""
    clock = Clock(1000.0)
    metrics = SparkMetrics(clock)
    replayed = {**OBSERVED, "oldest_commit": 900.0, "p01_commit": 900.0, "p50_commit": 950.0}
    metrics.sink("q", SinkOutcome(applied=4, duplicates=50, commits=CommitSpread.of([995.0, 996.0, 997.0, 998.0])), 7)
    metrics.progress("q", {**PROGRESS, "batchId": 7}, replayed)
    assert (_lag(metrics, "max"), _lag(metrics, "99"), _lag(metrics, "50")) == (5.0, 5.0, 4.0)
    assert sample(metrics, "cdcwatch_spark_duplicates_total", query="q", server="shop", table="") == 50
    clock.now = 1010.0
    metrics.sink("q", SinkOutcome(duplicates=30, commits=CommitSpread.of([])), 8)
    metrics.progress("q", {**PROGRESS, "batchId": 8}, replayed)
    assert _lag(metrics, "max") == 5.0, "a batch of re-deliveries only must leave the reading as it was"
    assert sample(metrics, "cdcwatch_spark_freshness_seconds", query="q", server="shop") == 11.0  # heartbeat at 999


def test_without_the_sinks_commits_the_lag_is_measured_on_what_the_batch_read() -> None:
    clock = Clock(1000.0)
    metrics = SparkMetrics(clock)
    metrics.sink("q", SinkOutcome(applied=4, duplicates=50), 7)  # no commits: the generic path
    metrics.sink("q", SinkOutcome(applied=1, commits=CommitSpread.of([999.0])), 6)  # an older batch's report
    metrics.progress("q", {**PROGRESS, "batchId": 7}, {**OBSERVED, "oldest_commit": 900.0})
    assert _lag(metrics, "max") == 100.0
    metrics.sink("q", SinkOutcome(applied=1, commits=CommitSpread.of([999.0])), 9)
    metrics.progress("q", PROGRESS, {**OBSERVED, "oldest_commit": 900.0})  # no batchId in the progress
    assert _lag(metrics, "max") == 100.0


def test_commit_spread_takes_nearest_rank_percentiles() -> None:
    spread = CommitSpread.of(float(t) for t in range(200, 0, -1))
    assert (spread.changes, spread.oldest, spread.p01, spread.p50, spread.newest) == (200, 1.0, 2.0, 100.0, 200.0)
    assert CommitSpread.of([]) == CommitSpread()


def test_freshness_grows_while_nothing_new_is_applied_and_heartbeats_count() -> None:
    clock = Clock(1000.0)
    metrics = SparkMetrics(clock)
    metrics.progress("q", PROGRESS, OBSERVED)
    assert sample(metrics, "cdcwatch_spark_freshness_seconds", query="q", server="shop") == 1.0  # heartbeat at 999
    clock.now = 1030.0
    metrics.progress("q", {**PROGRESS, "numInputRows": 0}, None)  # empty batches: nothing applied
    assert sample(metrics, "cdcwatch_spark_freshness_seconds", query="q", server="shop") == 31.0
    metrics.progress("q", PROGRESS, {**OBSERVED, "oldest_commit": None, "newest_commit": None, "newest_heartbeat": 1029.0})
    assert sample(metrics, "cdcwatch_spark_freshness_seconds", query="q", server="shop") == 1.0
    # the lag of the last batch with changes stays as it was
    assert sample(metrics, "cdcwatch_spark_apply_lag_seconds", query="q", server="shop", percentile="max") == 10.0


def test_sink_outcomes_add_up() -> None:
    metrics = SparkMetrics(Clock(0.0))
    metrics.progress("q", PROGRESS, OBSERVED)
    metrics.sink("q", SinkOutcome(applied=5, duplicates=3, stale=1))
    metrics.sink("q", SinkOutcome(applied=1, duplicates=2, stale=0))
    assert sample(metrics, "cdcwatch_spark_duplicates_total", query="q", server="shop", table="") == 5
    assert sample(metrics, "cdcwatch_spark_stale_events_total", query="q", server="shop", table="") == 1
    assert sample(metrics, "cdcwatch_spark_changes_applied_total", query="q", server="shop", table="") == 6


def test_sink_outcomes_by_table_add_up_per_table() -> None:
    """A sink that counts by table: each table's series adds up its own counts; none is left under an empty table."""
    metrics = SparkMetrics(Clock(0.0))
    metrics.progress("q", PROGRESS, OBSERVED)
    metrics.sink("q", SinkOutcome.of_tables({"shop.public.items": Counts(5, 3, 1), "shop.public.orders": Counts(2, 0, 0)}))
    metrics.sink("q", SinkOutcome.of_tables({"shop.public.items": Counts(1, 2, 0)}))
    for table, applied, duplicates, stale in (("shop.public.items", 6, 5, 1), ("shop.public.orders", 2, 0, 0)):
        labels = {"query": "q", "server": "shop", "table": table}
        assert sample(metrics, "cdcwatch_spark_changes_applied_total", **labels) == applied
        assert sample(metrics, "cdcwatch_spark_duplicates_total", **labels) == duplicates
        assert sample(metrics, "cdcwatch_spark_stale_events_total", **labels) == stale
    assert sample(metrics, "cdcwatch_spark_duplicates_total", query="q", server="shop", table="") is None


def test_a_batchs_sink_counts_and_observed_counts_appear_together() -> None:
    """The sink reports in foreachBatch, the observed counts come with the batch's progress later: a scrape in
    between sees neither, so a reader comparing duplicates with changes never catches half a batch."""
    metrics = SparkMetrics(Clock(0.0))
    metrics.sink("q", SinkOutcome(duplicates=99, commits=CommitSpread.of([])), 7)
    assert sample(metrics, "cdcwatch_spark_duplicates_total", query="q", server="", table="") == 0
    metrics.progress("q", {**PROGRESS, "batchId": 7}, {**OBSERVED, "changes": 99})
    assert sample(metrics, "cdcwatch_spark_duplicates_total", query="q", server="shop", table="") == 99
    assert sample(metrics, "cdcwatch_spark_changes_total", query="q", server="shop") == 99
    metrics.sink("q", SinkOutcome(applied=3), 8)
    metrics.sink("q", SinkOutcome(applied=5), 8)  # the batch reported again: the last report stands
    metrics.sink("q", SinkOutcome(applied=2), 9)
    metrics.progress("q", {**PROGRESS, "batchId": 9}, OBSERVED)  # batch 8's progress never came: counted now
    assert sample(metrics, "cdcwatch_spark_changes_applied_total", query="q", server="shop", table="") == 7
    metrics.sink("q", SinkOutcome(applied=4), 10)
    metrics.terminated("q", "org.apache.spark.SparkException: Job aborted")  # failed after the merge
    assert sample(metrics, "cdcwatch_spark_changes_applied_total", query="q", server="shop", table="") == 11


def test_mixed_servers_read_mixed() -> None:
    metrics = SparkMetrics(Clock(0.0))
    metrics.progress("q", PROGRESS, {**OBSERVED, "server_min": "a", "server_max": "b"})
    assert sample(metrics, "cdcwatch_spark_changes_total", query="q", server="mixed") == 10


@pytest.mark.parametrize("text, expected", [
    (None, "other"),
    ("org.apache.spark.sql.streaming.StreamingQueryException: ... psycopg.errors.UndefinedTable: relation", "DatabaseError"),
    ("StreamingQueryException: org.apache.spark.sql.kafka010.KafkaIllegalStateException: Some data may have been lost\n"
     "Caused by: org.apache.kafka.clients.consumer.OffsetOutOfRangeException: out of range", "KafkaIllegalStateException"),
    ("StreamingQueryException: org.apache.spark.SparkException: Job aborted", "SparkException"),
    ("java.lang.OutOfMemoryError: Java heap space", "OutOfMemoryError"),
    ("StreamingQueryException: SomethingNobodyKnowsError: user text with spaces", "StreamingQueryException"),
    ("plain words", "other"),
])
def test_exception_class_is_one_of_a_fixed_set(text, expected) -> None:
    assert exception_class(text, SPARK_EXCEPTIONS) == expected


def test_failed_and_terminated_states() -> None:
    metrics = SparkMetrics(Clock(0.0))
    metrics.started("a")
    metrics.started("b")
    metrics.terminated("a", "PythonException: psycopg.errors.OperationalError: connection refused")
    metrics.terminated("b", None)
    assert sample(metrics, "cdcwatch_spark_query_state", query="a", state="failed") == 1
    assert sample(metrics, "cdcwatch_spark_query_failure_info", query="a", exception="DatabaseError") == 1
    assert sample(metrics, "cdcwatch_spark_query_state", query="b", state="terminated") == 1
    assert sample(metrics, "cdcwatch_spark_query_failure_info", query="b", exception="other") is None


def test_the_group_a_query_commits_under_is_told_for_that_query_only() -> None:
    metrics = SparkMetrics(Clock(0.0))
    metrics.started("a")
    metrics.started("b")
    metrics.commits_under("a", "a-lag")
    assert sample(metrics, "cdcwatch_spark_query_commit_group_info", query="a", group="a-lag") == 1
    assert sample(metrics, "cdcwatch_spark_query_commit_group_info", query="b", group="a-lag") is None


def test_exposition_passes_promtool() -> None:
    metrics = SparkMetrics(Clock(1000.0))
    metrics.progress("q", PROGRESS, OBSERVED)
    metrics.terminated("q", "KafkaIllegalStateException")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    promtool_check(generate_latest(registry).decode())


def stage(name: str, timestamp_type: str, latencies: list[float]) -> dict[str, object]:
    """The observed columns `instrument` makes of one measured stage's latencies: (bucket code, changes) pairs,
    a code maybe split over several pairs as partitions' histograms merge, and the sum in µs."""
    offset = STAGE_CODES * TIMESTAMP_TYPES.index(timestamp_type) if timestamp_type else 0
    codes = [offset + (NEGATIVE_CODE if v < 0 else next((i for i, b in enumerate(STAGE_LATENCY_BUCKETS) if v <= b),
                                                        len(STAGE_LATENCY_BUCKETS))) for v in latencies]
    pairs = [(float(code), 1.0) for code in codes]  # one pair per change: as unmerged as it gets
    return {stage_codes(name): pairs, stage_sum(name, timestamp_type): sum(round(v * 1e6) for v in latencies if v > 0)
            if latencies else None}


def observed(*stages: dict[str, object]) -> dict[str, object]:
    """The stages' columns together, the code pairs of produce and queue joined across timestamp types."""
    joined: dict[str, object] = {}
    for columns in stages:
        for name, found in columns.items():
            joined[name] = joined.get(name, []) + found if isinstance(found, list) else found  # type: ignore[operator]
    return joined


BATCH = {**PROGRESS, "timestamp": "1970-01-01T00:16:40.000Z"}  # trigger start 1000 s, triggerExecution 0.7 s


def buckets(metrics: SparkMetrics, stage_name: str, timestamp_type: str = "") -> dict[str, float | None]:
    labels = {"query": "q", "server": "shop", "stage": stage_name, "timestamp_type": timestamp_type}
    found = {le: sample(metrics, "cdcwatch_spark_stage_latency_seconds_bucket", **labels, le=le)
             for le in ("0.01", "0.25", "0.5", "1.0", "60.0", "600.0", "+Inf")}
    found["count"] = sample(metrics, "cdcwatch_spark_stage_latency_seconds_count", **labels)
    found["sum"] = sample(metrics, "cdcwatch_spark_stage_latency_seconds_sum", **labels)
    found["skew"] = sample(metrics, "cdcwatch_spark_clock_skew_changes_total", **labels)
    return found


def test_stage_latency_accumulates_batches_into_cumulative_histograms() -> None:
    metrics = SparkMetrics(Clock(1001.0))
    first = {**OBSERVED, "changes": 4, "batch_time": 1000.1,
             **observed(stage("capture", "", [0.005, 0.3, 45.0, -2.0]), stage("produce", "create_time", [0.02, 1.5, 0.01]),
                        stage("queue", "log_append_time", [700.0]), stage("queue", "create_time", []))}
    metrics.progress("q", BATCH, first)
    assert buckets(metrics, "capture") == {"0.01": 2, "0.25": 2, "0.5": 3, "1.0": 3, "60.0": 4, "600.0": 4, "+Inf": 4,
                                           "count": 4, "sum": 45.305, "skew": 1}  # -2 s: skew, counted as 0
    assert buckets(metrics, "produce", "create_time") == {"0.01": 1, "0.25": 2, "0.5": 2, "1.0": 2, "60.0": 3,
                                                          "600.0": 3, "+Inf": 3, "count": 3, "sum": 1.53, "skew": 0}
    assert buckets(metrics, "queue", "log_append_time")["600.0"] == 0  # beyond the last bound: +Inf only
    assert buckets(metrics, "queue", "log_append_time")["+Inf"] == 1
    # every change of the batch spent its start (1000.1) → its end (1000 + 0.7) in apply
    assert buckets(metrics, "apply") == {"0.01": 0, "0.25": 0, "0.5": 0, "1.0": 4, "60.0": 4, "600.0": 4, "+Inf": 4,
                                         "count": 4, "sum": pytest.approx(4 * 0.6), "skew": 0}
    # stages never measured have no series: no create_time queue, nothing of log_append_time produce
    assert buckets(metrics, "queue", "create_time")["count"] is None
    assert buckets(metrics, "produce", "log_append_time")["count"] is None

    second = {**OBSERVED, "changes": 1, "batch_time": 1000.6, **stage("capture", "", [0.2, -0.5])}
    metrics.progress("q", {**BATCH, "timestamp": "1970-01-01T00:16:40.123Z", "durationMs": {"triggerExecution": 2000}},
                     second)
    assert buckets(metrics, "capture") == {"0.01": 3, "0.25": 4, "0.5": 5, "1.0": 5, "60.0": 6, "600.0": 6, "+Inf": 6,
                                           "count": 6, "sum": pytest.approx(45.505), "skew": 2}
    assert buckets(metrics, "apply")["1.0"] == 4 and buckets(metrics, "apply")["60.0"] == 5  # 1000.123 + 2 - 1000.6
    assert buckets(metrics, "apply")["sum"] == pytest.approx(4 * 0.6 + 1.523)
    assert buckets(metrics, "produce", "create_time")["count"] == 3  # unchanged by a batch without it


def test_no_apply_stage_without_changes_or_batch_start() -> None:
    metrics = SparkMetrics(Clock(0.0))
    metrics.progress("q", BATCH, {**OBSERVED, "changes": 0, "batch_time": None})
    metrics.progress("q", BATCH, {**OBSERVED, "changes": 3})  # an older instrument: no batch_time
    metrics.progress("q", {**BATCH, "timestamp": None}, {**OBSERVED, "changes": 3, "batch_time": 999.0})
    assert buckets(metrics, "apply")["count"] is None


def test_stage_latency_exposition_passes_promtool() -> None:
    metrics = SparkMetrics(Clock(1001.0))
    metrics.progress("q", BATCH, {**OBSERVED, "batch_time": 1000.1, **stage("capture", "", [0.3, -1.0]),
                                  **stage("queue", "log_append_time", [2.0])})
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    text = generate_latest(registry).decode()
    assert 'cdcwatch_spark_stage_latency_seconds_bucket{le="+Inf",query="q",server="shop",stage="capture",timestamp_type=""} 2.0' in text
    promtool_check(text)


def test_bucket_codes_merged_from_partitions_add_up_per_timestamp_type() -> None:
    """histogram_numeric merges partitions' bins by weighted mean: a code can come back split over several
    pairs, or a hair off its integer."""
    from spark_listeners.latency import STAGE_CODES, stage_codes, stage_sum

    metrics = SparkMetrics(Clock(1001.0))
    pairs = [(3.0, 5.0), (2.9999999999999996, 2.0), (STAGE_CODES + 3.0000000000000004, 1.0), (STAGE_CODES - 1.0, 4.0)]
    metrics.progress("q", BATCH, {**OBSERVED, "batch_time": 1000.1, stage_codes("produce"): pairs,
                                  stage_sum("produce", "create_time"): 7_000_000.0,
                                  stage_sum("produce", "log_append_time"): 100_000.0})
    create = buckets(metrics, "produce", "create_time")
    assert (create["0.01"], create["0.25"], create["+Inf"], create["skew"]) == (4, 11, 11, 4)
    assert create["sum"] == 7.0
    appended = buckets(metrics, "produce", "log_append_time")
    assert (appended["0.01"], appended["0.25"], appended["+Inf"], appended["sum"]) == (0, 1, 1, 0.1)


def test_stage_histograms_leave_out_the_re_deliveries_the_sink_reports() -> None:
    """Batch 7 reads 3 changes re-delivered after a connector restart (captured 300 s late, queued 400 s) and 2 new
    ones: where the sink reports the stages of its new changes, the histograms count those 2 alone, apply
    included; a batch of re-deliveries only adds nothing; a sink that reports nothing keeps counting every change."""
    metrics = SparkMetrics(Clock(1001.0))
    read = {**OBSERVED, "changes": 5, "batch_time": 1000.1,
            **observed(stage("capture", "", [300.0, 300.0, 300.0, 0.2, 0.3]),
                       stage("queue", "create_time", [400.0, 400.0, 400.0, 0.02, 0.03]))}
    new = {"changes": 2, **observed(stage("capture", "", [0.2, 0.3]), stage("queue", "create_time", [0.02, 0.03]),
                                    stage("produce", "create_time", []))}
    metrics.sink("q", SinkOutcome(applied=2, duplicates=3, commits=CommitSpread.of([999.0, 999.5]), stages=new), 7)
    metrics.progress("q", {**BATCH, "batchId": 7}, read)
    assert buckets(metrics, "capture") == {"0.01": 0, "0.25": 1, "0.5": 2, "1.0": 2, "60.0": 2, "600.0": 2, "+Inf": 2,
                                           "count": 2, "sum": pytest.approx(0.5), "skew": 0}
    assert buckets(metrics, "queue", "create_time")["600.0"] == 2 and buckets(metrics, "queue", "create_time")["0.01"] == 0
    assert buckets(metrics, "apply")["count"] == 2  # the batch's new changes, not the 5 it read

    replay = {"changes": 0, **observed(stage("capture", "", []), stage("queue", "create_time", []))}
    metrics.sink("q", SinkOutcome(duplicates=5, commits=CommitSpread.of([]), stages=replay), 8)
    metrics.progress("q", {**BATCH, "batchId": 8}, read)
    assert buckets(metrics, "capture")["count"] == 2 and buckets(metrics, "apply")["count"] == 2
    assert buckets(metrics, "queue", "create_time")["sum"] == pytest.approx(0.05)

    metrics.sink("q", SinkOutcome(applied=2, duplicates=3), 9)  # counts only: every change read is measured
    metrics.progress("q", {**BATCH, "batchId": 9}, read)
    assert buckets(metrics, "capture")["count"] == 7 and buckets(metrics, "apply")["count"] == 7
    assert buckets(metrics, "capture")["600.0"] == 7


SCRAPE = Path(__file__).with_name("spark_scrape.prom")
"""The listener's exposition of `_every_family()` as the per-family metric classes rendered it, before the families
were built from the named specs: the rendering must stay byte for byte what Prometheus and the rules read."""


def _every_family() -> SparkMetrics:
    """Two queries with a sample in every family: stages of both timestamp types, clock skew, a failure, offsets behind."""
    metrics = SparkMetrics(Clock(1001.0))
    metrics.started("q")
    metrics.commits_under("q", "q-lag")
    read = {**OBSERVED, "changes": 5, "batch_time": 1000.1,
            **observed(stage("capture", "", [300.0, -0.5, 0.2, 0.3, 0.004]),
                       stage("produce", "create_time", [0.02, 0.03, -0.01]), stage("produce", "log_append_time", [0.1, 7.0]),
                       stage("queue", "create_time", [400.0, 0.02, 0.03]), stage("queue", "log_append_time", [0.3, 0.4]))}
    metrics.sink("q", SinkOutcome.of_tables({"shop.public.items": Counts(3, 1, 1), "shop.public.orders": Counts(1, 0, 0)},
                                            CommitSpread.of([999.0, 999.5, 990.0])), 7)
    metrics.progress("q", {**BATCH, "batchId": 7}, read)
    metrics.progress("b", {**BATCH, "sources": []}, {**OBSERVED, "server_min": "a", "server_max": "b"})
    metrics.terminated("b", "java.lang.OutOfMemoryError: Java heap space")
    return metrics


def _scrape(metrics: SparkMetrics) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    return generate_latest(registry).decode()


def test_the_exposition_is_byte_for_byte_what_it_was() -> None:
    assert _scrape(_every_family()) == SCRAPE.read_text(encoding="utf-8")
