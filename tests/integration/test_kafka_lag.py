"""The kafka collector against a real Apache Kafka 4 broker (KRaft), through `cdcwatch serve`.

Messages carry broker timestamps a minute apart (CreateTime set by the producer) or seconds apart
(LogAppendTime, set by the broker), and a Debezium payload whose own times are an hour off: reading
the message one offset off, or the payload's time instead of the broker's, misses the expected lag
by far more than the time the scrape itself took. Apache Kafka's own `kafka-consumer-groups
--describe` reads the same broker as an independent peer.

The retention runway is checked against the topic settings the test sets and the timestamps it
writes (ten minutes apart, so one message off misses by far more than a scrape takes); the margin to
the log start against the broker's own log start offset, while the broker's retention deletes
segments under a group that has not read them.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from cdcwatch.mixin import MixinConfig
from cdcwatch.mixin.generate import rules_yaml
from cdcwatch.promapi import PrometheusApi
from devstack.configs import exporter_config, kafka_cluster
from devstack.kafka import SCRAM_PASSWORD
from devstack.procs import wait_for
from devstack.prometheus import PrometheusServer
from tests.integration.conftest import promtool_check, value

pytestmark = pytest.mark.integration

SERVER = "lagsrv"
CREATED = f"{SERVER}.public.items"        # CreateTime, 3 partitions
APPENDED = f"{SERVER}.public.appended"    # LogAppendTime, 1 partition
PER_PARTITION = 6
SPACING_S = 60
T0_MS = int(time.time() * 1000) - 3_600_000  # the first message was written an hour ago
STATUS_CODES = ("OK", "WARN", "STALL", "STOP", "REWIND")
TOMBSTONED = f"{SERVER}.public.tombstoned"  # a delete event, then its tombstone
RETAINED = f"{SERVER}.public.retained"    # CreateTime, 2 partitions, a segment per message
RETENTION_S = 2 * 3600
RETENTION_BYTES = 1 << 30
AGES_MIN = {0: (100, 90, 80, 70, 60, 50), 1: (30, 20, 10)}
"""How old each message of RETAINED is when written, in minutes, per partition and offset."""
RUNWAY = "cdcwatch_kafka_consumergroup_topic_retention_runway_seconds"
USED = "cdcwatch_kafka_consumergroup_topic_retention_used_ratio"
MARGIN = "cdcwatch_kafka_consumergroup_topic_retention_margin_messages"
FAST = MixinConfig.model_validate({"durations": {"critical": "5s", "warning": "5s", "instant": "1s"}})


def created_ms(partition: int, index: int) -> int:
    return T0_MS + index * SPACING_S * 1000 + partition * 7000


def event(partition: int, index: int, written_ms: int) -> str:
    """A Debezium change whose own times are an hour before the broker's: they must not be used for lag."""
    return json.dumps({"op": "c", "ts_ms": written_ms - 3_600_000, "after": {"id": index},
                       "source": {"connector": "postgresql", "name": SERVER, "ts_ms": written_ms - 3_600_250,
                                  "db": "shop", "schema": "public", "table": "items", "lsn": 1000 * partition + index}})


def client(kafka) -> dict[str, str]:
    return {"bootstrap.servers": kafka.bootstrap, "log_level": "3"}


