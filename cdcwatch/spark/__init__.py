"""Spark side of cdcwatch.

`cdcwatch.spark.metrics` (the listener's metric families and per-query state) is pure Python and
needs no pyspark, so the reference generator and `cdcwatch docs` work without the `spark` extra.
`apply` and `commit` (the reference apply job, `cdcwatch apply`) need pyspark; `target` needs psycopg.
"""

DEFAULT_METRICS_PORT = 10122
"""Port of the listener's /metrics in the Spark driver."""
DEFAULT_METRICS_ADDRESS = "0.0.0.0"
"""Address the listener's /metrics binds to: every interface, as exporters do, because the driver runs on a host
(or in a pod) that Prometheus reaches from elsewhere. Pass the driver's own address (or 127.0.0.1) to restrict it."""
PUSH_JOB = "cdcwatch-spark"
"""The `job` the listener pushes under to a Pushgateway: the one the mixin's `Selectors.spark` selects."""

__all__ = ["DEFAULT_METRICS_ADDRESS", "DEFAULT_METRICS_PORT", "PUSH_JOB"]
