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


DECODER_NODES = frozenset({"MapInArrow", "PythonMapInArrow"})
"""The logical plan node of `decode_events`'s `mapInArrow` (its name in Spark 4 and in Spark 3)."""
ROW_PRESERVING_NODES = frozenset({"Project", "SubqueryAlias", "EventTimeWatermark", "Repartition",
                                  "RepartitionByExpression", "RebalancePartitions", "ResolvedHint", "Sort"})
"""Logical plan nodes that may stand between `decode_events` and `instrument`: each keeps every row, so the
summaries still describe the rows. Anything else (Filter, Limit, Deduplicate, Join, Aggregate, Generate...)
changes the rows they count."""


CONNECT_DECODER_NODES = frozenset({"MapPartitions"})
"""The Spark Connect client's plan node of `decode_events`'s `mapInArrow`."""
CONNECT_ROW_PRESERVING_NODES = frozenset({"Project", "WithColumns", "WithColumnsRenamed", "Drop", "ToDF", "ToSchema",
                                          "SubqueryAlias", "WithWatermark", "Repartition", "RepartitionByExpression",
                                          "Hint", "Sort"})
"""The same row-keeping steps as the Spark Connect client records them (`pyspark.sql.connect.plan`)."""


def _refuse(name: str) -> ValueError:
    return ValueError(f"instrument() must see every row decode_events() returns, but a {name} stands "
                      "between them and would change the rows the summaries count; apply instrument() "
                      "to decode_events()'s DataFrame and transform what it returns")


def _check_rows_kept(events: DataFrame) -> None:
    """Raise ValueError when the plan between `decode_events` and `events` can drop or add rows: a classic (py4j)
    DataFrame's analyzed plan, or the plan a Spark Connect client builds (each step a node with one `_child`)."""
    java = getattr(events, "_jdf", None)
    if java is None:
        _check_connect_rows_kept(getattr(events, "_plan", None))
        return
    node = java.queryExecution().analyzed()
    while node.nodeName() not in DECODER_NODES:
        name, children = node.nodeName(), node.children()
        if children.length() == 0:
            return  # the summaries were not decoded in this plan: nothing to check them against
        if name not in ROW_PRESERVING_NODES or children.length() != 1:
            raise _refuse(name)
        node = children.apply(0)


def _check_connect_rows_kept(node: object) -> None:
    while node is not None and type(node).__name__ not in CONNECT_DECODER_NODES:
        child = getattr(node, "_child", None)
        if child is None:
            return  # the summaries were not decoded in this plan
        if type(node).__name__ not in CONNECT_ROW_PRESERVING_NODES:
            raise _refuse(type(node).__name__)
        node = child


def instrument(events: DataFrame) -> DataFrame:
    """`events` (straight from `decode_events`: the summaries describe its rows, so nothing may filter them in
    between; a plan that does is refused) observed for the cdcwatch listener: counts, commit-time spread,
    malformed records, the newest heartbeat and the latency by stage of every micro-batch."""
    if "batch_summary" not in events.columns:
        raise ValueError("instrument() takes the DataFrame decode_events() returns: it has no batch_summary column")
    _check_rows_kept(events)
    return events.observe(OBSERVATION, *_observations())
