"""The kafka collector against noida-db, the Kafka-protocol broker of the local pipeline (Connect, Spark).

noida-db keeps message timestamps, so here lag in seconds is the exact `timestamp` method: the
producer sets each message's CreateTime, and the reported age must match it.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.conftest import value

pytestmark = pytest.mark.integration

TOPIC = "noidasrv.public.rows"
GROUP = "noida-apply"


def test_lag_in_seconds_from_broker_timestamps(noida, serve_factory) -> None:
    client = {"bootstrap.servers": noida.bootstrap, "log_level": "0"}
    admin = AdminClient(client)
    admin.create_topics([NewTopic(TOPIC, 2, 1, config={"retention.ms": "-1"})])[TOPIC].result(30)
    written_ms = int(time.time() * 1000) - 90_000  # ninety seconds ago
    producer = Producer(client)
    for index in range(8):
        producer.produce(TOPIC, partition=index % 2, value=b'{"op":"c","source":{"ts_ms":1}}',
                         timestamp=written_ms + index * 1000)
    assert producer.flush(10) == 0
    consumer = Consumer({**client, "group.id": GROUP, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, 1), TopicPartition(TOPIC, 1, 4)], asynchronous=False)
    consumer.close()

    serve = serve_factory(f"kafka:\n  - name: noida\n    bootstrap_servers: {noida.bootstrap}\n    timeout_seconds: 5\n")
    values = serve.scrape()
    assert value(values, "cdcwatch_up", collector="kafka", target="noida") == 1
    assert value(values, "cdcwatch_kafka_consumergroup_lag_messages", group=GROUP, partition="0") == 3
    assert value(values, "cdcwatch_kafka_consumergroup_lag_messages", group=GROUP, partition="1") == 0
    # partition 0 holds indexes 0, 2, 4, 6; the group's next message is offset 1: index 2
    seconds = value(values, "cdcwatch_kafka_consumergroup_lag_seconds", group=GROUP, partition="0", method="timestamp")
    assert seconds == pytest.approx(time.time() - (written_ms + 2000) / 1000, abs=3)
    assert value(values, "cdcwatch_kafka_consumergroup_lag_seconds", group=GROUP, partition="1") == 0
    assert value(values, "cdcwatch_kafka_consumergroup_state", group=GROUP, state="EMPTY") == 1


def test_topic_granularity_and_the_partition_cap(noida, serve_factory) -> None:
    """Depends on the group of the test above; per-topic sums only, and a cap that drops (and counts) the rest."""
    serve = serve_factory(f"kafka:\n  - name: capped\n    bootstrap_servers: {noida.bootstrap}\n"
                          f"    granularity: topic\n    max_partitions: 1\n    groups: {{allow: ['{GROUP}']}}\n")
    values = serve.scrape()
    assert value(values, "cdcwatch_up", collector="kafka", target="capped") == 1
    assert not [name for name, labels in values if name.startswith("cdcwatch_kafka") and
                any(label == "partition" for label, _ in labels)]
    assert value(values, "cdcwatch_kafka_log_end_offset", target="capped", topic=TOPIC) == 8
    # one group partition reported (partition 0: lag 3), the other dropped and counted
    assert value(values, "cdcwatch_kafka_consumergroup_topic_lag_messages", target="capped", group=GROUP) == 3
    assert value(values, "cdcwatch_kafka_series_dropped_total", target="capped") == 1
