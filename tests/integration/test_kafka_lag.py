"""The kafka collector against a real Apache Kafka 0.9.0.1 broker, through `cdcwatch serve`.

Known Debezium-shaped messages (known payload and source times) and known commits give exact
expected lag per partition; status transitions are driven by real commits and a live member;
Burrow, reading the same broker, must agree on the lag; the broker is stopped and restarted.
Kafka 0.9 keeps no message timestamps, so lag in seconds comes from the events' payload.ts_ms.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from cdcwatch.stack.burrow import BurrowServer
from cdcwatch.stack.kafka import CLIENT_SETTINGS
from cdcwatch.stack.procs import wait_for
from tests.integration.conftest import promtool_check, value

pytestmark = pytest.mark.integration

TOPIC = "lagsrv.public.items"
SERVER = "lagsrv"
PER_PARTITION = 10
T0_MS = int(time.time() * 1000) - 600_000  # the first message was emitted ten minutes ago


def emitted_ms(partition: int, index: int) -> int:
    return T0_MS + partition * 100_000 + index * 1000


def source_ms(partition: int, index: int) -> int:
    return emitted_ms(partition, index) - 250


def settings(kafka) -> dict[str, str]:
    return {"bootstrap.servers": kafka.bootstrap, "log_level": "3", **CLIENT_SETTINGS}


def produce(kafka, topic: str, partition: int, indexes: range) -> None:
    producer = Producer(settings(kafka))
    for index in indexes:
        producer.produce(topic, partition=partition, key=json.dumps({"id": index}), value=json.dumps({
            "op": "c", "ts_ms": emitted_ms(partition, index), "after": {"id": index},
            "source": {"connector": "postgresql", "name": SERVER, "ts_ms": source_ms(partition, index),
                       "db": "shop", "schema": "public", "table": "items", "lsn": 1000 * partition + index}}))
    assert producer.flush(10) == 0


def commit(kafka, group: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = Consumer({**settings(kafka), "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    consumer.close()


def kafka_config(kafka, groups: list[str]) -> str:
    return (f"kafka:\n  - name: k09\n    bootstrap_servers: {kafka.bootstrap}\n    timeout_seconds: 5\n"
            f"    client: {{api.version.request: 'false', broker.version.fallback: 0.9.0.1}}\n"
            f"    extra_groups: {json.dumps(groups)}\n    status: {{window_samples: 3}}\n")


STATUS_CODES = ("OK", "WARN", "STALL", "STOP", "REWIND")


def status(values, group: str, topic: str, partition: int) -> str:
    code = value(values, "cdcwatch_kafka_consumergroup_status_code", group=group, topic=topic, partition=str(partition))
    assert code is not None
    return STATUS_CODES[int(code)]


@pytest.fixture(scope="module")
def lag_topic(kafka09):
    kafka09.create_topic(TOPIC, 3)
    for partition in range(3):
        produce(kafka09, TOPIC, partition, range(PER_PARTITION))
    commit(kafka09, "apply-job", {(TOPIC, 0): 4, (TOPIC, 1): PER_PARTITION})  # partition 2: never committed
    return TOPIC


def test_lag_in_offsets_seconds_freshness_and_status(kafka09, lag_topic, serve_factory, tmp_path) -> None:
    burrow = BurrowServer(tmp_path / "burrow", kafka09.bootstrap, kafka09.zookeeper)
    burrow.start()
    serve = serve_factory(kafka_config(kafka09, ["apply-job"]))
    try:
        values = serve.scrape()
        assert value(values, "cdcwatch_up", collector="kafka", target="k09") == 1
        lag = {p: value(values, "cdcwatch_kafka_consumergroup_lag_messages", group="apply-job", partition=str(p))
               for p in range(3)}
        assert lag == {0: 6, 1: 0, 2: PER_PARTITION}  # partition 2 has no commit: counted from log start
        assert value(values, "cdcwatch_kafka_consumergroup_uncommitted_partitions", group="apply-job", topic=TOPIC) == 1
        assert value(values, "cdcwatch_kafka_consumergroup_topic_lag_messages", group="apply-job", topic=TOPIC,
                     server=SERVER) == 6 + PER_PARTITION
        assert value(values, "cdcwatch_kafka_consumergroup_committed_offset", group="apply-job", partition="0") == 4
        assert value(values, "cdcwatch_kafka_log_end_offset", topic=TOPIC, partition="2") == PER_PARTITION

        # the next message partition 0's group will read is index 4: its age, from payload.ts_ms (0.9 has no timestamps)
        seconds = value(values, "cdcwatch_kafka_consumergroup_lag_seconds", group="apply-job", partition="0",
                        method="payload")
        assert seconds == pytest.approx(time.time() - emitted_ms(0, 4) / 1000, abs=3)
        assert value(values, "cdcwatch_kafka_consumergroup_lag_seconds", group="apply-job", partition="1") == 0
        for partition in range(3):
            assert value(values, "cdcwatch_kafka_newest_source_commit_timestamp_seconds", topic=TOPIC,
                         partition=str(partition), server=SERVER) == pytest.approx(
                             source_ms(partition, PER_PARTITION - 1) / 1000, abs=1e-3)

        # an independent peer on the same broker agrees on every committed partition
        expected = {(TOPIC, 0): 6, (TOPIC, 1): 0}
        wait_for(lambda: {k: v for k, v in burrow.lag("apply-job").items() if k in expected} == expected, 60,
                 "Burrow to report the group's lag")

        # no member, offsets not moving, lag > 0: STOP once the window is full; caught up stays OK
        for _ in range(2):
            values = serve.scrape()
        assert status(values, "apply-job", TOPIC, 0) == "STOP"
        assert status(values, "apply-job", TOPIC, 1) == "OK"
        assert value(values, "cdcwatch_kafka_consumergroup_topic_status", group="apply-job", topic=TOPIC, status="STOP") == 1

        # offsets reset backwards: REWIND
        commit(kafka09, "apply-job", {(TOPIC, 0): 4, (TOPIC, 1): 5})
        values = serve.scrape()
        assert status(values, "apply-job", TOPIC, 1) == "REWIND"
        assert value(values, "cdcwatch_kafka_consumergroup_lag_messages", group="apply-job", partition="1") == 5
    finally:
        burrow.stop()


def test_a_connected_consumer_that_does_not_commit_is_stalled(kafka09, serve_factory) -> None:
    topic = "lagsrv.public.stalled"
    kafka09.create_topic(topic, 1)
    produce(kafka09, topic, 0, range(3))
    commit(kafka09, "stalled-job", {(topic, 0): 1})
    stop = threading.Event()
    member = Consumer({**settings(kafka09), "group.id": "stalled-job", "enable.auto.commit": False,
                       "session.timeout.ms": 30000})
    member.subscribe([topic])

    def poll() -> None:
        while not stop.is_set():
            member.poll(0.2)  # stays in the group, never commits

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    serve = serve_factory(kafka_config(kafka09, ["stalled-job"]))
    try:
        wait_for(lambda: value(serve.scrape(), "cdcwatch_kafka_consumergroup_members", group="stalled-job") == 1, 60,
                 "the member to join")
        statuses = []
        for index in range(3, 7):
            produce(kafka09, topic, 0, range(index, index + 1))
            statuses.append(status(serve.scrape(), "stalled-job", topic, 0))
        assert statuses[-1] == "STALL", statuses
    finally:
        stop.set()
        poller.join(5)
        member.close()


def test_broker_down_is_up_0_within_the_deadline_and_recovers(kafka09, lag_topic, serve_factory, tmp_path) -> None:
    serve = serve_factory(kafka_config(kafka09, ["apply-job"]))
    assert value(serve.scrape(), "cdcwatch_up", collector="kafka", target="k09") == 1
    kafka09.stop_broker()
    try:
        values, took = serve.timed_scrape()
        assert value(values, "cdcwatch_up", collector="kafka", target="k09") == 0
        assert took < 5 + 1.5
        assert value(values, "cdcwatch_scrape_errors_total", collector="kafka", target="k09") >= 1
    finally:
        kafka09.start_broker()
    # the restarted broker loads its committed offsets again: wait for them, not just for up
    wait_for(lambda: value(serve.scrape(), "cdcwatch_kafka_consumergroup_lag_messages", group="apply-job",
                           partition="0") == 6, 60, f"cdcwatch to read the restarted broker (log: {serve.log})")
    assert value(serve.scrape(), "cdcwatch_up", collector="kafka", target="k09") == 1

    promtool_check(serve.text())
