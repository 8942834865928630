"""Instrument a decoded event stream with `observe`: the rows the job computes stay exactly the same."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdcwatch.events import ROW_OPS
from cdcwatch.spark.metrics import MEASURED_STAGES, STAGE_LATENCY_BUCKETS, TIMESTAMP_TYPES, stage_observation

__all__ = ["OBSERVATION", "ROW_CHANGES", "instrument"]

OBSERVATION = "cdcwatch"
"""The name the listener reads in `progress.observedMetrics`."""

ROW_CHANGES = [op.value for op in ROW_OPS]
"""Debezium `op` codes of row changes, as the `op` column holds them."""


def _stage_latencies(change: Column) -> list[Column]:
    """Per measured stage of every row change: changes at most each bucket bound, the sum (negative values
    as 0), the count and the negative ones. The batch's `current_timestamp()` is its start. Latencies are
    whole microseconds (the timestamps' resolution), so a gap of exactly 250 ms is at most 0.25."""
    batch = F.current_timestamp().cast("double")
    kafka, kafka_type = F.col("kafka_time"), F.col("kafka_timestamp_type")
    ends = {"capture": (F.col("commit_time"), F.col("emitted_time")), "produce": (F.col("emitted_time"), kafka),
            "queue": (kafka, batch)}
    columns = [F.max(F.when(change, batch)).alias("batch_time")]
    for stage, timestamp_type in MEASURED_STAGES:
        start, end = ends[stage]
        measured = change & (kafka_type == TIMESTAMP_TYPES.index(timestamp_type)) if timestamp_type else change
        latency = F.when(measured, F.rint((end - start) * 1e6))
        columns += [F.count(F.when(latency <= round(bound * 1e6), 1)).alias(stage_observation(stage, timestamp_type, index))
                    for index, bound in enumerate(STAGE_LATENCY_BUCKETS)]
        columns += [F.sum(F.when(latency > 0, latency)).alias(stage_observation(stage, timestamp_type, "sum")),
                    F.count(latency).alias(stage_observation(stage, timestamp_type, "count")),
                    F.count(F.when(latency < 0, 1)).alias(stage_observation(stage, timestamp_type, "negative"))]
    return columns


def _observations() -> list[Column]:
    change = (F.col("kind") == "data") & F.col("op").isin(*ROW_CHANGES)
    commit = F.when(change, F.col("commit_time"))
    percentiles = F.percentile_approx(commit, [0.01, 0.5], 100)  # 1 % rank error: plenty for seconds of lag
    return [
        F.count(F.lit(1)).alias("events"),
        F.count(commit).alias("changes"),
        F.sum("malformed").alias("malformed"),
        F.min(commit).alias("oldest_commit"),
        F.max(commit).alias("newest_commit"),
        percentiles.getItem(0).alias("p01_commit"),
        percentiles.getItem(1).alias("p50_commit"),
        F.max(F.when(F.col("kind") == "heartbeat", F.col("emitted_time"))).alias("newest_heartbeat"),
        F.min("server").alias("server_min"),
        F.max("server").alias("server_max"),
        *_stage_latencies(change),
    ]


def instrument(events: DataFrame) -> DataFrame:
    """`events` (from `decode_events`) observed for the cdcwatch listener: counts, commit-time spread,
    malformed records, the newest heartbeat and the latency by stage of every micro-batch."""
    return events.observe(OBSERVATION, *_observations())
