"""cdcwatch's Spark Kafka source against a real Kafka-protocol broker (noida-db): offsets, limits,
and records deleted before the query read them (DeleteRecords) → DataLossError, or counted."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql.streaming.datasource import ReadMaxRows

from cdcwatch.spark.kafka_source import DataLossError, KafkaDataSource, OffsetRange, read_range

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def topic(noida):
    name = "source-test"
    from confluent_kafka.admin import NewTopic

    admin = AdminClient({"bootstrap.servers": noida.bootstrap})
    for future in admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": noida.bootstrap})
    for partition in (0, 1):
        for i in range(10):
            producer.produce(name, key=b"k%d" % i, value=b"v%d-%d" % (partition, i), partition=partition)
    producer.flush(10)
    return name


def reader(noida, **options: str):
    source = KafkaDataSource({"kafka.bootstrap.servers": noida.bootstrap, "subscribePattern": "source-.*", **options})
    return source.streamReader(source.schema())


def test_offsets_partitions_and_read_limits(noida, topic) -> None:
    stream = reader(noida, maxOffsetsPerTrigger="6")
    start = stream.initialOffset()
    assert start == {topic: {"0": 0, "1": 0}}
    assert stream.reportLatestOffset() == {topic: {"0": 10, "1": 10}}
    limited = stream.latestOffset(start, ReadMaxRows(6))
    assert sum(limited[topic].values()) == 6
    ranges = stream.partitions(start, limited)
    rows = [row for offsets in ranges for row in stream.read(offsets)]
    assert len(rows) == 6 and all(row[6] == 0 for row in rows)
    assert sorted(row[4] for row in rows if row[3] == 0) == list(range(limited[topic]["0"]))
    stream.stop()


def test_records_deleted_before_they_were_read_fail_or_are_counted(noida, topic) -> None:
    admin = AdminClient({"bootstrap.servers": noida.bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 1, 4)], request_timeout=10).values():
        future.result()
    settings = {"bootstrap.servers": noida.bootstrap}
    with pytest.raises(DataLossError, match=r"offsets 0\.\.3 are gone"):
        list(read_range(settings, OffsetRange(topic, 1, 0, 10), fail_on_data_loss=True))
    rows = list(read_range(settings, OffsetRange(topic, 1, 0, 10), fail_on_data_loss=False))
    assert rows[0][6] == 4 and rows[0][1] is None  # one marker row for the 4 lost offsets
    assert [row[4] for row in rows[1:]] == list(range(4, 10))
