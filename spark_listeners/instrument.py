"""Instrument a decoded event stream with `observe`: the rows the job computes stay exactly the same."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdcwatch.events import ROW_OPS

__all__ = ["OBSERVATION", "ROW_CHANGES", "instrument"]

OBSERVATION = "cdcwatch"
"""The name the listener reads in `progress.observedMetrics`."""

ROW_CHANGES = [op.value for op in ROW_OPS]
"""Debezium `op` codes of row changes, as the `op` column holds them."""


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
    ]


def instrument(events: DataFrame) -> DataFrame:
    """`events` (from `decode_events`) observed for the cdcwatch listener: counts, commit-time spread,
    malformed records and the newest heartbeat of every micro-batch."""
    return events.observe(OBSERVATION, *_observations())
