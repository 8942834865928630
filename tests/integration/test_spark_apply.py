"""The whole chain, all real: PostgreSQL → Debezium (Kafka Connect worker) → Kafka protocol broker
(Apache Kafka 4) → `cdcwatch-apply` (Spark, listener attached) → PostgreSQL target.

- after inserts, updates and deletes the target equals the source, and the apply-lag gauge matches
  the delay measured from outside, as do the probe's four stages of latency added up (real Debezium
  records, CreateTime, no clock skew on one machine);
- at-least-once for real: kill -9 the worker between two offset flushes, restart it, and
  `cdcwatch_spark_duplicates_total` equals the re-delivered events counted independently from the topic;
- malformed records in the topic are counted while the query keeps applying;
- a query that fails reads `failed` with its exception class.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from devstack.connect import ConnectWorker
from devstack.debezium import postgres_connector_properties
from devstack.procs import wait_for, wait_until_seen
from devstack.prometheus import Pushgateway
from devstack.spark import ApplyJob
from tests.integration.conftest import MS, parse, promtool_check, total, value

pytestmark = pytest.mark.integration

SERVER = "shop"
TOPIC = f"{SERVER}.public.items"
QUERY = "shop_apply"
FLUSH_MS = 20000


@pytest.fixture(scope="module")
def pipeline(postgres, kafka, stack_dir):
    postgres.sql("DROP DATABASE IF EXISTS shop_target")
    postgres.sql("CREATE DATABASE shop_target")
    postgres.sql("DROP TABLE IF EXISTS items; CREATE TABLE items (id int PRIMARY KEY, name text, qty int);"
                 "INSERT INTO items SELECT g, 'item ' || g, g % 7 FROM generate_series(1, 500) g")
    properties = postgres_connector_properties(stack_dir, postgres.port, SERVER, "public.items", slot="shop_slot")
    for engine_only in ("name", "offset.storage", "offset.storage.file.filename", "offset.flush.interval.ms"):
        properties.pop(engine_only)
    properties["heartbeat.interval.ms"] = "1000"
    worker = ConnectWorker(stack_dir / "shop-connect", kafka.bootstrap, {"shop": properties}, offset_flush_ms=FLUSH_MS)
    worker.start()
    pushgateway = Pushgateway(stack_dir / "shop-pushgateway")
    pushgateway.start()
    job = ApplyJob(stack_dir / "shop-apply", kafka.bootstrap, rf"{SERVER}\..*|__debezium-heartbeat\.{SERVER}",
                   f"host=127.0.0.1 port={postgres.port} user=postgres dbname=shop_target", query_name=QUERY,
                   extra_args=["--linger-after-failure", "600", "--pushgateway", f"127.0.0.1:{pushgateway.port}"])
    job.start()
    yield worker, job, pushgateway
    job.stop()
    pushgateway.stop()
    worker.stop()
    postgres.drop_slot("shop_slot")


def source_rows(postgres) -> dict[str, dict]:
    rows = postgres.sql("SELECT id, row_to_json(i) FROM items i")
    return {json.dumps([["id", int(line.split("|", 1)[0])]], separators=(",", ":")): json.loads(line.split("|", 1)[1])
            for line in rows.splitlines()}


def target_rows(postgres) -> dict[str, dict]:
    try:
        rows = postgres.sql("SELECT row_key, row FROM cdcwatch_apply.rows WHERE NOT deleted AND table_id = 'postgres.public.items'",
                            database="shop_target")
    except Exception:  # the schema is created by the job's first batch
        return {}
    return {line.split("|", 1)[0]: json.loads(line.split("|", 1)[1]) for line in rows.splitlines()}


def in_sync(postgres) -> bool:
    return target_rows(postgres) == source_rows(postgres)


def metrics(job: ApplyJob) -> dict:
    return parse(job.metrics())


def test_target_equals_source_and_apply_lag_matches_the_measured_delay(pipeline, postgres) -> None:
    worker, job, pushgateway = pipeline
    wait_for(lambda: in_sync(postgres), 240, "the snapshot to reach the target", interval=1)
    for round_ in range(5):
        postgres.sql(f"BEGIN; INSERT INTO items SELECT g, 'new ' || g, 1 FROM generate_series({1000 + round_ * 10}, "
                     f"{1009 + round_ * 10}) g; UPDATE items SET qty = qty + 1 WHERE id % 10 = {round_};"
                     f"DELETE FROM items WHERE id = {round_ * 50 + 3}; COMMIT")
    wait_for(lambda: in_sync(postgres), 120, "the changes to reach the target", interval=0.5)
    synced = time.time()  # the batch that applied them has reported once a progress comes after this
    before = wait_for(lambda: (v := metrics(job)) and
                      value(v, "cdcwatch_spark_last_progress_timestamp_seconds", query=QUERY) > synced and v,
                      30, "a progress after the changes were applied")

    # one change on an otherwise idle source: lag reported vs the delay seen from outside
    sent = time.time()
    postgres.sql("INSERT INTO items VALUES (5000, 'probe', 0)")
    committed = time.time()
    # the merge committed after the last poll that missed the row began: the lower bound holds however long a poll takes
    missed, seen = wait_until_seen(lambda: '"probe"' in postgres.sql(
        "SELECT coalesce(string_agg(row::text, ''), '') FROM cdcwatch_apply.rows WHERE row_key = '[[\"id\",5000]]'",
        database="shop_target"), committed, 60, "the probe row in the target", interval=0.05)
    at_least, measured = missed - committed, seen - committed
    values = wait_for(lambda: (v := metrics(job)) and total(v, "cdcwatch_spark_changes_applied_total", query=QUERY) and
                      value(v, "cdcwatch_spark_newest_applied_change_timestamp_seconds", query=QUERY) >= sent - MS and v,
                      30, "the probe's batch in the listener")
    read_at = time.time()
    lag = value(values, "cdcwatch_spark_apply_lag_seconds", query=QUERY, percentile="max")
    print(f"\nprobe: delay seen from outside {at_least:.2f}s to {measured:.2f}s, reported apply lag {lag:.2f}s")
    # the batch's progress comes after its merge and before the read (less a millisecond: its time is in ms)
    assert at_least - MS <= lag <= read_at - sent
    # the probe is the batch's only change: every percentile is its lag
    assert value(values, "cdcwatch_spark_apply_lag_seconds", query=QUERY, percentile="50") == lag
    assert value(values, "cdcwatch_spark_apply_lag_seconds", query=QUERY, percentile="99") == lag
    # its four stages, one observation each, add up to its way from commit to the end of its batch
    stages = [("capture", ""), ("produce", "create_time"), ("queue", "create_time"), ("apply", "")]
    grown = {(stage, kind): {part: value(values, f"cdcwatch_spark_stage_latency_seconds_{part}", query=QUERY, stage=stage,
                                         timestamp_type=kind) - (value(before, f"cdcwatch_spark_stage_latency_seconds_{part}",
                                                                       query=QUERY, stage=stage, timestamp_type=kind) or 0)
                             for part in ("count", "sum")} for stage, kind in stages}
    print("probe by stage: " + ", ".join(f"{stage} {g['sum']:.3f}s" for (stage, _), g in grown.items()))
    assert [g["count"] for g in grown.values()] == [1, 1, 1, 1]
    assert at_least - MS <= sum(g["sum"] for g in grown.values()) <= lag + MS
    # every change so far (snapshot, DML, probe) in every stage, none with a negative stage on one machine's clock
    changes = value(values, "cdcwatch_spark_changes_total", query=QUERY, server=SERVER)
    assert all(value(values, "cdcwatch_spark_stage_latency_seconds_count", query=QUERY, stage=stage, timestamp_type=kind)
               == changes for stage, kind in stages)
    assert all(value(values, "cdcwatch_spark_clock_skew_changes_total", query=QUERY, stage=stage, timestamp_type=kind) == 0
               for stage, kind in stages)
    assert value(values, "cdcwatch_spark_query_state", query=QUERY, state="active") == 1
    assert total(values, "cdcwatch_spark_duplicates_total", query=QUERY, server=SERVER) == 0
    assert value(values, "cdcwatch_spark_source_offsets_behind_latest", query=QUERY, topic=TOPIC) == 0
    # idle source with heartbeats: freshness stays low; the batches keep coming
    assert value(values, "cdcwatch_spark_freshness_seconds", query=QUERY, server=SERVER) < 10
    promtool_check(job.metrics())
    # the same metrics pushed to a real Pushgateway after every batch
    pushed = parse(urllib.request.urlopen(f"{pushgateway.url}/metrics", timeout=10).read().decode())
    assert total(pushed, "cdcwatch_spark_changes_applied_total", job="cdcwatch-spark", query=QUERY) >= \
        total(values, "cdcwatch_spark_changes_applied_total", query=QUERY) - 1


def topic_identities(bootstrap: str, topic: str = TOPIC) -> Counter:
    """Every row change in the topic as (key, source position), read without cdcwatch's decoder."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{time.time()}", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    metadata = consumer.list_topics(topic, timeout=10)
    partitions = [TopicPartition(topic, p, 0) for p in metadata.topics[topic].partitions]
    ends = {p.partition: consumer.get_watermark_offsets(p, timeout=10)[1] for p in partitions}
    consumer.assign(partitions)
    seen: Counter = Counter()
    done = {p for p, end in ends.items() if end == 0}
    while len(done) < len(ends):
        record = consumer.poll(1)
        if record is None or record.error():
            continue
        if record.value() is not None:
            try:
                payload = json.loads(record.value())["payload"]
                source = payload["source"]
                seen[(record.key(), source["lsn"], source.get("sequence"))] += 1
            except (ValueError, KeyError, TypeError):
                pass  # malformed records written by another test
        if record.offset() + 1 >= ends[record.partition()]:
            done.add(record.partition())
    consumer.close()
    return seen


