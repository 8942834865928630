"""Debezium-format Kafka records → one row per event with what apply and monitoring need.

`decode_events(df)` takes the columns of a Kafka source (`key`, `value`, `topic`, `partition`,
`offset`, and `timestamp`, `timestampType` when the source has them) and decodes every record
with `cdcwatch.events` inside the Python workers (Arrow batches). A malformed record becomes a row
with `malformed = 1` and the reason in `error`: it is counted, never fatal.

Every row change also gets its latency by stage (`stage_latency`), computed over the whole Arrow batch
at once: capture, produce and queue in whole microseconds (the timestamps' resolution) and their
histogram bucket codes (`cdcwatch.spark.stages.STAGE_CODES`), which `instrument` counts. Bucketing here,
vectorized, costs next to nothing; in the JVM, per row, it cost more than the rest of the instrumentation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType, StructField, StructType

from cdcwatch.events import ROW_OPS, EventDecodeError, decode
from cdcwatch.spark.stages import NEGATIVE_CODE, STAGE_CODES, STAGE_LATENCY_BUCKETS, STAGE_LATENCY_FIELDS, TIMESTAMP_TYPES

__all__ = ["EVENT_SCHEMA", "STAGE_LATENCY_SCHEMA", "decode_batches", "decode_events", "stage_latency"]

STAGE_LATENCY_SCHEMA = StructType([StructField(name, LongType() if name.endswith("_us") else IntegerType())
                                   for name in STAGE_LATENCY_FIELDS])
"""capture_us: source commit → connector (payload.ts_ms − source.ts_ms); produce_us: connector → the Kafka record's
timestamp; queue_us: that timestamp → the start of the micro-batch (current_timestamp()); then the bucket codes of
the three (produce, queue: + STAGE_CODES × the timestamp type). Null for what is no row change, or lacks a
timestamp; produce and queue need a known Kafka timestamp type."""

EVENT_SCHEMA = StructType([
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("kind", StringType()),          # data, heartbeat, watermark (TiCDC), schema_change, transaction,
                                                # tombstone, malformed
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
    StructField("stage_latency", STAGE_LATENCY_SCHEMA),
])

_NAMES = [field.name for field in EVENT_SCHEMA.fields]
_ROW_NAMES = _NAMES[:-1]
"""What `_row` makes of one record; `stage_latency` comes from the whole batch."""
_ROW_CHANGES = [op.value for op in ROW_OPS]
WATERMARK = "watermark"
"""The `kind` of a TiCDC WATERMARK (the event model's kind `data`, op `m`): every change before its commit_ts was
sent, so its commit time proves how far the source is caught up, like a heartbeat."""
_BOUNDS_US = [round(bound * 1e6) for bound in STAGE_LATENCY_BUCKETS]


def _row(record: dict[str, Any]) -> tuple[Any, ...]:
    topic, partition, offset = record["topic"], record["partition"], record["offset"]
    kafka = (record.get("timestamp"), record.get("timestampType"))
    try:
        event = decode(record["key"], record["value"], topic)
    except EventDecodeError as error:
        return (topic, partition, offset, "malformed", None, None, None, None, None, None, None, None, 1,
                error.reason[:200], *kafka)
    kind = WATERMARK if event.is_watermark else event.kind.value
    return (topic, partition, offset, kind, event.op.value if event.op else None, event.server,
            str(event.table) if event.table else None,
            json.dumps(event.key, separators=(",", ":"), default=str) if event.key is not None else None,
            event.position.sortable() if event.position else None, event.commit_time,
            None if event.emitted_time_ns is None else event.emitted_time_ns / 1_000_000_000,
            json.dumps(event.after, separators=(",", ":"), sort_keys=True) if event.after is not None else None,
            0, None, *kafka)


def stage_latency(columns: dict[str, Any], batch_time: Any) -> Any:
    """The `stage_latency` struct array of a batch of decoded rows (Arrow arrays by EVENT_SCHEMA name) read by
    a micro-batch that started at `batch_time` (s since the epoch, per row)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    def seconds(array: Any) -> Any:
        return pc.cast(array, pa.float64()).to_numpy(zero_copy_only=False)  # null → NaN

    change = pc.fill_null(pc.and_(pc.equal(columns["kind"], "data"), pc.is_in(columns["op"], pa.array(_ROW_CHANGES))),
                          False).to_numpy(zero_copy_only=False)
    kafka_type = pc.fill_null(columns["kafka_timestamp_type"], -1).to_numpy(zero_copy_only=False)
    stamped = change & (kafka_type >= 0) & (kafka_type < len(TIMESTAMP_TYPES))
    commit, emitted, kafka = seconds(columns["commit_time"]), seconds(columns["emitted_time"]), seconds(columns["kafka_time"])
    with np.errstate(invalid="ignore"):
        latencies = [np.where(change, np.rint((emitted - commit) * 1e6), np.nan),
                     np.where(stamped, np.rint((kafka - emitted) * 1e6), np.nan),
                     np.where(stamped, np.rint((seconds(batch_time) - kafka) * 1e6), np.nan)]
        offsets = [0, STAGE_CODES * kafka_type, STAGE_CODES * kafka_type]
        codes = [np.where(latency < 0, NEGATIVE_CODE, np.searchsorted(_BOUNDS_US, latency, side="left")) + offset
                 for latency, offset in zip(latencies, offsets, strict=True)]
    missing = [np.isnan(latency) for latency in latencies]
    fields = [pa.array(np.nan_to_num(latency).astype(np.int64), mask=gap) for latency, gap in zip(latencies, missing, strict=True)]
    fields += [pa.array(code.astype(np.int32), mask=gap) for code, gap in zip(codes, missing, strict=True)]
    return pa.StructArray.from_arrays(fields, names=STAGE_LATENCY_SCHEMA.fieldNames())


def decode_batches(batches: Iterator[Any]) -> Iterator[Any]:
    """mapInArrow body: Kafka record batches (and the micro-batch's start, `batch_time`) in, event record
    batches out."""
    import pyarrow as pa

    schema = to_arrow_schema(EVENT_SCHEMA)
    for batch in batches:
        rows = [_row(record) for record in batch.to_pylist()]
        columns: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [[] for _ in _ROW_NAMES]
        arrays = {name: pa.array(list(c), type=schema.field(name).type) for name, c in zip(_ROW_NAMES, columns, strict=True)}
        arrays["stage_latency"] = stage_latency(arrays, batch.column("batch_time"))
        yield pa.RecordBatch.from_arrays(list(arrays.values()), schema=schema)


def decode_events(records: DataFrame) -> DataFrame:
    """One decoded row per Kafka record (see EVENT_SCHEMA); without `timestamp` and `timestampType` columns
    the Kafka time is null, and so are produce and queue."""
    present = set(records.columns)
    columns = [F.col(name) for name in ("key", "value", "topic", "partition", "offset")]
    columns += [(F.col("timestamp") if "timestamp" in present else F.lit(None)).cast("double").alias("timestamp"),
                (F.col("timestampType") if "timestampType" in present else F.lit(None)).cast("int").alias("timestampType"),
                F.current_timestamp().cast("double").alias("batch_time")]  # in a stream: the micro-batch's start
    return records.select(*columns).mapInArrow(decode_batches, EVENT_SCHEMA)
