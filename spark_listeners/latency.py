"""The stages of a row change's latency, their histogram buckets and the names the batch summaries
carry: shared by `decode_events` (in the executors, so no dependency beyond the standard library),
`merge_summaries` and the listener's `SparkMetrics`."""

from __future__ import annotations

__all__ = ["MEASURED_STAGES", "NEGATIVE_CODE", "LATENCY_STAGES", "PER_CHANGE_STAGES", "STAGE_CODES", "STAGE_LATENCY_BUCKETS",
           "STAGE_LATENCY_FIELDS", "TIMESTAMP_TYPES",
           "stage_codes", "stage_sum"]

STAGE_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
LATENCY_STAGES = ("capture", "produce", "queue", "apply")
"""The latency stages of a row change (the `stage` label of cdcwatch_spark_stage_latency_seconds): unlike the
freshness stages of the mixin's rules and the deployment stages of its config (docs/development.md, glossary)."""
PER_CHANGE_STAGES = LATENCY_STAGES[:3]
"""The stages measured per change (apply is the batch's, the same for each of its changes)."""
STAGE_LATENCY_FIELDS = (*(f"{stage}_us" for stage in PER_CHANGE_STAGES), *(f"{stage}_code" for stage in PER_CHANGE_STAGES))
"""The fields of a change's `stage_latency`: per measured stage its latency in µs, then its bucket code."""
TIMESTAMP_TYPES = ("create_time", "log_append_time")
"""`timestamp_type` by Kafka's TimestampType id (the `timestampType` column of Spark's Kafka source)."""
MEASURED_STAGES: tuple[tuple[str, str], ...] = (
    ("capture", ""), *(("produce", t) for t in TIMESTAMP_TYPES), *(("queue", t) for t in TIMESTAMP_TYPES))
"""(stage, timestamp_type) counted per change in the `observe` aggregates; the stages that do not read the
Kafka timestamp have no timestamp_type. apply is added by the listener from the batch's progress."""
STAGE_CODES = len(STAGE_LATENCY_BUCKETS) + 2
"""Bucket codes of a latency: 0 … len(bounds) − 1 the first bound at least it, len(bounds) above the last,
NEGATIVE_CODE below 0 (counted as 0 s, and as clock skew). produce and queue add STAGE_CODES × the index of
the timestamp type."""
NEGATIVE_CODE = STAGE_CODES - 1


def stage_codes(stage: str) -> str:
    """The observed column of a measured stage's bucket codes: (code, changes) pairs, a code maybe repeated."""
    return f"stage_{stage}_codes"


def stage_sum(stage: str, timestamp_type: str) -> str:
    """The observed column of a measured stage's sum of latencies, in µs, negative ones as 0."""
    return f"stage_{stage}_{timestamp_type}_sum" if timestamp_type else f"stage_{stage}_sum"
