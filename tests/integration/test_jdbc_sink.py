"""The pipeline without Spark, on real servers: PostgreSQL → the released Debezium PostgreSQL connector → Apache
Kafka 4 → the released Debezium JDBC sink connector (both in one Kafka Connect worker) → PostgreSQL, and a second
sink → MariaDB. The connector writes the canary with its `heartbeat.action.query`; cdcwatch collects the worker
(REST and JMX), Kafka, the canaries in both targets and reconciles the table against each target, its freshness gate
on the canary.

- Healthy: both targets hold the source's rows (0 diverged), the canaries land within a few intervals, and the sink
  tasks' metrics (records read and sent, offset commits) move.
- A record no converter can read (a producer's poison pill) goes to the PostgreSQL sink's dead letter queue
  (`errors.tolerance=all`): its dead-letter count rises while it keeps committing and its target stays fresh; the
  MariaDB sink, tolerant without a dead letter queue, skips it.
- A row the PostgreSQL target rejects fails its sink task (the JDBC sink tolerates no write error): the task reads
  FAILED, the target's canary ages while Kafka's newest canary stays fresh; fixed and restarted, it catches up.
- A column added at the source that the MariaDB sink does not carry (`field.include.list`, `schema.evolution=none`:
  it drops the field without a word) is reported as schema drift, its age rising.
- The PostgreSQL sink paused: its target's canary ages while Kafka's newest canary stays fresh (the sink stopped, not
  the connector).
"""

from __future__ import annotations

import time

import pytest

from devstack.configs import canary, connect_worker, exporter_config, kafka_cluster, reconcile_pair, reconcile_side
from devstack.connect import ConnectWorker
from devstack.debezium import jdbc_sink_properties, postgres_connector_properties
from devstack.procs import StackError, wait_for
from tests.integration.conftest import promtool_check, value

pytestmark = pytest.mark.integration

SERVER = "jssrv"
SLOT = "js_slot"
INTERVAL = 1.0
SETTLE = 6.0
"""Reconciliation's settle time: above the sinks' delivery time (about 2 s here) plus a canary interval and a gate
read, so the freshness gate stays open on a healthy pipeline."""
TOPICS = f"{SERVER}.public.js_items,{SERVER}.public.js_canary"
CANARY_TOPIC = f"{SERVER}.public.js_canary"
UPSERT = "INSERT INTO js_canary (id, ts) VALUES (1, now()) ON CONFLICT (id) DO UPDATE SET ts = EXCLUDED.ts"


def scrape_when(serve, holds, what: str, timeout: float = 90):
    """The first scrape for which `holds(values)`; on a timeout, the connectors' states and errors say why."""
    try:
        return wait_for(lambda: next((v for v in [serve.scrape()] if holds(v)), None), timeout, what, interval=0.5)
    except StackError as exc:
        states = {name: [task.get("state"), *[line for line in task.get("trace", "").splitlines()
                                              if line.startswith("Caused by")][-1:]]
                  for worker in serve.workers for name, status in worker.get("/connectors?expand=status").items()
                  for task in status["status"]["tasks"]}
        raise StackError(f"{exc}; connector tasks: {states}") from None


def diverged(values, pair: str) -> float:
    return sum(value(values, "cdcwatch_reconcile_rows_diverged", target=pair, kind=k) or 0
               for k in ("missing", "extra", "different"))


class Pipeline:
    """The two Kafka Connect workers: the source connector and the PostgreSQL sink in one, the MariaDB sink in the
    other. (Two JDBC sinks of different databases in one worker share the sink plugin's type mappings: one of them
    then writes the other database's types, `longtext` in PostgreSQL, and fails.)"""

    def __init__(self, main: ConnectWorker, maria: ConnectWorker) -> None:
        self.main, self.maria = main, maria


