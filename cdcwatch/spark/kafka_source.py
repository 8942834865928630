"""A Spark streaming data source that reads Kafka topics through confluent-kafka.

Spark's own Kafka source (`format("kafka")`) needs the spark-sql-kafka jars; where they are not on
the classpath, this Python data source (`format("cdcwatch_kafka")`) reads the same topics with the
same columns. Offsets live in the Spark checkpoint as `{"topic": {"partition": next offset}}`.

Like spark-sql-kafka's `failOnDataLoss`, a start offset below a partition's log start (the broker
already deleted records the query never read) fails the batch with a `DataLossError`; with
`failOnDataLoss=false` the gap is skipped and reported in the `lost_offsets` column of one
marker row, so it can be counted downstream.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType, TimestampType

__all__ = ["KAFKA_SCHEMA", "DataLossError", "KafkaDataSource", "OffsetRange", "register"]

SOURCE_NAME = "cdcwatch_kafka"

KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("lost_offsets", LongType()),
])
"""The columns of Spark's Kafka source, plus `lost_offsets` (0 except on a data-loss marker row)."""

_METADATA_TIMEOUT_SECONDS = 10.0
_POLL_SECONDS = 1.0
_STALL_SECONDS = 120.0
"""A range read that gets no record for this long fails the task (a hung read never stalls the query silently)."""
_READER_DEFAULTS = {"receive.message.max.bytes": 1_000_000_000}
"""Some Kafka-protocol brokers (noida-db) answer a fetch with the whole range, ignoring fetch.max.bytes."""


class DataLossError(RuntimeError):
    """Records the query still had to read are gone from the broker."""


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Records [start, end) of one topic partition: one Spark input partition."""

    topic: str
    partition: int
    start: int
    end: int


class KafkaDataSource(DataSource):
    """Options: `kafka.bootstrap.servers`, `subscribe` (comma list) or `subscribePattern`,
    `startingOffsets` (earliest|latest), `maxOffsetsPerTrigger`, `failOnDataLoss` (default true),
    `commitGroup` (also commit each finished batch's offsets under this consumer group, so lag tools see
    the query; the checkpoint stays the source of truth), and any `kafka.<librdkafka setting>`."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return KAFKA_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader({name.lower(): value for name, value in self.options.items()})


def client_settings(options: dict[str, str]) -> dict[str, Any]:
    """librdkafka settings from the `kafka.*` options."""
    settings = {k[len("kafka."):]: v for k, v in options.items() if k.startswith("kafka.")}
    if "bootstrap.servers" not in settings:
        raise ValueError("option kafka.bootstrap.servers is required")
    return settings


class KafkaStreamReader(DataSourceStreamReader):
    """`options` with lower-case names, as Spark hands them over."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        self.settings = client_settings(options)
        self.max_per_trigger = int(options["maxoffsetspertrigger"]) if "maxoffsetspertrigger" in options else None
        self.fail_on_data_loss = options.get("failondataloss", "true").lower() != "false"
        self.commit_group = options.get("commitgroup")
        self._consumer: Any = None
        self._committer: Any = None

    # driver side ---------------------------------------------------------------------------------
    def _admin_consumer(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer({**self.settings, "group.id": "cdcwatch-spark-source", "enable.auto.commit": False})
        return self._consumer

    def _partitions(self) -> list[tuple[str, int]]:
        metadata = self._admin_consumer().list_topics(timeout=_METADATA_TIMEOUT_SECONDS)
        if "subscribe" in self.options:
            wanted = [t.strip() for t in self.options["subscribe"].split(",") if t.strip()]
            topics = [t for t in wanted if t in metadata.topics]
        else:
            pattern = re.compile(self.options.get("subscribepattern", ".*"))
            topics = sorted(t for t in metadata.topics if pattern.fullmatch(t) and not t.startswith("__consumer"))
        return [(t, p) for t in topics for p in sorted(metadata.topics[t].partitions)]

    def _watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        from confluent_kafka import TopicPartition

        low, high = self._admin_consumer().get_watermark_offsets(TopicPartition(topic, partition),
                                                                 timeout=_METADATA_TIMEOUT_SECONDS, cached=False)
        return int(low), int(high)

    def _ends(self) -> dict[str, dict[str, int]]:
        ends: dict[str, dict[str, int]] = {}
        for topic, partition in self._partitions():
            ends.setdefault(topic, {})[str(partition)] = self._watermarks(topic, partition)[1]
        return ends

    def initialOffset(self) -> dict:
        latest = self.options.get("startingoffsets", "earliest") == "latest"
        starts: dict[str, dict[str, int]] = {}
        for topic, partition in self._partitions():
            low, high = self._watermarks(topic, partition)
            starts.setdefault(topic, {})[str(partition)] = high if latest else low
        return starts

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_per_trigger) if self.max_per_trigger else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        ends = self._ends()
        if isinstance(limit, ReadMaxRows):
            ends = _limited(start, ends, limit.max_rows)
        return ends

    def reportLatestOffset(self) -> dict:
        """What the broker holds: Spark reports it as the source's `latestOffset` (offsets behind latest)."""
        return self._ends()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        ranges = []
        for topic, partitions in end.items():
            for partition, stop in partitions.items():
                begin = start.get(topic, {}).get(partition, 0)  # a partition added since: read it from 0
                if stop > begin:
                    ranges.append(OffsetRange(topic, int(partition), int(begin), int(stop)))
        return ranges

    def commit(self, end: dict) -> None:
        """Offsets live in the checkpoint; with `commitGroup` they are also committed to Kafka for lag tools."""
        if not self.commit_group:
            return
        from confluent_kafka import Consumer, TopicPartition

        if self._committer is None:
            self._committer = Consumer({**self.settings, "group.id": self.commit_group, "enable.auto.commit": False})
        offsets = [TopicPartition(topic, int(partition), int(offset))
                   for topic, partitions in end.items() for partition, offset in partitions.items()]
        if offsets:
            self._committer.commit(offsets=offsets, asynchronous=False)

    def stop(self) -> None:
        for client in (self._consumer, self._committer):
            if client is not None:
                client.close()
        self._consumer = self._committer = None

    # executor side -------------------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[tuple]:
        assert isinstance(partition, OffsetRange)
        return read_range(self.settings, partition, self.fail_on_data_loss)


