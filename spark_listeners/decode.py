"""Debezium-format Kafka records → one row per event with what apply and monitoring need.

`decode_events(df)` takes the columns of a Kafka source (`key`, `value`, `topic`, `partition`,
`offset`, and `timestamp`, `timestampType` when the source has them) and decodes every record
with `cdcwatch.events` inside the Python workers (Arrow batches). A malformed record becomes a row
with `malformed = 1` and the reason in `error`: it is counted, never fatal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType, StructField, StructType

from cdcwatch.events import EventDecodeError, decode

__all__ = ["EVENT_SCHEMA", "decode_batches", "decode_events"]

EVENT_SCHEMA = StructType([
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("kind", StringType()),          # data, heartbeat, schema_change, transaction, tombstone, malformed
    StructField("op", StringType()),            # c u d r t m
    StructField("server", StringType()),        # topic.prefix
    StructField("table_id", StringType()),
    StructField("row_key", StringType()),       # canonical JSON of the primary key
    StructField("position", StringType()),      # Position.sortable(): byte order = source order
    StructField("commit_time", DoubleType()),   # source commit time, s since the epoch
    StructField("emitted_time", DoubleType()),  # when the connector processed it (heartbeats: the beat)
    StructField("after", StringType()),         # JSON of the row after the change
    StructField("malformed", IntegerType()),
    StructField("error", StringType()),
    StructField("kafka_time", DoubleType()),             # the Kafka record's timestamp, s since the epoch
    StructField("kafka_timestamp_type", IntegerType()),  # its type: 0 CreateTime (producer), 1 LogAppendTime (broker)
])

_NAMES = [field.name for field in EVENT_SCHEMA.fields]


def _row(record: dict[str, Any]) -> tuple[Any, ...]:
    topic, partition, offset = record["topic"], record["partition"], record["offset"]
    kafka = (record.get("timestamp"), record.get("timestampType"))
    try:
        event = decode(record["key"], record["value"], topic)
    except EventDecodeError as error:
        return (topic, partition, offset, "malformed", None, None, None, None, None, None, None, None, 1,
                error.reason[:200], *kafka)
    return (topic, partition, offset, event.kind.value, event.op.value if event.op else None, event.server,
            str(event.table) if event.table else None,
            json.dumps(event.key, separators=(",", ":"), default=str) if event.key is not None else None,
            event.position.sortable() if event.position else None, event.commit_time,
            None if event.emitted_time_ns is None else event.emitted_time_ns / 1e9,
            json.dumps(event.after, separators=(",", ":"), sort_keys=True) if event.after is not None else None,
            0, None, *kafka)


def decode_batches(batches: Iterator[Any]) -> Iterator[Any]:
    """mapInArrow body: Kafka record batches in, event record batches out."""
    import pyarrow as pa

    schema = to_arrow_schema(EVENT_SCHEMA)
    for batch in batches:
        rows = [_row(record) for record in batch.to_pylist()]
        columns: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [[] for _ in _NAMES]
        yield pa.RecordBatch.from_arrays([pa.array(list(c), type=schema.field(i).type) for i, c in enumerate(columns)],
                                         schema=schema)


def decode_events(records: DataFrame) -> DataFrame:
    """One decoded row per Kafka record (see EVENT_SCHEMA); without `timestamp` and `timestampType` columns
    the Kafka time is null."""
    present = set(records.columns)
    columns = [F.col(name) for name in ("key", "value", "topic", "partition", "offset")]
    columns += [(F.col("timestamp") if "timestamp" in present else F.lit(None)).cast("double").alias("timestamp"),
                (F.col("timestampType") if "timestampType" in present else F.lit(None)).cast("int").alias("timestampType")]
    return records.select(*columns).mapInArrow(decode_batches, EVENT_SCHEMA)
