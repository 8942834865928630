"""The listener's own logic on recorded-shape progress: lag, freshness, offsets behind, failure classes."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from cdcwatch.spark.metrics import SinkOutcome, SparkMetrics, exception_class
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
    assert sample(metrics, "cdcwatch_spark_duplicates_total", query="q", server="shop") == 5
    assert sample(metrics, "cdcwatch_spark_stale_events_total", query="q", server="shop") == 1
    assert sample(metrics, "cdcwatch_spark_changes_applied_total", query="q", server="shop") == 6


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
    assert exception_class(text) == expected


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


def test_exposition_passes_promtool() -> None:
    metrics = SparkMetrics(Clock(1000.0))
    metrics.progress("q", PROGRESS, OBSERVED)
    metrics.terminated("q", "KafkaIllegalStateException")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    promtool_check(generate_latest(registry).decode())
