"""Records deleted from the real Kafka 4 broker (DeleteRecords) before `cdcwatch-apply` read them.

Spark's own Kafka source decides: with failOnDataLoss (the default) the query fails and the listener
reads `failed` with the exception class; with `--no-fail-on-data-loss` it skips the gap and the
listener counts exactly the offsets it skipped in `cdcwatch_spark_lost_offsets_total`.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer, TopicPartition

from devstack.procs import wait_for
from devstack.spark import ApplyJob
from tests.integration.conftest import parse, total, value

pytestmark = pytest.mark.integration

SERVER = "lossy"
TOPIC = f"{SERVER}.public.items"
QUERY = "lossy_apply"


def produce(kafka, ids: range) -> None:
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for row_id in ids:
        producer.produce(TOPIC, key=json.dumps({"id": row_id}), value=json.dumps({
            "op": "c", "ts_ms": 1_700_000_000_000, "after": {"id": row_id},
            "source": {"connector": "postgresql", "name": SERVER, "ts_ms": 1_700_000_000_000, "db": "shop",
                       "schema": "public", "table": "items", "lsn": 1000 + row_id}}))
    assert producer.flush(10) == 0


def job(kafka, postgres, stack_dir, *extra: str) -> ApplyJob:
    started = ApplyJob(stack_dir / "lossy-apply", kafka.bootstrap, rf"{SERVER}\..*",
                       f"host=127.0.0.1 port={postgres.port} user=postgres dbname=lossy_target", query_name=QUERY,
                       extra_args=["--linger-after-failure", "600", *extra])
    started.start()
    return started


def applied(started: ApplyJob) -> float:
    return total(parse(started.metrics()), "cdcwatch_spark_changes_applied_total", query=QUERY) or 0


def test_deleted_records_fail_the_query_or_are_counted(kafka, postgres, stack_dir) -> None:
    postgres.sql("DROP DATABASE IF EXISTS lossy_target")
    postgres.sql("CREATE DATABASE lossy_target")
    kafka.create_topic(TOPIC, 1, **{"retention.ms": "-1"})
    produce(kafka, range(10))
    first = job(kafka, postgres, stack_dir)
    try:
        wait_for(lambda: applied(first) == 10, 120, "the first ten changes applied")
    finally:
        first.stop()
    produce(kafka, range(10, 20))
    admin = kafka.admin()
    for deleted in admin.delete_records([TopicPartition(TOPIC, 0, 15)]).values():
        deleted.result(30)  # offsets 10-14 are gone unread

    strict = job(kafka, postgres, stack_dir)
    try:
        values = wait_for(lambda: (v := parse(strict.metrics())) and value(
            v, "cdcwatch_spark_query_state", query=QUERY, state="failed") == 1 and v, 120, "the query to fail")
        failure = [dict(labels)["exception"] for (name, labels), v in values.items()
                   if name == "cdcwatch_spark_query_failure_info" and v == 1]
        assert failure == ["KafkaIllegalStateException"], failure
        assert "data may have been lost" in strict.log.read_text()
        assert total(values, "cdcwatch_spark_changes_applied_total", query=QUERY) == 0
    finally:
        strict.stop()

    lenient = job(kafka, postgres, stack_dir, "--no-fail-on-data-loss")
    try:
        wait_for(lambda: applied(lenient) == 5, 120, "the five changes left applied")
        # the batch's progress (which the skipped offsets are read from) reaches the listener after its sink
        values = wait_for(lambda: (v := parse(lenient.metrics())) and value(
            v, "cdcwatch_spark_batches_total", query=QUERY) and v, 30, "the batch's progress")
        assert value(values, "cdcwatch_spark_lost_offsets_total", query=QUERY) == 5
        assert value(values, "cdcwatch_spark_query_state", query=QUERY, state="active") == 1
    finally:
        lenient.stop()