def _limited(start: dict, ends: dict[str, dict[str, int]], max_rows: int) -> dict[str, dict[str, int]]:
    """End offsets that admit at most `max_rows` records, shared out over partitions in turn."""
    limited = {t: {p: start.get(t, {}).get(p, 0) for p in ps} for t, ps in ends.items()}
    budget = max_rows
    while budget > 0:
        moved = False
        for topic, partitions in ends.items():
            for partition, stop in partitions.items():
                if budget > 0 and limited[topic][partition] < stop:
                    share = min(stop - limited[topic][partition], max(1, budget // max(1, _count(ends))))
                    limited[topic][partition] += share
                    budget -= share
                    moved = True
        if not moved:
            break
    return limited


def _count(ends: dict[str, dict[str, int]]) -> int:
    return sum(len(partitions) for partitions in ends.values())


def read_range(settings: dict[str, Any], offsets: OffsetRange, fail_on_data_loss: bool) -> Iterator[tuple]:
    """The records of one offset range, in offset order."""
    import datetime
    import time

    from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, TopicPartition  # noqa: F401 (executor import)

    consumer = Consumer({**_READER_DEFAULTS, **settings, "group.id": "cdcwatch-spark-source", "enable.auto.commit": False,
                         "auto.offset.reset": "error", "enable.partition.eof": True})
    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition(offsets.topic, offsets.partition),
                                                timeout=_METADATA_TIMEOUT_SECONDS, cached=False)
        position = offsets.start
        if low > position and low != OFFSET_INVALID:
            message = (f"{offsets.topic}[{offsets.partition}]: offsets {position}..{min(low, offsets.end) - 1} are gone "
                       f"from the broker (log start {low}); set failOnDataLoss=false to skip and count them")
            if fail_on_data_loss:
                raise DataLossError(message)
            yield (None, None, offsets.topic, offsets.partition, position, None, min(low, offsets.end) - position)
            position = low
        if position >= offsets.end:
            return
        consumer.assign([TopicPartition(offsets.topic, offsets.partition, position)])
        last_progress = time.monotonic()
        while position < offsets.end:
            record = consumer.poll(_POLL_SECONDS)
            if record is None:
                if time.monotonic() - last_progress > _STALL_SECONDS:
                    raise RuntimeError(f"{offsets.topic}[{offsets.partition}]: no record at offset {position} for "
                                       f"{_STALL_SECONDS:g}s (end {offsets.end}); see the client errors in the log")
                continue
            last_progress = time.monotonic()
            error = record.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    if record.offset() >= offsets.end:  # the rest were transaction markers or compacted away
                        break
                    continue
                raise RuntimeError(f"{offsets.topic}[{offsets.partition}]: {error}")
            offset = record.offset()
            if offset >= offsets.end:
                break
            kind, stamp = record.timestamp()
            when = datetime.datetime.fromtimestamp(stamp / 1000, datetime.timezone.utc) if stamp > 0 else None
            yield (record.key(), record.value(), offsets.topic, offsets.partition, offset, when, 0)
            position = offset + 1
    finally:
        consumer.close()


def register(spark: Any) -> None:
    """Make `spark.readStream.format("cdcwatch_kafka")` available in this session."""
    spark.dataSource.register(KafkaDataSource)


def builtin_kafka_available(spark: Any) -> bool:
    """True when spark-sql-kafka is on the classpath, so `format("kafka")` works."""
    try:
        spark._jvm.java.lang.Class.forName("org.apache.spark.sql.kafka010.KafkaSourceProvider")
        return True
    except Exception:  # Py4JJavaError: ClassNotFoundException
        return False

