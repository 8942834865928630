"""Latency by stage on the real apply job: `cdcwatch-apply` (Spark's Kafka source, listener attached) reading
Apache Kafka 4, its histograms checked against what the test knows without the listener:

- capture: the test writes Debezium events whose source.ts_ms and payload.ts_ms it chose, so every
  change's bucket is known exactly (gaps of exactly 250 ms, 1 s and 60 s included, and a negative one
  that must count as clock skew);
- produce: on a CreateTime topic the record timestamps are the ones the test set; on a LogAppendTime
  topic they are the broker's, read back from the broker by the test (the producer's own timestamp there
  is a day off, so reading it would show);
- queue and apply: between what the test did and when it saw the batch in the metrics (the batch starts
  after the records were appended, and ends before its progress was scraped).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from devstack.procs import wait_for
from devstack.spark import ApplyJob
from spark_listeners.latency import STAGE_LATENCY_BUCKETS
from tests.change_events import change_event
from tests.integration.conftest import parse, promtool_check, total, value

pytestmark = pytest.mark.integration

SERVER = "lat"
CREATED = f"{SERVER}.public.created"    # CreateTime: the producer's timestamp
APPENDED = f"{SERVER}.public.appended"  # LogAppendTime: the broker's
QUERY = "lat_apply"
QUEUED_MS = 35_000  # the CreateTime records' timestamps are this far before the test sends them

# per record: (source commit → connector, connector → Kafka timestamp) in ms
CREATED_GAPS = [(250, 12), (7, 300), (1000, 2500), (45_000, 60_000), (-2000, -700)]
# per record: (source commit → connector, connector → the test's send); the broker's append comes after the send
APPENDED_GAPS = [(60_000, 0), (30, 40), (700_000, 900), (3, 20_000)]


@pytest.fixture(scope="module")
def job(postgres, kafka, stack_dir):
    postgres.sql("DROP DATABASE IF EXISTS lat_target")
    postgres.sql("CREATE DATABASE lat_target")
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    topics = [NewTopic(CREATED, 1, 1), NewTopic(APPENDED, 1, 1, config={"message.timestamp.type": "LogAppendTime"})]
    for future in admin.create_topics(topics).values():
        future.result(30)
    job = ApplyJob(stack_dir / "lat-apply", kafka.bootstrap, rf"{SERVER}\..*",
                   f"host=127.0.0.1 port={postgres.port} user=postgres dbname=lat_target", query_name=QUERY)
    job.start()
    yield job
    job.stop()


def histogram(values: dict, stage: str, timestamp_type: str = "") -> dict[str, float]:
    """Bucket counts by bound (and +Inf), sum, count and clock-skew count of one stage's series."""
    labels = {"query": QUERY, "server": SERVER, "stage": stage, "timestamp_type": timestamp_type}
    found = {le: value(values, "cdcwatch_spark_stage_latency_seconds_bucket", **labels, le=le) or 0.0
             for le in [str(b) for b in STAGE_LATENCY_BUCKETS] + ["+Inf"]}
    for part in ("sum", "count"):
        found[part] = value(values, f"cdcwatch_spark_stage_latency_seconds_{part}", **labels) or 0.0
    found["skew"] = value(values, "cdcwatch_spark_clock_skew_changes_total", **labels) or 0.0
    return found


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {key: after[key] - before[key] for key in after}


def expected(latencies_ms: list[int]) -> dict[str, float]:
    """What the listener must add for these latencies: whole ms compared exactly, a negative one as 0 and skew."""
    found: dict[str, float] = {str(b): float(sum(1 for ms in latencies_ms if max(ms, 0) <= round(b * 1000)))
                               for b in STAGE_LATENCY_BUCKETS}
    found["+Inf"] = found["count"] = float(len(latencies_ms))
    found["sum"] = sum(max(ms, 0) for ms in latencies_ms) / 1000
    found["skew"] = float(sum(1 for ms in latencies_ms if ms < 0))
    return found