def test_kill_9_between_offset_flushes_redelivers_and_every_duplicate_is_counted(pipeline, postgres, kafka) -> None:
    worker, job, pushgateway = pipeline
    wait_for(lambda: in_sync(postgres), 240, "the target to be in sync", interval=1)
    flushed = worker.next_offset_flush(FLUSH_MS / 1000 + 30)
    # the kill must come before the next flush: the topic's end offsets, not the whole topic, are read meanwhile
    written = kafka.end_offset(TOPIC)
    changed = int(postgres.sql("SELECT count(*) FROM items WHERE id <= 300"))
    for round_ in range(5):  # 5 transactions right after a flush
        postgres.sql(f"UPDATE items SET qty = qty + 100 WHERE id BETWEEN {round_ * 60 + 1} AND {round_ * 60 + 60}")
    wait_for(lambda: kafka.end_offset(TOPIC) >= written + changed, 30, "the changes in the topic")
    assert worker.kill_unless_flushed_since(flushed), "an offset flush came before the kill: nothing to re-deliver"
    worker.start()
    identities = wait_for(lambda: (c := topic_identities(kafka.bootstrap)) and sum(n - 1 for n in c.values()) >= changed
                          and c, 120, "the re-delivered changes in the topic", interval=1)
    redelivered = sum(n - 1 for n in identities.values())
    wait_for(lambda: total(metrics(job), "cdcwatch_spark_duplicates_total", query=QUERY, server=SERVER) == redelivered,
             120, f"{redelivered} duplicates counted", interval=1)
    wait_for(lambda: in_sync(postgres), 60, "the target to equal the source after the replay", interval=0.5)
    values = metrics(job)
    print(f"\nre-delivered {redelivered} events; duplicates_total "
          f"{total(values, 'cdcwatch_spark_duplicates_total', query=QUERY, server=SERVER)}")
    assert total(values, "cdcwatch_spark_duplicates_total", query=QUERY, server=SERVER) == redelivered
    assert total(values, "cdcwatch_spark_stale_events_total", query=QUERY, server=SERVER) == 0


