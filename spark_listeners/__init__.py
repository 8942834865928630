"""cdcwatch's Spark listener (needs pyspark): apply lag, freshness, duplicates and query state of CDC apply jobs.

Attach in two lines:

    listener = CdcMetricsListener.attach(spark, port=10122)   # /metrics on every interface (address=... restricts)
    events = instrument(decode_events(kafka_records))

The sink reports what it did with each batch through `listener.metrics.sink(query, SinkOutcome(...), batch_id)`;
with `SinkOutcome.commits` (the new changes' `CommitSpread`) the apply lag, with `SinkOutcome.stages` (their latency
by stage) the stage histograms leave re-deliveries out. The reference apply job is `spark_listeners.apply`
(`cdcwatch-apply`).
"""

from spark_listeners.decode import EVENT_SCHEMA, decode_events
from spark_listeners.instrument import OBSERVATION, instrument
from spark_listeners.listener import CdcMetricsListener
from spark_listeners.metrics import CommitSpread, SinkOutcome, SparkMetrics

__all__ = ["EVENT_SCHEMA", "OBSERVATION", "CdcMetricsListener", "CommitSpread", "SinkOutcome", "SparkMetrics", "decode_events",
           "instrument"]
