"""Debezium-format Kafka records → one row per event with what apply and monitoring need.

`decode_events(df)` takes the columns of a Kafka source (`key`, `value`, `topic`, `partition`,
`offset`, and `timestamp`, `timestampType` when the source has them) and decodes every record
with `cdcwatch.events` inside the Python workers (Arrow batches). A malformed record becomes a row
with `malformed = 1` and the reason in `error`: it is counted, never fatal.

Every row change also gets its latency by stage (`stage_latency`), computed over the whole Arrow batch
at once: capture, produce and queue in whole microseconds (the timestamps' resolution) and their
histogram bucket codes (`spark_listeners.latency.STAGE_CODES`). The first row of each Arrow batch carries
the batch's partial aggregates (`batch_summary`, null on every other row), vectorized here: `instrument`
observes only those, and the listener merges them (`spark_listeners.observation`). Aggregating per row in
the JVM cost about 7 µs a row; an Arrow batch's summary costs well under a microsecond a row.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from cdcwatch.events import ROW_OPS, EventDecodeError, decode
from spark_listeners.latency import (
    MEASURED_STAGES,
    NEGATIVE_CODE,
    PER_CHANGE_STAGES,
    STAGE_CODES,
    STAGE_LATENCY_BUCKETS,
    STAGE_LATENCY_FIELDS,
    TIMESTAMP_TYPES,
    stage_codes,
    stage_sum,
)
from spark_listeners.observation import COMMIT_POINTS

__all__ = ["BATCH_SUMMARY_SCHEMA", "EVENT_SCHEMA", "ROW_CHANGES", "STAGE_LATENCY_SCHEMA", "decode_batches",
           "decode_events"]

STAGE_LATENCY_SCHEMA = StructType([StructField(name, LongType() if name.endswith("_us") else IntegerType())
                                   for name in STAGE_LATENCY_FIELDS])
"""capture_us: source commit → connector (payload.ts_ms − source.ts_ms); produce_us: connector → the Kafka record's
timestamp; queue_us: that timestamp → the start of the micro-batch (current_timestamp()); then the bucket codes of
the three (produce, queue: + STAGE_CODES × the timestamp type). Null for what is no row change, or lacks a
timestamp; produce and queue need a known Kafka timestamp type."""

BATCH_SUMMARY_SCHEMA = StructType([
    *(StructField(name, LongType()) for name in ("events", "changes", "malformed")),
    *(StructField(name, DoubleType()) for name in ("oldest_commit", "newest_commit")),
    StructField("commit_points", ArrayType(DoubleType())),  # the changes' commit times, or their percentiles
    StructField("newest_heartbeat", DoubleType()),
    *(StructField(name, StringType()) for name in ("server_min", "server_max")),
    StructField("batch_time", DoubleType()),
    *(StructField(stage_codes(stage), ArrayType(LongType())) for stage in PER_CHANGE_STAGES),  # changes per code
    *(StructField(stage_sum(stage, timestamp_type), DoubleType()) for stage, timestamp_type in MEASURED_STAGES),
])
"""An Arrow batch's partial aggregates (`spark_listeners.observation.merge_summaries` merges them): per stage the
changes per bucket code (index = code) and the sum of latencies in µs (negative ones as 0)."""

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
    StructField("after_fields", StringType()),  # JSON of the row image's Connect schema fields: first row per table
                                                # and schema in each Arrow batch, else null (typed targets read it)
    StructField("stage_latency", STAGE_LATENCY_SCHEMA),
    StructField("batch_summary", BATCH_SUMMARY_SCHEMA),  # on the first row of each Arrow batch
])

_NAMES = [field.name for field in EVENT_SCHEMA.fields]
_ROW_NAMES = _NAMES[:-2]
"""What `_row` makes of one record; `stage_latency` and `batch_summary` come from the whole batch."""
ROW_CHANGES = [op.value for op in ROW_OPS]
"""Debezium `op` codes of row changes, as the `op` column holds them."""
WATERMARK = "watermark"
"""The `kind` of a TiCDC WATERMARK (the event model's kind `data`, op `m`): every change before its commit_ts was
sent, so its commit time proves how far the source is caught up, like a heartbeat."""
_BOUNDS_US = [round(bound * 1e6) for bound in STAGE_LATENCY_BUCKETS]


def _row(record: dict[str, Any], schemas_seen: dict[Any, list[Any]]) -> tuple[Any, ...]:
    """One record decoded; its row image's schema only when it is not the one `schemas_seen` (this Arrow batch's,
    by table) last had."""
    topic, partition, offset = record["topic"], record["partition"], record["offset"]
    kafka = (record.get("timestamp"), record.get("timestampType"))
    try:
        event = decode(record["key"], record["value"], topic)
    except EventDecodeError as error:
        return (topic, partition, offset, "malformed", None, None, None, None, None, None, None, None, 1,
                error.reason[:200], *kafka, None)
    kind = WATERMARK if event.is_watermark else event.kind.value
    fields = None
    if event.after_fields is not None:
        if schemas_seen.get(event.table) != event.after_fields:  # a list compared in C: no work per row in Python
            schemas_seen[event.table] = event.after_fields
            fields = json.dumps(event.after_fields, separators=(",", ":"))
    return (topic, partition, offset, kind, event.op.value if event.op else None, event.server,
            str(event.table) if event.table else None,
            json.dumps(event.key, separators=(",", ":"), default=str) if event.key is not None else None,
            event.position.sortable() if event.position else None, event.commit_time,
            None if event.emitted_time_ns is None else event.emitted_time_ns / 1_000_000_000,
            json.dumps(event.after, separators=(",", ":"), sort_keys=True) if event.after is not None else None,
            0, None, *kafka, fields)


class _Stages:
    """The latency by stage of a batch of decoded rows (Arrow arrays by EVENT_SCHEMA name) read by a micro-batch
    that started at `batch_time` (s since the epoch, per row), as numpy arrays: per measured stage the latencies
    in µs (NaN: not measured) and their bucket codes."""

    def __init__(self, columns: dict[str, Any], batch_time: Any) -> None:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        def seconds(array: Any) -> Any:
            return pc.cast(array, pa.float64()).to_numpy(zero_copy_only=False)  # null → NaN

        self.change = pc.fill_null(pc.and_(pc.equal(columns["kind"], "data"),
                                           pc.is_in(columns["op"], pa.array(ROW_CHANGES))), False).to_numpy(zero_copy_only=False)
        self.kafka_type = pc.fill_null(columns["kafka_timestamp_type"], -1).to_numpy(zero_copy_only=False)
        stamped = self.change & (self.kafka_type >= 0) & (self.kafka_type < len(TIMESTAMP_TYPES))
        self.commit = seconds(columns["commit_time"])
        emitted, kafka = seconds(columns["emitted_time"]), seconds(columns["kafka_time"])
        with np.errstate(invalid="ignore"):
            self.latencies = [np.where(self.change, np.rint((emitted - self.commit) * 1e6), np.nan),
                              np.where(stamped, np.rint((kafka - emitted) * 1e6), np.nan),
                              np.where(stamped, np.rint((seconds(batch_time) - kafka) * 1e6), np.nan)]
            offsets = [0, STAGE_CODES * self.kafka_type, STAGE_CODES * self.kafka_type]
            self.codes = [np.where(latency < 0, NEGATIVE_CODE, np.searchsorted(_BOUNDS_US, latency, side="left")) + offset
                          for latency, offset in zip(self.latencies, offsets, strict=True)]
        self.missing = [np.isnan(latency) for latency in self.latencies]

    def struct(self) -> Any:
        """The `stage_latency` struct array."""
        import numpy as np
        import pyarrow as pa

        fields = [pa.array(np.nan_to_num(latency).astype(np.int64), mask=gap)
                  for latency, gap in zip(self.latencies, self.missing, strict=True)]
        fields += [pa.array(code.astype(np.int32), mask=gap) for code, gap in zip(self.codes, self.missing, strict=True)]
        return pa.StructArray.from_arrays(fields, names=STAGE_LATENCY_SCHEMA.fieldNames())

    def aggregates(self) -> dict[str, Any]:
        """Per measured stage: changes per bucket code, and the sum of the positive latencies in µs."""
        import numpy as np

        found: dict[str, Any] = {}
        for index, stage in enumerate(PER_CHANGE_STAGES):
            size = STAGE_CODES * (1 if stage == "capture" else len(TIMESTAMP_TYPES))
            codes = self.codes[index][~self.missing[index]].astype(np.int64)
            found[stage_codes(stage)] = np.bincount(codes, minlength=size).tolist()
        for stage, timestamp_type in MEASURED_STAGES:
            micros = self.latencies[PER_CHANGE_STAGES.index(stage)]
            with np.errstate(invalid="ignore"):
                counted = micros > 0
            if timestamp_type:
                counted &= self.kafka_type == TIMESTAMP_TYPES.index(timestamp_type)
            found[stage_sum(stage, timestamp_type)] = float(micros[counted].sum())
        return found


def _commit_points(commits: Any) -> list[float]:
    """The changes' commit times, sorted, up to COMMIT_POINTS of them; else their 1st … 100th percentile (the
    inverted CDF: each stands for an equal share of the changes)."""
    import numpy as np

    ordered = np.sort(commits)
    if len(ordered) <= COMMIT_POINTS:
        return ordered.tolist()
    ranks = np.ceil(np.arange(1, COMMIT_POINTS + 1) / COMMIT_POINTS * len(ordered)).astype(np.int64) - 1
    return ordered[ranks].tolist()


def batch_summary(columns: dict[str, Any], stages: _Stages, batch_time: Any) -> dict[str, Any]:
    """The partial aggregates of one Arrow batch of decoded rows (see BATCH_SUMMARY_SCHEMA)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    def extreme(array: Any, which: str) -> Any:
        return pc.min_max(array)[which].as_py()

    commits = stages.commit[stages.change & ~np.isnan(stages.commit)]
    kind = columns["kind"]
    heartbeat = pc.if_else(pc.equal(kind, "heartbeat"), columns["emitted_time"],
                           pc.if_else(pc.equal(kind, WATERMARK), columns["commit_time"], pa.scalar(None, pa.float64())))
    return {
        "events": len(kind),
        "changes": len(commits),
        "malformed": pc.sum(columns["malformed"]).as_py() or 0,
        "oldest_commit": float(commits.min()) if len(commits) else None,
        "newest_commit": float(commits.max()) if len(commits) else None,
        "commit_points": _commit_points(commits),
        "newest_heartbeat": extreme(heartbeat, "max"),
        "server_min": extreme(columns["server"], "min"),
        "server_max": extreme(columns["server"], "max"),
        "batch_time": extreme(batch_time, "max"),
        **stages.aggregates(),
    }


def decode_batches(batches: Iterator[Any]) -> Iterator[Any]:
    """mapInArrow body: Kafka record batches (and the micro-batch's start, `batch_time`) in, event record
    batches out, the first row of each with the batch's summary."""
    import pyarrow as pa

    schema = to_arrow_schema(EVENT_SCHEMA)
    summary_type = schema.field("batch_summary").type
    for batch in batches:
        seen: dict[Any, list[Any]] = {}
        rows = [_row(record, seen) for record in batch.to_pylist()]
        columns: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [[] for _ in _ROW_NAMES]
        arrays = {name: pa.array(list(c), type=schema.field(name).type) for name, c in zip(_ROW_NAMES, columns, strict=True)}
        batch_time = batch.column("batch_time")
        stages = _Stages(arrays, batch_time)
        arrays["stage_latency"] = stages.struct()
        arrays["batch_summary"] = (pa.concat_arrays([pa.array([batch_summary(arrays, stages, batch_time)], type=summary_type),
                                                     pa.nulls(len(rows) - 1, type=summary_type)])
                                   if rows else pa.nulls(0, type=summary_type))
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