def test_malformed_records_are_counted_and_the_query_keeps_applying(pipeline, postgres, kafka) -> None:
    worker, job, pushgateway = pipeline
    before = value(metrics(job), "cdcwatch_spark_malformed_events_total", query=QUERY, server=SERVER)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for garbage in (b"not json", b'{"payload": {"op": "x"}}', b"[1, 2"):
        producer.produce(TOPIC, key=b'{"id": -1}', value=garbage)
    producer.flush(10)
    wait_for(lambda: value(metrics(job), "cdcwatch_spark_malformed_events_total", query=QUERY, server=SERVER) == before + 3,
             60, "three malformed records counted")
    postgres.sql("INSERT INTO items VALUES (6000, 'after garbage', 1)")
    wait_for(lambda: in_sync(postgres), 60, "the query to keep applying", interval=0.5)
    assert value(metrics(job), "cdcwatch_spark_query_state", query=QUERY, state="active") == 1


def test_a_failed_query_reads_failed_with_its_exception_class(pipeline, postgres) -> None:
    worker, job, pushgateway = pipeline
    postgres.sql("DROP SCHEMA cdcwatch_apply CASCADE", database="shop_target")  # the sink's next merge fails
    postgres.sql("INSERT INTO items VALUES (7000, 'breaks the sink', 1)")
    values = wait_for(lambda: (v := metrics(job)) and value(v, "cdcwatch_spark_query_state", query=QUERY, state="failed") == 1
                      and v, 90, "the query to fail")
    assert value(values, "cdcwatch_spark_query_state", query=QUERY, state="active") == 0
    assert value(values, "cdcwatch_spark_query_failure_info", query=QUERY, exception="DatabaseError") == 1
    promtool_check(job.metrics())
