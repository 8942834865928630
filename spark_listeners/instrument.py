"""Instrument a decoded event stream with `observe`: the rows the job computes stay exactly the same."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = ["OBSERVATION", "SUMMARIES", "instrument"]

OBSERVATION = "cdcwatch"
"""The name the listener reads in `progress.observedMetrics`."""
SUMMARIES = "summaries"
"""The observed column: the `batch_summary` of every Arrow batch the micro-batch decoded."""


def _observations() -> list[Column]:
    """One aggregate: the list of the Arrow batches' summaries (`collect_list` skips the null ones of every other
    row), which the listener merges. Every aggregate evaluated per row costs the JVM a few hundred ns; this one
    only skips a null."""
    return [F.collect_list("batch_summary").alias(SUMMARIES)]


def instrument(events: DataFrame) -> DataFrame:
    """`events` (straight from `decode_events`: the summaries describe its rows, so nothing may filter them in
    between) observed for the cdcwatch listener: counts, commit-time spread, malformed records, the newest
    heartbeat and the latency by stage of every micro-batch."""
    if "batch_summary" not in events.columns:
        raise ValueError("instrument() takes the DataFrame decode_events() returns: it has no batch_summary column")
    return events.observe(OBSERVATION, *_observations())
