"""Instrument a decoded event stream with `observe`: the rows the job computes stay exactly the same."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdcwatch.events import ROW_OPS
from cdcwatch.spark.stages import MEASURED_STAGES, PER_CHANGE_STAGES, STAGE_CODES, TIMESTAMP_TYPES, stage_codes, stage_sum
from spark_listeners.decode import WATERMARK

__all__ = ["OBSERVATION", "ROW_CHANGES", "instrument"]

OBSERVATION = "cdcwatch"
"""The name the listener reads in `progress.observedMetrics`."""

ROW_CHANGES = [op.value for op in ROW_OPS]
"""Debezium `op` codes of row changes, as the `op` column holds them."""


def _stage_latencies() -> list[Column]:
    """The batch's start, and per measured stage: how many changes had each bucket code (`decode_events` put
    them in `stage_latency`), and the sum of the latencies in µs (negative ones as 0). `histogram_numeric`
    keeps one bin per distinct value while there are no more values than bins, so with a bin per possible
    code its counts are exact. The sums are doubles: a long would overflow (and fail the query) at a few
    hundred thousand year-old changes in one batch."""
    latency = F.col("stage_latency")
    columns = [F.max(F.current_timestamp().cast("double")).alias("batch_time")]
    for stage in PER_CHANGE_STAGES:
        bins = STAGE_CODES * (1 if stage == "capture" else len(TIMESTAMP_TYPES))
        columns.append(F.histogram_numeric(latency[f"{stage}_code"].cast("double"), F.lit(bins)).alias(stage_codes(stage)))
    for stage, timestamp_type in MEASURED_STAGES:
        micros = latency[f"{stage}_us"]
        counted = micros > 0
        if timestamp_type:
            counted = counted & (F.col("kafka_timestamp_type") == TIMESTAMP_TYPES.index(timestamp_type))
        columns.append(F.sum(F.when(counted, micros.cast("double"))).alias(stage_sum(stage, timestamp_type)))
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
        F.max(F.when(F.col("kind") == "heartbeat", F.col("emitted_time"))
              .when(F.col("kind") == WATERMARK, F.col("commit_time"))).alias("newest_heartbeat"),
        F.min("server").alias("server_min"),
        F.max("server").alias("server_max"),
        *_stage_latencies(),
    ]


def instrument(events: DataFrame) -> DataFrame:
    """`events` (from `decode_events`) observed for the cdcwatch listener: counts, commit-time spread,
    malformed records, the newest heartbeat and the latency by stage of every micro-batch."""
    return events.observe(OBSERVATION, *_observations())