def commit(kafka, group: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = Consumer({**client(kafka), "group.id": group, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    consumer.close()


def kafka_config(kafka, name: str = "k4", **settings: Any) -> str:
    """Every per-partition series on (the defaults report the lag only), to check each against the broker."""
    return exporter_config(kafka=[kafka_cluster(name, kafka.bootstrap, timeout_seconds=5, committed_offsets=True,
                                                status={"window_samples": 3, "per_partition": True}, **settings)])


def status(values, group: str, topic: str, partition: int) -> str:
    code = value(values, "cdcwatch_kafka_consumergroup_status_code", group=group, topic=topic, partition=str(partition))
    assert code is not None
    return STATUS_CODES[int(code)]


@pytest.fixture(scope="module")
def topics(kafka) -> dict[int, int]:
    """Both topics written and the group `apply-job` committed; returns APPENDED's append times by offset."""
    kafka.create_topic(CREATED, 3, **{"retention.ms": "-1"})
    kafka.create_topic(APPENDED, 1, **{"message.timestamp.type": "LogAppendTime", "retention.ms": "-1"})
    producer = Producer(client(kafka))
    for partition in range(3):
        for index in range(PER_PARTITION):
            written = created_ms(partition, index)
            producer.produce(CREATED, partition=partition, key=json.dumps({"id": index}),
                             value=event(partition, index, written), timestamp=written)
    assert producer.flush(10) == 0
    appended: dict[int, int] = {}

    def delivered(error, message) -> None:
        assert error is None, error
        appended[message.offset()] = message.timestamp()[1]  # the broker's LogAppendTime

    for index in range(3):
        producer.produce(APPENDED, value=event(0, index, T0_MS), timestamp=T0_MS, on_delivery=delivered)
        assert producer.flush(10) == 0
        time.sleep(2.5)  # the effect under test: append times seconds apart
    assert sorted(appended) == [0, 1, 2] and all(t > T0_MS + 3_000_000 for t in appended.values())
    # partition 0 and APPENDED behind, partition 1 caught up, partition 2 never committed
    commit(kafka, "apply-job", {(CREATED, 0): 2, (CREATED, 1): PER_PARTITION, (APPENDED, 0): 1})
    return appended


def timed(serve):
    before = time.time()
    values = serve.scrape()
    return values, before, time.time()


def test_lag_in_offsets_and_seconds_from_both_timestamp_types_agrees_with_kafkas_own_tool(
        kafka, topics, serve_factory) -> None:
    serve = serve_factory(kafka_config(kafka))
    values, before, after = timed(serve)
    assert value(values, "cdcwatch_up", collector="kafka", target="k4") == 1
    lag = {p: value(values, "cdcwatch_kafka_consumergroup_lag_messages", group="apply-job", topic=CREATED,
                    partition=str(p)) for p in range(3)}
    assert lag == {0: PER_PARTITION - 2, 1: 0, 2: PER_PARTITION}  # partition 2: counted from the log start
    assert value(values, "cdcwatch_kafka_consumergroup_uncommitted_partitions", group="apply-job", topic=CREATED) == 1
    assert value(values, "cdcwatch_kafka_consumergroup_state", group="apply-job", state="EMPTY") == 1
    assert value(values, "cdcwatch_kafka_consumergroup_members", group="apply-job") == 0

    # CreateTime: the next message partition 0's group reads is offset 2
    seconds = value(values, "cdcwatch_kafka_consumergroup_lag_seconds", group="apply-job", topic=CREATED,
                    partition="0", method="timestamp")
    assert before - created_ms(0, 2) / 1000 <= seconds <= after - created_ms(0, 2) / 1000
    # LogAppendTime: the broker's append time of offset 1, not the producer's hour-old timestamp
    seconds = value(values, "cdcwatch_kafka_consumergroup_lag_seconds", group="apply-job", topic=APPENDED,
                    partition="0", method="timestamp")
    assert before - topics[1] / 1000 <= seconds <= after - topics[1] / 1000
    # caught up: zero, and said to be exact; never committed: the age of the log start's message, as the lag in
    # messages counts from there
    assert value(values, "cdcwatch_kafka_consumergroup_lag_seconds", group="apply-job", topic=CREATED,
                 partition="1", method="timestamp") == 0
    seconds = value(values, "cdcwatch_kafka_consumergroup_lag_seconds", group="apply-job", topic=CREATED,
                    partition="2", method="timestamp")
    assert before - created_ms(2, 0) / 1000 <= seconds <= after - created_ms(2, 0) / 1000
    for partition in range(3):  # the newest change's source commit time, from the event itself
        assert value(values, "cdcwatch_kafka_newest_source_commit_timestamp_seconds", topic=CREATED,
                     partition=str(partition), server=SERVER) == (created_ms(partition, PER_PARTITION - 1) - 3_600_250) / 1000

    peer = kafka.described_lag("apply-job")
    ours = {(dict(labels)["topic"], int(dict(labels)["partition"])) for name, labels in values
            if name == "cdcwatch_kafka_consumergroup_lag_messages" and dict(labels)["group"] == "apply-job"}
    # the tool lists what the group committed; cdcwatch also reports the partition it never committed
    assert set(peer) == {(CREATED, 0), (CREATED, 1), (APPENDED, 0)} and ours == set(peer) | {(CREATED, 2)}
    for (topic, partition), (committed, end, peer_lag) in peer.items():
        labels = {"group": "apply-job", "topic": topic, "partition": str(partition)}
        assert value(values, "cdcwatch_kafka_log_end_offset", topic=topic, partition=str(partition)) == end
        assert value(values, "cdcwatch_kafka_consumergroup_committed_offset", **labels) == committed
        if peer_lag is not None:
            assert value(values, "cdcwatch_kafka_consumergroup_lag_messages", **labels) == peer_lag
    for topic in (CREATED, APPENDED):  # what the defaults report of the commits: their sum per group and topic
        assert value(values, "cdcwatch_kafka_consumergroup_topic_committed_offset", group="apply-job", topic=topic) == \
            sum(committed for (where, _), (committed, _, _) in peer.items() if where == topic)
    promtool_check(serve.text())


def test_an_uncommitted_partition_lags_from_the_first_message_kept_in_messages_and_in_seconds(
        kafka, serve_factory) -> None:
    """Records deleted under the log start (DeleteRecords): both lags count from the first message the broker still
    keeps, not from offset 0; the partition the group committed keeps its own lag."""
    topic = f"{SERVER}.public.trimmed"
    kafka.create_topic(topic, 2, **{"retention.ms": "-1"})
    producer = Producer(client(kafka))
    for partition in range(2):
        for index in range(4):
            producer.produce(topic, partition=partition, value=event(partition, index, created_ms(partition, index)),
                             timestamp=created_ms(partition, index))
    assert producer.flush(10) == 0
    admin = kafka.admin()
    trimmed = TopicPartition(topic, 1, 2)
    admin.delete_records([trimmed])[trimmed].result(30)
    assert log_start(kafka, topic, 1) == 2
    commit(kafka, "trimmed-job", {(topic, 0): 3})
    serve = serve_factory(kafka_config(kafka, "trimmed", groups={"allow": ["trimmed-job"]}))
    values, before, after = timed(serve)
    where = {"group": "trimmed-job", "topic": topic}
    assert value(values, "cdcwatch_kafka_consumergroup_uncommitted_partitions", **where) == 1
    assert value(values, "cdcwatch_kafka_consumergroup_lag_messages", **where, partition="1") == 4 - 2
    seconds = value(values, "cdcwatch_kafka_consumergroup_lag_seconds", **where, partition="1", method="timestamp")
    assert before - created_ms(1, 2) / 1000 <= seconds <= after - created_ms(1, 2) / 1000
    seconds = value(values, "cdcwatch_kafka_consumergroup_lag_seconds", **where, partition="0", method="timestamp")
    assert before - created_ms(0, 3) / 1000 <= seconds <= after - created_ms(0, 3) / 1000


def test_a_steady_group_costs_no_fetch(kafka, topics, serve_factory) -> None:
    serve = serve_factory(kafka_config(kafka, "steady"))
    first = serve.scrape()
    fetched = value(first, "cdcwatch_kafka_message_reads_total", target="steady", source="broker")
    assert fetched and fetched > 0
    second = serve.scrape()
    assert value(second, "cdcwatch_kafka_message_reads_total", target="steady", source="broker") == fetched
    assert value(second, "cdcwatch_kafka_message_reads_total", target="steady", source="cache") >= fetched


def test_stop_and_rewind(kafka, serve_factory) -> None:
    topic = f"{SERVER}.public.rewound"
    kafka.create_topic(topic, 2)
    producer = Producer(client(kafka))
    for index in range(10):
        producer.produce(topic, partition=index % 2, value=event(0, index, created_ms(0, index)))
    assert producer.flush(10) == 0
    commit(kafka, "rewind-job", {(topic, 0): 2, (topic, 1): 5})
    serve = serve_factory(kafka_config(kafka, "rewind"))
    for _ in range(3):  # the window: no member, the offset does not move, lag > 0
        values = serve.scrape()
    assert status(values, "rewind-job", topic, 0) == "STOP"
    assert status(values, "rewind-job", topic, 1) == "OK"
    assert value(values, "cdcwatch_kafka_consumergroup_topic_status", group="rewind-job", topic=topic, status="STOP") == 1
    commit(kafka, "rewind-job", {(topic, 0): 2, (topic, 1): 1})  # a reset backwards
    values = serve.scrape()
    assert status(values, "rewind-job", topic, 1) == "REWIND"
    assert value(values, "cdcwatch_kafka_consumergroup_lag_messages", group="rewind-job", topic=topic, partition="1") == 4


def test_a_connected_consumer_that_does_not_commit_is_stalled(kafka, serve_factory) -> None:
    topic = f"{SERVER}.public.stalled"
    kafka.create_topic(topic, 1)
    producer = Producer(client(kafka))
    produce = lambda index: producer.produce(topic, value=event(0, index, created_ms(0, index)))  # noqa: E731
    for index in range(3):
        produce(index)
    assert producer.flush(10) == 0
    commit(kafka, "stalled-job", {(topic, 0): 1})
    stop = threading.Event()
    member = Consumer({**client(kafka), "group.id": "stalled-job", "enable.auto.commit": False})
    member.subscribe([topic])

    def poll() -> None:
        while not stop.is_set():
            member.poll(0.2)  # stays in the group, never commits

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    serve = serve_factory(kafka_config(kafka, "stall"))
    try:
        wait_for(lambda: value(serve.scrape(), "cdcwatch_kafka_consumergroup_members", group="stalled-job") == 1, 60,
                 "the member to join")
        statuses = []
        for index in range(3, 7):
            produce(index)
            assert producer.flush(10) == 0
            statuses.append(status(serve.scrape(), "stalled-job", topic, 0))
        assert statuses[-1] == "STALL", statuses
    finally:
        stop.set()
        poller.join(5)
        member.close()


def test_group_and_topic_filters_and_topic_servers(kafka, topics, serve_factory) -> None:
    commit(kafka, "other-job", {(CREATED, 0): 1})
    serve = serve_factory(kafka_config(kafka, "filtered", groups={"allow": [".*-job"], "deny": ["other-.*"]},
                                       topics={"deny": [".*appended"]}, topic_servers={r"lagsrv\.public\..*": "renamed"}))
    values = serve.scrape()
    groups = {dict(labels).get("group") for name, labels in values if name.startswith("cdcwatch_kafka_consumergroup")}
    assert "apply-job" in groups and "other-job" not in groups
    topics_seen = {dict(labels).get("topic") for name, labels in values if name.startswith("cdcwatch_kafka_")}
    assert CREATED in topics_seen and APPENDED not in topics_seen
    assert value(values, "cdcwatch_kafka_consumergroup_topic_lag_messages", target="filtered", group="apply-job",
                 topic=CREATED, server="renamed") == 2 * PER_PARTITION - 2


def test_a_tombstone_newest_still_gives_the_topics_server_and_newest_commit_time(kafka, serve_factory) -> None:
    """A delete's tombstone (no value, no source) is the newest message: its delete event, just before it, names the
    server and holds the newest commit time, from the first scrape of a collector that never saw the topic."""
    kafka.create_topic(TOMBSTONED, 1, **{"retention.ms": "-1"})
    producer = Producer(client(kafka))
    deleted = json.loads(event(0, 1, T0_MS))
    deleted.update(op="d", before=deleted.pop("after"), after=None)
    producer.produce(TOMBSTONED, key=json.dumps({"id": 1}), value=json.dumps(deleted), timestamp=T0_MS)
    producer.produce(TOMBSTONED, key=json.dumps({"id": 1}), value=None, timestamp=T0_MS)
    assert producer.flush(10) == 0
    values = serve_factory(kafka_config(kafka, "tombstoned", topics={"allow": [TOMBSTONED]})).scrape()
    assert value(values, "cdcwatch_kafka_topic_partitions", target="tombstoned", topic=TOMBSTONED, server=SERVER) == 1
    assert value(values, "cdcwatch_kafka_newest_source_commit_timestamp_seconds", target="tombstoned", topic=TOMBSTONED,
                 partition="0", server=SERVER) == deleted["source"]["ts_ms"] / 1000


def test_topic_granularity_and_the_partition_cap(kafka, topics, serve_factory) -> None:
    capped = serve_factory(kafka_config(kafka, "capped", granularity="topic", max_partitions=1,
                                        groups={"allow": ["apply-job"]}, topics={"allow": [CREATED]}))
    values = capped.scrape()
    assert not [name for name, labels in values if name.startswith("cdcwatch_kafka") and dict(labels).get("partition")]
    assert value(values, "cdcwatch_kafka_log_end_offset", target="capped", topic=CREATED) == 3 * PER_PARTITION
    # one group partition reported (partition 0: lag 4), the other two dropped and counted
    assert value(values, "cdcwatch_kafka_consumergroup_topic_lag_messages", target="capped", group="apply-job") == 4
    assert value(values, "cdcwatch_kafka_series_dropped_total", target="capped") == 2


def log_start(kafka, topic: str, partition: int) -> int:
    """The broker's own log start offset of a partition."""
    consumer = Consumer({**client(kafka), "group.id": "test-watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[0]
    finally:
        consumer.close()


def set_retention_ms(kafka, topic: str, ms: int) -> None:
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("retention.ms", str(ms), incremental_operation=AlterConfigOpType.SET)])
    admin = kafka.admin()
    admin.incremental_alter_configs([resource])[resource].result(30)


def bracketed_scrape(serve, ready):
    """A scrape that satisfies `ready`, and the times just before and after it."""
    before = time.time()
    values = serve.scrape()
    return (values, before, time.time()) if ready(values) else None


def test_retention_runway_and_margin_agree_with_the_topic_config_and_the_brokers_log_start(
        kafka, topics, serve_factory, stack_dir) -> None:
    kafka.create_topic(RETAINED, 2, **{"retention.ms": str(RETENTION_S * 1000), "retention.bytes": str(RETENTION_BYTES),
                                       "segment.ms": "60000"})
    base = time.time()
    written: dict[tuple[int, int], float] = {}
    producer = Producer(client(kafka))
    for partition, ages in AGES_MIN.items():
        for offset, age in enumerate(ages):
            stamp = int((base - age * 60) * 1000)
            producer.produce(RETAINED, partition=partition, value=event(partition, offset, stamp), timestamp=stamp)
            # one append per message, ten minutes of timestamps after the last: each rolls a segment (segment.ms 1 min)
            assert producer.flush(10) == 0
            written[(partition, offset)] = stamp / 1000
    # partition 0: 80 minutes behind, past half of the 2 hours; partition 1 caught up. Another group caught up on both.
    commit(kafka, "retention-job", {(RETAINED, 0): 2, (RETAINED, 1): 3})
    commit(kafka, "retention-caught-up-job", {(RETAINED, 0): 6, (RETAINED, 1): 3})
    groups = {"retention_refresh_seconds": 1, "groups": {"allow": ["retention-.*", "apply-job"]}}
    serve = serve_factory(kafka_config(kafka, "retention", **groups))
    behind = {"group": "retention-job", "topic": RETAINED}

    caught_up = {"group": "retention-caught-up-job", "topic": RETAINED}

    def margin_at_the_broker(committed: dict[int, int]) -> int:
        """The smallest committed offset minus log start offset of the partitions, as the broker reports them."""
        return min(offset - log_start(kafka, RETAINED, partition) for partition, offset in committed.items())

    def check_runway(values, before: float, after: float, retention_s: float) -> None:
        """retention.ms minus the age of offset 2 of partition 0 (the partition closer to deletion), its share of
        retention.ms, within the time the scrape took."""
        runway, used = value(values, RUNWAY, **behind), value(values, USED, **behind)
        assert retention_s - (after - written[(0, 2)]) <= runway <= retention_s - (before - written[(0, 2)]), runway
        assert (before - written[(0, 2)]) / retention_s <= used <= (after - written[(0, 2)]) / retention_s, used

    # the same per group and topic at either granularity: from the partition closest to losing data
    for serve_of in (serve, serve_factory(kafka_config(kafka, "retention-topic", **groups, granularity="topic"))):
        values, before, after = wait_for(lambda s=serve_of: bracketed_scrape(s, lambda v: value(v, RUNWAY, **behind)),
                                         30, "the topic's retention settings to be read")
        assert value(values, "cdcwatch_kafka_topic_retention_seconds", topic=RETAINED) == RETENTION_S
        assert value(values, "cdcwatch_kafka_topic_retention_bytes", topic=RETAINED) == RETENTION_BYTES
        check_runway(values, before, after, RETENTION_S)
        assert value(values, RUNWAY, **caught_up) == RETENTION_S  # caught up: all of retention.ms left
        assert value(values, USED, **caught_up) == 0
        assert value(values, MARGIN, **behind) == margin_at_the_broker({0: 2, 1: 3}) == 2
        assert value(values, MARGIN, **caught_up) == margin_at_the_broker({0: 6, 1: 3}) == 3
        # a topic that keeps everything (retention.ms -1) has no retention and no runway
        assert value(values, "cdcwatch_kafka_topic_retention_seconds", topic=CREATED) is None
        assert not [n for n, ls in values if n in (RUNWAY, USED) and dict(ls)["topic"] == CREATED]
        assert value(values, MARGIN, group="apply-job", topic=CREATED) == 2  # the uncommitted partition counts not

    # the generated rules on a real Prometheus: the group 40 minutes from deletion pages, before anything is lost;
    # the caught-up group on a topic that keeps less than the warning threshold stays quiet
    rules = stack_dir / "retention-rules.yml"
    rules.write_text(rules_yaml(FAST), encoding="utf-8")
    prometheus = PrometheusServer(stack_dir / "retention-prometheus", {"cdcwatch": [f"127.0.0.1:{serve.port}"]}, [rules])
    prometheus.start()
    try:
        api = PrometheusApi(prometheus.url)

        def firing(alert: str) -> set[str]:
            return {a["metric"]["group"] for a in api.query(
                f'ALERTS{{alertname="{alert}", alertstate="firing", topic="{RETAINED}"}}')}

        wait_for(lambda: firing("CdcKafkaRetentionRunwayCritical") == {"retention-job"}, 60, "the critical runway alert")
        wait_for(lambda: firing("CdcKafkaRetentionRunwayShort") == {"retention-job"}, 30, "the runway warning")
        assert log_start(kafka, RETAINED, 0) == 0, "the alerts fire before anything is deleted"
    finally:
        prometheus.stop()

    # retention shortened to 85 minutes: the broker deletes the segments of offsets 0 and 1 (100 and 90 minutes old)
    set_retention_ms(kafka, RETAINED, 85 * 60 * 1000)
    wait_for(lambda: log_start(kafka, RETAINED, 0) == 2, 60, "retention to delete the two oldest segments")
    values, before, after = wait_for(lambda: bracketed_scrape(
        serve, lambda v: value(v, "cdcwatch_kafka_topic_retention_seconds", topic=RETAINED) == 85 * 60), 30,
        "the new retention.ms to be read")
    assert value(values, MARGIN, **behind) == margin_at_the_broker({0: 2, 1: 3}) == 0  # the next deletion loses data
    check_runway(values, before, after, 85 * 60)

    # 75 minutes: offset 2, the next one the group would read, is deleted unread
    set_retention_ms(kafka, RETAINED, 75 * 60 * 1000)
    wait_for(lambda: log_start(kafka, RETAINED, 0) == 3, 60, "retention to delete the segment of offset 2")
    values, before, after = wait_for(lambda: bracketed_scrape(
        serve, lambda v: value(v, "cdcwatch_kafka_topic_retention_seconds", topic=RETAINED) == 75 * 60), 30,
        "the new retention.ms to be read")
    assert value(values, MARGIN, **behind) == margin_at_the_broker({0: 2, 1: 3}) == -1
    check_runway(values, before, after, 75 * 60)
    assert value(values, RUNWAY, **behind) < 0 and value(values, USED, **behind) > 1  # overdue
    promtool_check(serve.text())


def test_a_topic_deleted_under_a_group_leaves_no_series_and_no_error(kafka, serve_factory) -> None:
    topic = f"{SERVER}.public.deleted"
    kafka.create_topic(topic, 1)
    producer = Producer(client(kafka))
    producer.produce(topic, value=event(0, 0, created_ms(0, 0)))
    assert producer.flush(10) == 0
    commit(kafka, "deleted-job", {(topic, 0): 0})
    serve = serve_factory(kafka_config(kafka, "deleting"))
    assert value(serve.scrape(), "cdcwatch_kafka_consumergroup_lag_messages", group="deleted-job", topic=topic) == 1
    admin = kafka.admin()
    admin.delete_topics([topic])[topic].result(30)
    values = wait_for(lambda: (v := serve.scrape()) and not [n for n, ls in v if dict(ls).get("topic") == topic] and v,
                      30, "the deleted topic's series to go")
    assert value(values, "cdcwatch_up", collector="kafka", target="deleting") == 1


def secure_config(kafka) -> str:
    """The SASL_SSL listener, every client setting passed through, the password from $KAFKA_PASSWORD."""
    settings = kafka.secure_client_settings()
    return exporter_config(kafka=[kafka_cluster("secure", kafka.secure_bootstrap, timeout_seconds=5,
                                                client={**settings, "sasl.password": "${KAFKA_PASSWORD}"})])


def test_sasl_scram_over_tls_through_the_client_passthrough(kafka, topics, serve_factory, monkeypatch) -> None:
    monkeypatch.setenv("KAFKA_PASSWORD", SCRAM_PASSWORD)
    values = serve_factory(secure_config(kafka)).scrape()
    assert value(values, "cdcwatch_up", collector="kafka", target="secure") == 1
    assert value(values, "cdcwatch_kafka_consumergroup_lag_messages", group="apply-job", topic=CREATED, partition="0") == 4


def test_a_wrong_sasl_password_is_up_0_within_the_deadline_naming_the_failure(kafka, serve_factory, monkeypatch) -> None:
    monkeypatch.setenv("KAFKA_PASSWORD", "not-the-password")
    bad = serve_factory(secure_config(kafka))
    values, took = bad.timed_scrape()
    assert value(values, "cdcwatch_up", collector="kafka", target="secure") == 0
    assert took < 5 * 1.5, "the scrape must end within the collector's deadline"
    wait_for(lambda: "Authentication failed" in bad.log.read_text(), 10, "the log to name the authentication failure")
    assert "not-the-password" not in bad.log.read_text() and "not-the-password" not in bad.text()


def test_broker_down_is_up_0_within_the_deadline_and_recovers(kafka, topics, serve_factory) -> None:
    serve = serve_factory(kafka_config(kafka, "restarted"))
    assert value(serve.scrape(), "cdcwatch_up", collector="kafka", target="restarted") == 1
    kafka.stop()
    try:
        values, took = serve.timed_scrape()
        assert value(values, "cdcwatch_up", collector="kafka", target="restarted") == 0
        assert took < 5 * 1.5, "the scrape must end within the collector's deadline"
        assert value(values, "cdcwatch_scrape_errors_total", collector="kafka", target="restarted") >= 1
    finally:
        kafka.start()
    # the restarted broker loads its committed offsets again: wait for them, not just for up
    wait_for(lambda: value(serve.scrape(), "cdcwatch_kafka_consumergroup_lag_messages", group="apply-job", topic=CREATED,
                           partition="0") == PER_PARTITION - 2, 60, f"cdcwatch to read the restarted broker ({serve.log})")
    assert value(serve.scrape(), "cdcwatch_up", collector="kafka", target="restarted") == 1