def assert_histogram(got: dict[str, float], wanted: dict[str, float], what: str) -> None:
    assert got["sum"] == pytest.approx(wanted["sum"], abs=1e-6), what
    assert {k: v for k, v in got.items() if k != "sum"} == {k: v for k, v in wanted.items() if k != "sum"}, what


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{time.time()}"})
    end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    consumer.close()
    return int(end)


def broker_timestamps(bootstrap: str, topic: str, start: int, count: int) -> dict[bytes, tuple[int, int]]:
    """Key → (timestamp type, timestamp in ms) of `count` records of `topic` from offset `start`, as the broker has them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{time.time()}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, start)])
    found: dict[bytes, tuple[int, int]] = {}
    deadline = time.monotonic() + 30
    while len(found) < count and time.monotonic() < deadline:
        record = consumer.poll(1)
        if record is not None and not record.error():
            found[record.key()] = record.timestamp()
    consumer.close()
    assert len(found) == count, f"read back {len(found)} of {count} records"
    return found


def test_stage_histograms_match_the_timestamps_the_test_set_and_the_broker_wrote(job, kafka) -> None:
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0})
    now_ms = int(time.time() * 1000)
    key, record = change_event(SERVER, "created", 0, now_ms - 5, now_ms, 1000)
    producer.produce(CREATED, key=key, value=record, timestamp=now_ms)
    producer.flush(10)
    before = wait_for(lambda: (v := parse(job.metrics())) and histogram(v, "apply")["count"] >= 1 and v, 240,
                      "the warm-up change through the job", interval=0.5)
    starts = {topic: end_offset(kafka.bootstrap, topic) for topic in (CREATED, APPENDED)}

    sent = time.time()
    sent_ms = int(sent * 1000)
    queued_ms = sent_ms - QUEUED_MS
    emitted: dict[bytes, int] = {}
    for row_id, (capture, produce) in enumerate(CREATED_GAPS, start=1):
        key, record = change_event(SERVER, "created", row_id, queued_ms - produce - capture, queued_ms - produce, 1000 + row_id)
        emitted[key] = queued_ms - produce
        producer.produce(CREATED, key=key, value=record, timestamp=queued_ms)
    for row_id, (capture, produce) in enumerate(APPENDED_GAPS, start=100):
        key, record = change_event(SERVER, "appended", row_id, sent_ms - produce - capture, sent_ms - produce, 1000 + row_id)
        emitted[key] = sent_ms - produce
        producer.produce(APPENDED, key=key, value=record, timestamp=sent_ms - 86_400_000)  # the broker overwrites it
    producer.flush(10)
    created = broker_timestamps(kafka.bootstrap, CREATED, starts[CREATED], len(CREATED_GAPS))
    assert set(created.values()) == {(TIMESTAMP_CREATE_TIME, queued_ms)}
    appended = broker_timestamps(kafka.bootstrap, APPENDED, starts[APPENDED], len(APPENDED_GAPS))
    assert {kind for kind, _ in appended.values()} == {TIMESTAMP_LOG_APPEND_TIME}
    assert all(sent_ms <= stamp <= time.time() * 1000 for _, stamp in appended.values())

    changes = len(CREATED_GAPS) + len(APPENDED_GAPS)
    after = wait_for(lambda: (v := parse(job.metrics())) and
                     histogram(v, "apply")["count"] >= histogram(before, "apply")["count"] + changes and v,
                     120, f"{changes} changes through the job", interval=0.2)
    seen = time.time()
    print(f"\nsent → seen in the metrics: {seen - sent:.2f} s")

    # capture and produce: exactly what the test wrote, and what the broker appended at
    assert_histogram(delta(histogram(after, "capture"), histogram(before, "capture")),
                     expected([capture for capture, _ in CREATED_GAPS + APPENDED_GAPS]), "capture")
    assert_histogram(delta(histogram(after, "produce", "create_time"), histogram(before, "produce", "create_time")),
                     expected([created[key][1] - emitted[key] for key in created]), "produce, CreateTime")
    assert_histogram(histogram(after, "produce", "log_append_time"),  # the topic's only records
                     expected([appended[key][1] - emitted[key] for key in appended]), "produce, LogAppendTime")

    # queue: from the record's timestamp to the start of a batch that began after the records were appended
    assert seen - sent < (60_000 - QUEUED_MS) / 1000, "the batch came too late to tell its bucket"
    queue = delta(histogram(after, "queue", "create_time"), histogram(before, "queue", "create_time"))
    assert (queue["30.0"], queue["60.0"], queue["count"], queue["skew"]) == (0, len(CREATED_GAPS), len(CREATED_GAPS), 0)
    assert len(CREATED_GAPS) * QUEUED_MS / 1000 <= queue["sum"] <= len(CREATED_GAPS) * (seen - queued_ms / 1000)
    queue = histogram(after, "queue", "log_append_time")
    assert queue["count"] == len(APPENDED_GAPS) and queue["skew"] == 0
    assert 0 <= queue["sum"] <= sum(seen - stamp / 1000 for _, stamp in appended.values())

    # apply: every change, from its batch's start to its end, all between the send and the scrape
    apply = delta(histogram(after, "apply"), histogram(before, "apply"))
    assert apply["count"] == changes and apply["skew"] == 0
    assert 0 < apply["sum"] <= changes * (seen - sent)
    durations = {part: (value(after, f"cdcwatch_spark_batch_duration_seconds_{part}", query=QUERY) or 0)
                 - (value(before, f"cdcwatch_spark_batch_duration_seconds_{part}", query=QUERY) or 0)
                 for part in ("sum", "count")}
    assert durations["count"] >= 1 and apply["sum"] <= changes * durations["sum"], "apply outlasts the batches that ran"
    promtool_check(job.metrics())


def test_re_deliveries_stay_out_of_the_stage_histograms(job, kafka) -> None:
    """A connector restart's re-deliveries (the same changes again, an hour old by now) and one new change: the
    reference sink takes only the new one as new and reports its stages, so the histograms count it alone."""
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0})
    start = histogram(parse(job.metrics()), "apply")["count"]
    now_ms = int(time.time() * 1000)
    old = [change_event(SERVER, "created", 200 + i, now_ms - 3_600_000, now_ms - 3_599_000, 2000 + i) for i in range(3)]
    for key, record in old:
        producer.produce(CREATED, key=key, value=record, timestamp=now_ms)
    producer.flush(10)
    before = wait_for(lambda: (v := parse(job.metrics())) and histogram(v, "apply")["count"] >= start + len(old) and v,
                      240, "the first delivery through the job", interval=0.5)
    duplicates = total(before, "cdcwatch_spark_duplicates_total", query=QUERY, server=SERVER) or 0

    now_ms = int(time.time() * 1000)
    for key, record in old:  # the same records again: a replay of changes already applied
        producer.produce(CREATED, key=key, value=record, timestamp=now_ms)
    key, record = change_event(SERVER, "created", 300, now_ms - 250, now_ms, 3000)  # after them in the partition
    producer.produce(CREATED, key=key, value=record, timestamp=now_ms)
    producer.flush(10)
    after = wait_for(lambda: (v := parse(job.metrics())) and
                     histogram(v, "apply")["count"] >= histogram(before, "apply")["count"] + 1 and v,
                     120, "the new change through the job", interval=0.2)
    assert total(after, "cdcwatch_spark_duplicates_total", query=QUERY, server=SERVER) == duplicates + len(old)
    assert_histogram(delta(histogram(after, "capture"), histogram(before, "capture")), expected([250]), "capture")
    assert_histogram(delta(histogram(after, "produce", "create_time"), histogram(before, "produce", "create_time")),
                     expected([0]), "produce")
    assert delta(histogram(after, "queue", "create_time"), histogram(before, "queue", "create_time"))["count"] == 1
    assert delta(histogram(after, "apply"), histogram(before, "apply"))["count"] == 1
