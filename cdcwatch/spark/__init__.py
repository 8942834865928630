"""Spark side of cdcwatch.

`cdcwatch.spark.metrics` (the listener's metric families and per-query state) is pure Python and
needs no pyspark, so the reference generator and `cdcwatch docs` work without the `spark` extra.
`apply` and `commit` (the reference apply job, `cdcwatch apply`) need pyspark; `target` needs psycopg.
"""

DEFAULT_METRICS_PORT = 10122
"""Port of the listener's /metrics in the Spark driver."""

__all__ = ["DEFAULT_METRICS_PORT"]