@pytest.fixture(scope="module")
def pipeline(postgres, mariadb, kafka, stack_dir):
    postgres.sql("DROP TABLE IF EXISTS js_items, js_canary;"
                 "CREATE TABLE js_items (id int PRIMARY KEY, name text NOT NULL, qty int);"
                 "INSERT INTO js_items SELECT g, 'item ' || g, g % 9 FROM generate_series(1, 200) g;"
                 "CREATE TABLE js_canary (id int PRIMARY KEY, ts timestamptz NOT NULL)")
    postgres.sql("DROP DATABASE IF EXISTS jssink")
    postgres.sql("CREATE DATABASE jssink")
    mariadb.root_sql("DROP DATABASE IF EXISTS jssink; CREATE DATABASE jssink;"
                     # pre-created, never evolved by its sink: a column added at the source never arrives
                     "CREATE TABLE jssink.js_items (id INT PRIMARY KEY, name VARCHAR(100) NOT NULL, qty INT);"
                     "CREATE TABLE jssink.js_canary (id INT PRIMARY KEY, ts DATETIME(6) NOT NULL)")
    main = ConnectWorker(stack_dir / "connect-jdbc", kafka.bootstrap, group="cdcwatch-connect-jdbc")
    maria = ConnectWorker(stack_dir / "connect-jdbc-maria", kafka.bootstrap, group="cdcwatch-connect-jdbc-maria")
    main.start()
    maria.start()
    source = postgres_connector_properties(stack_dir, postgres.port, SERVER, "public.js_items,public.js_canary", slot=SLOT)
    for engine_only in ("name", "offset.storage", "offset.storage.file.filename", "offset.flush.interval.ms"):
        source.pop(engine_only)
    main.put("/connectors/js-source/config", {**source, "heartbeat.interval.ms": str(int(INTERVAL * 1000)),
                                              "heartbeat.action.query": UPSERT})
    main.put("/connectors/js-sink-pg/config", jdbc_sink_properties(
        TOPICS, f"jdbc:postgresql://127.0.0.1:{postgres.port}/jssink", "postgres", "postgres", **{
            "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "js-dlq",
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true"}))
    maria.put("/connectors/js-sink-maria/config", jdbc_sink_properties(
        TOPICS, f"jdbc:mariadb://127.0.0.1:{mariadb.port}/jssink", mariadb.user, mariadb.password, **{
            "schema.evolution": "none", "errors.tolerance": "all",
            "field.include.list": ",".join(f"{SERVER}.public.{field}" for field in (
                "js_items:id", "js_items:name", "js_items:qty", "js_canary:id", "js_canary:ts"))}))
    yield Pipeline(main, maria)
    maria.stop()
    main.stop()
    postgres.drop_slot(SLOT)


@pytest.fixture(scope="module")
def serve(pipeline, postgres, mariadb, kafka, stack_dir):
    from tests.integration.conftest import Serve

    source_items = reconcile_side("postgres", postgres.port, "postgres", table="public.js_items", rows_per_second=20000)
    source_canary = reconcile_side("postgres", postgres.port, "postgres", table="public.js_canary")
    pg_target = {"engine": "postgres", "port": postgres.port, "user": "postgres", "dbname": "jssink"}
    maria_target = {"engine": "mysql", "port": mariadb.port, "user": mariadb.user, "password": mariadb.password}
    config = exporter_config(
        connect=[connect_worker("connect", pipeline.main.url, jmx_port=pipeline.main.jmx_port, timeout_seconds=3),
                 connect_worker("connect-maria", pipeline.maria.url, jmx_port=pipeline.maria.jmx_port, timeout_seconds=3)],
        kafka=[kafka_cluster("main", kafka.bootstrap, timeout_seconds=3)],
        canary=[canary("pg", SERVER, INTERVAL, {**pg_target, "table": "public.js_canary"}, source_canary),
                canary("maria", f"{SERVER}-maria", INTERVAL, {**maria_target, "table": "jssink.js_canary"}, source_canary,
                       topic=CANARY_TOPIC)],
        reconcile=[reconcile_pair("pg", source_items, {**pg_target, "table": "public.js_items"}, chunk_rows=100,
                                  settle_seconds=SETTLE, confirm_rechecks=2, pass_interval_seconds=0,
                                  freshness_canary={"table": "public.js_canary"}),
                   reconcile_pair("maria", source_items, {**maria_target, "table": "jssink.js_items"}, chunk_rows=100,
                                  settle_seconds=SETTLE, confirm_rechecks=2, pass_interval_seconds=0,
                                  freshness_canary={"table": "jssink.js_canary"})])
    process = Serve(config, stack_dir)
    process.workers = (pipeline.main, pipeline.maria)  # what a failed wait reports
    yield process
    process.stop()


def test_healthy_the_targets_hold_the_source_and_the_canaries_land(serve) -> None:
    values = scrape_when(serve, lambda v: all(
        value(v, "cdcwatch_reconcile_last_pass_timestamp_seconds", target=pair) and diverged(v, pair) == 0
        and value(v, "cdcwatch_reconcile_rows_suspect", target=pair) == 0 for pair in ("pg", "maria")),
        "both targets reconciled with no row differing", timeout=180)
    for name in ("pg", "maria"):
        assert value(values, "cdcwatch_up", collector="canary", target=name) == 1
        assert value(values, "cdcwatch_canary_target_age_seconds", target=name) < 10 * INTERVAL
        assert value(values, "cdcwatch_reconcile_freshness_gate_open", target=name) == 1
        assert value(values, "cdcwatch_reconcile_schema_drift_columns", target=name, kind="source_only") == 0
    for connector in ("js-sink-pg", "js-sink-maria"):
        assert value(values, "cdcwatch_connect_sink_records_read_total", connector=connector, task="0") >= 200
        assert value(values, "cdcwatch_connect_sink_records_sent_total", connector=connector, task="0") >= 200
        assert value(values, "cdcwatch_connect_sink_partitions", connector=connector, task="0") == 2
    commits = value(values, "cdcwatch_connect_sink_offset_commits_total", connector="js-sink-pg", task="0")
    scrape_when(serve, lambda v: value(v, "cdcwatch_connect_sink_offset_commits_total", connector="js-sink-pg",
                                       task="0") > commits, "the sink committing its offsets")
    assert value(values, "cdcwatch_kafka_newest_source_commit_timestamp_seconds", topic=CANARY_TOPIC, server=SERVER)
    promtool_check(serve.text())


def task_state(values, connector: str) -> str | None:
    return next((state for state in ("RUNNING", "FAILED", "PAUSED", "UNASSIGNED") if value(
        values, "cdcwatch_connect_task_state", connector=connector, task="0", state=state) == 1), None)


def test_a_poison_pill_goes_to_the_dead_letter_queue_while_the_sink_commits(serve, kafka) -> None:
    from confluent_kafka import Producer

    def counts(values) -> tuple[float | None, float | None]:
        return (value(values, "cdcwatch_connect_task_dlq_produce_requests_total", connector="js-sink-pg", task="0"),
                value(values, "cdcwatch_connect_task_records_skipped_total", connector="js-sink-maria", task="0"))

    before = scrape_when(serve, lambda v: None not in counts(v), "the sinks' error beans")
    sent, skipped = counts(before)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    producer.produce(f"{SERVER}.public.js_items", key=b"not json", value=b"\x00\x01 not json either")
    assert producer.flush(10) == 0
    values = scrape_when(serve, lambda v: counts(v) == (sent + 1, skipped + 1), "the record dead-lettered and skipped")
    assert task_state(values, "js-sink-pg") == task_state(values, "js-sink-maria") == "RUNNING"
    # each sink carries the server its topics are named after, and its type: the sink alerts' inhibitions reach its target
    assert value(values, "cdcwatch_connect_connector_state", connector="js-sink-pg", server=SERVER, type="sink",
                 state="RUNNING") == 1
    assert value(values, "cdcwatch_connect_task_state", connector="js-source", server=SERVER, type="source", task="0",
                 state="RUNNING") == 1
    assert value(values, "cdcwatch_connect_server_name_conflicts", server=SERVER) == 0  # a sink is no second source
    commits = value(values, "cdcwatch_connect_sink_offset_commits_total", connector="js-sink-pg", task="0")
    values = scrape_when(serve, lambda v: value(v, "cdcwatch_connect_sink_offset_commits_total", connector="js-sink-pg",
                                                task="0") > commits, "the sink committing on")
    assert value(values, "cdcwatch_canary_target_age_seconds", target="pg") < 10 * INTERVAL  # lag 0 and fresh


def test_a_row_the_target_rejects_fails_the_sink_and_its_canary_ages(serve, postgres, pipeline) -> None:
    postgres.sql("ALTER TABLE js_items ADD CONSTRAINT js_not_poison CHECK (name <> 'poison') NOT VALID", database="jssink")
    try:
        postgres.sql("INSERT INTO js_items VALUES (5001, 'poison', 1) ON CONFLICT (id) DO UPDATE SET name = 'poison'")
        values = scrape_when(serve, lambda v: task_state(v, "js-sink-pg") == "FAILED"
                             and value(v, "cdcwatch_canary_target_age_seconds", target="pg") > 10 * INTERVAL,
                             "the sink task FAILED and its target's canary aging")
        newest_in_kafka = value(values, "cdcwatch_kafka_newest_source_commit_timestamp_seconds", topic=CANARY_TOPIC,
                                server=SERVER)
        assert time.time() - newest_in_kafka < 10 * INTERVAL, "the connector still delivers canaries to Kafka"
        assert value(values, "cdcwatch_canary_target_age_seconds", target="maria") < 10 * INTERVAL
    finally:
        postgres.sql("ALTER TABLE js_items DROP CONSTRAINT js_not_poison", database="jssink")
        pipeline.main.post("/connectors/js-sink-pg/tasks/0/restart")
    scrape_when(serve, lambda v: task_state(v, "js-sink-pg") == "RUNNING"
                and value(v, "cdcwatch_canary_target_age_seconds", target="pg") < 5 * INTERVAL, "the sink caught up")
    postgres.sql("DELETE FROM js_items WHERE id = 5001")


def test_a_column_the_sink_does_not_carry_is_schema_drift(serve, postgres) -> None:
    started = time.time()  # a pass may find the column missing as soon as the ALTER commits
    postgres.sql("ALTER TABLE js_items ADD COLUMN note text DEFAULT 'x'")
    try:
        postgres.sql("UPDATE js_items SET qty = qty + 1 WHERE id = 3")  # a change carrying the column
        values = scrape_when(serve, lambda v: value(v, "cdcwatch_reconcile_schema_drift_columns", target="maria",
                                                    kind="source_only") == 1, "the missing column reported")
        age = value(values, "cdcwatch_reconcile_oldest_missing_column_age_seconds", target="maria")
        assert 0 <= age <= time.time() - started
        values = scrape_when(serve, lambda v: value(v, "cdcwatch_reconcile_oldest_missing_column_age_seconds",
                                                    target="maria") > age, "its age rising")
        assert "source only note" in serve.log.read_text(encoding="utf-8")
        assert task_state(values, "js-sink-maria") == "RUNNING"  # it drops the field without a word
    finally:
        postgres.sql("ALTER TABLE js_items DROP COLUMN note")


def test_a_paused_sink_ages_its_targets_canary_while_kafka_holds_fresh_ones(serve, pipeline) -> None:
    pipeline.main.put("/connectors/js-sink-pg/pause")
    try:
        values = scrape_when(serve, lambda v: value(v, "cdcwatch_canary_target_age_seconds", target="pg") > 10 * INTERVAL,
                             "the paused sink's target canary aging")
        newest_in_kafka = value(values, "cdcwatch_kafka_newest_source_commit_timestamp_seconds", topic=CANARY_TOPIC,
                                server=SERVER)
        assert time.time() - newest_in_kafka < 10 * INTERVAL, "the connector still delivers canaries to Kafka"
        assert time.time() - value(values, "cdcwatch_canary_source_timestamp_seconds", target="pg") < 5 * INTERVAL
        assert value(values, "cdcwatch_canary_target_age_seconds", target="maria") < 10 * INTERVAL
    finally:
        pipeline.main.put("/connectors/js-sink-pg/resume")
    scrape_when(serve, lambda v: value(v, "cdcwatch_canary_target_age_seconds", target="pg") < 5 * INTERVAL,
                "the resumed sink's canary landing again")
