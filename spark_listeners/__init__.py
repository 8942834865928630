"""cdcwatch's Spark listener (needs pyspark): apply lag, freshness, duplicates and query state of CDC apply jobs.

Attach in two lines:

    listener = CdcMetricsListener.attach(spark, port=10122)   # /metrics on every interface (address=... restricts)
    events = instrument(decode_events(kafka_records))

The sink reports what it did with each batch through `listener.metrics.sink(query, SinkOutcome(...), batch_id)`;
with `SinkOutcome.commits` (the new changes' `CommitSpread`) the apply lag, with `SinkOutcome.stages` (their latency
by stage) the stage histograms leave re-deliveries out. The reference apply job is `spark_listeners.apply`
(`cdcwatch-apply`).

Without pyspark (the spark extra) the pure-Python modules (`metrics`, `stages`, `observation`) still import,
as the exporter's tests and the metric checks need; the names below then raise an ImportError naming the extra.
"""

from __future__ import annotations

from typing import Any

from spark_listeners.metrics import CommitSpread, SinkOutcome, SparkMetrics

try:
    import pyspark  # noqa: F401
except ImportError:
    _PYSPARK = False
else:
    _PYSPARK = True
    from spark_listeners.decode import EVENT_SCHEMA, decode_events
    from spark_listeners.instrument import OBSERVATION, instrument
    from spark_listeners.listener import CdcMetricsListener

__all__ = ["EVENT_SCHEMA", "OBSERVATION", "CdcMetricsListener", "CommitSpread", "SinkOutcome", "SparkMetrics", "decode_events",
           "instrument"]


def __getattr__(name: str) -> Any:
    if name in __all__ and not _PYSPARK:
        raise ImportError(f"spark_listeners.{name} needs pyspark: pip install 'cdcwatch[spark]'")
    raise AttributeError(f"module 'spark_listeners' has no attribute {name!r}")
