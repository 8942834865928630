"""The reference apply job on a Spark standalone cluster on 127.0.0.1: a master and two workers started with pyspark's
own `spark-class` (`devstack.spark_cluster`), so executors are JVMs of their own with their own Python workers.

cdcwatch reaches the executors as the deployment docs tell users: a virtualenv with the cdcwatch wheel packed with
venv-pack and shipped through `spark.archives` (the workers have no PYTHONPATH, and the executors report where they
imported cdcwatch from). On the cluster, as locally (test_spark_apply.py):
- the target equals the source, and apply lag and freshness are within the same bounds;
- a kill -9 of the Connect worker between offset flushes re-delivers changes, and every duplicate is counted, in
  the same scrape as the changes it duplicates (a batch's sink counts and observed counts move together);
- a worker (with its executor JVM and Python workers) killed while a micro-batch's tasks run: Spark runs the lost
  task again on the other executor, and no observed count (events, changes, malformed, duplicates, stage latencies)
  is counted twice or lost;
- the Delta Lake target: the executors type the rows, the table equals the changes, re-deliveries count exactly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import psycopg
import pytest
from confluent_kafka import Producer

from devstack.connect import ConnectWorker
from devstack.debezium import postgres_connector_properties
from devstack.procs import REPO, StackError, wait_for, wait_until_seen
from devstack.spark import ApplyJob
from devstack.spark_cluster import EXECUTOR_ENV, SparkCluster, executor_archive, job_env, spark_home
from tests.integration.conftest import MS, parse, total, value
from tests.integration.test_spark_apply import topic_identities

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SERVER = "cluster"
TOPIC = f"{SERVER}.public.cluster_items"
RAW_TOPIC = f"{SERVER}.public.raw"
"""Debezium-shaped records written straight to Kafka (two partitions: a task on each executor)."""
QUERY = "cluster_apply"
FLUSH_MS = 20000
TARGET_DB = "cluster_target"

WHERE_FROM = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.master(sys.argv[1]).appName("cdcwatch-where-from").getOrCreate()
def origins(batches):
    import os, cdcwatch, spark_listeners.decode
    import pandas as pd
    for _ in batches:
        yield pd.DataFrame({"origin": [f"{cdcwatch.__file__}|{spark_listeners.decode.__file__}|{sys.executable}|"
                                       f"{os.environ.get('PYTHONPATH', '')}"]})
rows = spark.range(0, 2, numPartitions=2).mapInPandas(origins, "origin string").collect()
print("ORIGINS " + "\\n".join(row.origin for row in rows))
spark.stop()
"""


@pytest.fixture(scope="module")
def cluster(stack_dir):
    started = SparkCluster(stack_dir / "spark-cluster", workers=2, cores=1, memory="1g")
    started.start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def driver_env(stack_dir):
    archive = executor_archive(stack_dir / "spark-executors")
    return job_env(archive, stack_dir / "spark-conf", spark_executor_memory="512m")


def test_executors_import_cdcwatch_from_the_shipped_archive(cluster, driver_env) -> None:
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", WHERE_FROM, cluster.url], env={**env, **driver_env}, cwd=cluster.dir,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    origins = done.stdout.split("ORIGINS ", 1)[1].strip().splitlines()
    assert len(origins) == 2
    for origin in origins:
        module, decoder, python, path = origin.split("|")
        print(f"\nexecutor: cdcwatch from {module}, python {python}, PYTHONPATH {path}")
        assert f"/{EXECUTOR_ENV}/lib/python" in module and f"/{EXECUTOR_ENV}/lib/python" in decoder
        assert str(REPO) not in module + decoder
        # Spark's own PYTHONPATH for its Python workers: pyspark.zip, py4j and jars of the Spark installation only
        assert all(entry.startswith(str(spark_home())) for entry in path.split(":")), path
        assert python.endswith(f"{EXECUTOR_ENV}/bin/python")


LAKE_SERVER = "sparkdelta"
"""No other module's server name followed by a dot is in it: the Kafka source found topics by pattern as a search,
not a whole-name match, when a job of test_spark_delta.py (`lake\\..*`) read this test's `clusterlake.` topic."""
LAKE_TOPIC = f"{LAKE_SERVER}.public.items"
LAKE_TABLE = "postgres.public.items"
_LAKE_ROW = {"type": "struct", "optional": True, "name": f"{LAKE_TOPIC}.Value", "fields": [
    {"type": "int32", "optional": False, "field": "id"}, {"type": "int32", "optional": True, "field": "qty"}]}


def lake_record(lsn: int, row_id: int, qty: int | None) -> tuple[str, str]:
    """A Debezium change of `items` as the JsonConverter writes it with its schema (the Delta target types its table
    from it): an insert or update of (row_id, qty), a delete where qty is None."""
    key = {"schema": {"type": "struct", "optional": False, "name": f"{LAKE_TOPIC}.Key",
                      "fields": [{"type": "int32", "optional": False, "field": "id"}]}, "payload": {"id": row_id}}
    now_ms = int(time.time() * 1000)
    payload = {"op": "c" if qty is not None else "d", "ts_ms": now_ms,
               "before": None if qty is not None else {"id": row_id, "qty": None},
               "after": {"id": row_id, "qty": qty} if qty is not None else None,
               "source": {"connector": "postgresql", "name": LAKE_SERVER, "ts_ms": now_ms - 5, "db": "postgres",
                          "schema": "public", "table": "items", "lsn": lsn}}
    value = {"schema": {"type": "struct", "optional": False, "name": f"{LAKE_TOPIC}.Envelope",
                        "fields": [{**_LAKE_ROW, "field": "before"}, {**_LAKE_ROW, "field": "after"}]},
             "payload": payload}
    return json.dumps(key), json.dumps(value)


def test_the_delta_target_on_the_cluster_equals_the_changes_and_counts_them_by_table(cluster, driver_env, kafka,
                                                                                     stack_dir) -> None:
    """The Delta target with its executors in JVMs of their own: they decode and type the rows (delta-spark shipped
    to them with the job's jars), the driver merges; the table equals the changes and a re-delivery counts as
    duplicates of its table, exactly. Run before the PostgreSQL pipeline of this module takes the cluster's cores."""
    kafka.create_topic(LAKE_TOPIC, 2)
    changes = [(row_id, row_id % 7) for row_id in range(1, 101)] + [(row_id, 100 + row_id) for row_id in range(1, 21)]
    changes += [(row_id, None) for row_id in range(91, 101)]
    records = [lake_record(10_000_000 + n, row_id, qty) for n, (row_id, qty) in enumerate(changes)]
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for key, value_ in records:
        producer.produce(LAKE_TOPIC, key=key, value=value_, partition=json.loads(key)["payload"]["id"] % 2)
    assert producer.flush(10) == 0
    expected = {row_id: qty for row_id, qty in changes}
    expected = {row_id: qty for row_id, qty in expected.items() if qty is not None}
    root = stack_dir / "cluster-lake"
    job = ApplyJob(stack_dir / "cluster-lake-apply", kafka.bootstrap, rf"{LAKE_SERVER}\..*", f"delta:{root}",
                   query_name="cluster_lake", master=cluster.url, env=driver_env)
    job.start(timeout=240)
    try:
        def lake_rows() -> dict[int, int]:
            from deltalake import DeltaTable

            if not (root / LAKE_TABLE / "_delta_log").is_dir():
                return {}
            return {row["id"]: row["qty"] for row in DeltaTable(str(root / LAKE_TABLE)).to_pyarrow_table().to_pylist()}

        # the first batch on two one-core workers creates the table and merges: on a loaded machine, minutes
        wait_for(lambda: lake_rows() == expected, 420, "the Delta table to hold the changes", interval=1)
        counted = {"query": "cluster_lake", "server": LAKE_SERVER, "table": LAKE_TABLE}
        # the counts come with the batch's progress, after its ledger's commit: on a loaded machine minutes later
        wait_for(lambda: value(metrics(job), "cdcwatch_spark_changes_applied_total", **counted) == len(changes), 300,
                 "every change counted as applied", interval=1)
        for key, value_ in records[:10]:
            producer.produce(LAKE_TOPIC, key=key, value=value_, partition=json.loads(key)["payload"]["id"] % 2)
        assert producer.flush(10) == 0
        wait_for(lambda: value(metrics(job), "cdcwatch_spark_duplicates_total", **counted) == 10, 300,
                 "the ten re-delivered changes counted as duplicates", interval=1)
        assert lake_rows() == expected
        assert value(metrics(job), "cdcwatch_spark_changes_applied_total", **counted) == len(changes)
    finally:
        job.stop()


@pytest.fixture(scope="module")
def pipeline(cluster, driver_env, postgres, kafka, stack_dir):
    postgres.sql(f"DROP DATABASE IF EXISTS {TARGET_DB}")
    postgres.sql(f"CREATE DATABASE {TARGET_DB}")
    postgres.sql("DROP TABLE IF EXISTS cluster_items; CREATE TABLE cluster_items (id int PRIMARY KEY, name text, qty int);"
                 "INSERT INTO cluster_items SELECT g, 'item ' || g, g % 7 FROM generate_series(1, 200) g")
    properties = postgres_connector_properties(stack_dir, postgres.port, SERVER, "public.cluster_items", slot="cluster_slot")
    for engine_only in ("name", "offset.storage", "offset.storage.file.filename", "offset.flush.interval.ms"):
        properties.pop(engine_only)
    properties["heartbeat.interval.ms"] = "1000"
    kafka.create_topic(RAW_TOPIC, 2)
    worker = ConnectWorker(stack_dir / "cluster-connect", kafka.bootstrap, {SERVER: properties}, offset_flush_ms=FLUSH_MS)
    worker.start()
    job = ApplyJob(stack_dir / "cluster-apply", kafka.bootstrap, rf"{SERVER}\..*|__debezium-heartbeat\.{SERVER}",
                   f"host=127.0.0.1 port={postgres.port} user=postgres dbname={TARGET_DB}", query_name=QUERY,
                   master=cluster.url, env=driver_env)
    job.start(timeout=240)
    yield worker, job
    job.stop()
    worker.stop()
    postgres.drop_slot("cluster_slot")


def source_rows(postgres) -> dict[str, dict]:
    rows = postgres.sql("SELECT id, row_to_json(i) FROM cluster_items i")
    return {json.dumps([["id", int(line.split("|", 1)[0])]], separators=(",", ":")): json.loads(line.split("|", 1)[1])
            for line in rows.splitlines()}


def target_rows(postgres, table: str = "cluster_items") -> dict[str, dict]:
    try:
        rows = postgres.sql(f"SELECT row_key, row FROM cdcwatch_apply.rows WHERE NOT deleted AND table_id = 'postgres.public.{table}'",
                            database=TARGET_DB)
    except Exception:  # the schema is created when the job starts
        return {}
    return {line.split("|", 1)[0]: json.loads(line.split("|", 1)[1]) for line in rows.splitlines()}


def in_sync(postgres, pipeline=None) -> bool:
    """Whether the target holds the source's rows; with the `pipeline`, a StackError as soon as its apply job exited
    or its connector's task failed (the wait would never end), naming why."""
    if pipeline is not None:
        worker, job = pipeline
        if not job.server.alive:
            raise StackError(f"the apply job exited; see {job.log}")
        tasks = worker.get(f"/connectors/{SERVER}/status")["tasks"]
        failed = [task.get("trace", "").splitlines()[:1] for task in tasks if task["state"] == "FAILED"]
        if failed:
            raise StackError(f"the connector's task FAILED: {failed}")
    return target_rows(postgres) == source_rows(postgres)


def metrics(job: ApplyJob) -> dict:
    return parse(job.metrics())


def test_target_equals_source_and_apply_lag_and_freshness_hold_on_the_cluster(pipeline, postgres) -> None:
    worker, job = pipeline
    wait_for(lambda: in_sync(postgres, pipeline), 240, "the snapshot to reach the target", interval=1)
    postgres.sql("BEGIN; INSERT INTO cluster_items SELECT g, 'new ' || g, 1 FROM generate_series(1000, 1009) g;"
                 "UPDATE cluster_items SET qty = qty + 1 WHERE id % 10 = 3; DELETE FROM cluster_items WHERE id = 7; COMMIT")
    wait_for(lambda: in_sync(postgres, pipeline), 120, "the changes to reach the target", interval=0.5)
    synced = time.time()
    wait_for(lambda: value(metrics(job), "cdcwatch_spark_last_progress_timestamp_seconds", query=QUERY) > synced,
             30, "a progress after the changes were applied")
    # one change on an otherwise idle source: the reported lag against the delay seen from outside
    sent = time.time()
    postgres.sql("INSERT INTO cluster_items VALUES (5000, 'probe', 0)")
    committed = time.time()
    # the merge committed after the last poll that missed the row began: the lower bound holds however long a poll takes
    missed, seen = wait_until_seen(lambda: '"probe"' in postgres.sql(
        "SELECT coalesce(string_agg(row::text, ''), '') FROM cdcwatch_apply.rows WHERE row_key = '[[\"id\",5000]]'",
        database=TARGET_DB), committed, 60, "the probe row in the target", interval=0.05)
    at_least, measured = missed - committed, seen - committed
    values = wait_for(lambda: (v := metrics(job)) and
                      value(v, "cdcwatch_spark_newest_applied_change_timestamp_seconds", query=QUERY) >= sent - MS and v,
                      30, "the probe's batch in the listener")
    read_at = time.time()
    lag = value(values, "cdcwatch_spark_apply_lag_seconds", query=QUERY, percentile="max")
    print(f"\nprobe on the cluster: delay seen from outside {at_least:.2f}s to {measured:.2f}s, reported apply lag {lag:.2f}s")
    # the batch's progress comes after its merge and before the read (less a millisecond: its time is in ms)
    assert at_least - MS <= lag <= read_at - sent
    changes = value(values, "cdcwatch_spark_changes_total", query=QUERY, server=SERVER)
    assert value(values, "cdcwatch_spark_stage_latency_seconds_count", query=QUERY, stage="capture", timestamp_type="") == changes
    assert value(values, "cdcwatch_spark_query_state", query=QUERY, state="active") == 1
    assert total(values, "cdcwatch_spark_duplicates_total", query=QUERY, server=SERVER) == 0
    assert value(values, "cdcwatch_spark_freshness_seconds", query=QUERY, server=SERVER) < 10


def test_kill_9_of_the_connect_worker_counts_every_duplicate_on_the_cluster(pipeline, postgres, kafka) -> None:
    worker, job = pipeline
    wait_for(lambda: in_sync(postgres, pipeline), 240, "the target to be in sync", interval=1)
    flushed = worker.next_offset_flush(FLUSH_MS / 1000 + 30)
    written = kafka.end_offset(TOPIC)
    before = topic_identities(kafka.bootstrap, TOPIC)
    redelivered_before = sum(n - 1 for n in before.values())
    baseline = metrics(job)
    counted_before = total(baseline, "cdcwatch_spark_duplicates_total", query=QUERY, server=SERVER)
    changes_before = value(baseline, "cdcwatch_spark_changes_total", query=QUERY, server=SERVER)
    changed = int(postgres.sql("SELECT count(*) FROM cluster_items WHERE id <= 100"))
    for round_ in range(2):
        postgres.sql(f"UPDATE cluster_items SET qty = qty + 100 WHERE id BETWEEN {round_ * 50 + 1} AND {round_ * 50 + 50}")
    wait_for(lambda: kafka.end_offset(TOPIC) >= written + changed, 30, "the changes in the topic")
    assert worker.kill_unless_flushed_since(flushed), "an offset flush came before the kill: nothing to re-deliver"
    worker.start()
    identities = wait_for(lambda: (c := topic_identities(kafka.bootstrap, TOPIC)) and
                          sum(n - 1 for n in c.values()) - redelivered_before >= changed and c,
                          120, "the re-delivered changes in the topic", interval=1)
    redelivered = sum(n - 1 for n in identities.values()) - redelivered_before
    # the first scrape that counts every duplicate (scraped often, to land between the sink's report and the
    # batch's progress if a scrape can) counts the changes they duplicate as well: the batch's counts move together
    counted = wait_for(lambda: (v := metrics(job)) and total(v, "cdcwatch_spark_duplicates_total", query=QUERY,
                                                             server=SERVER) - counted_before == redelivered and v,
                       120, f"{redelivered} duplicates counted", interval=0.02)
    assert value(counted, "cdcwatch_spark_changes_total", query=QUERY, server=SERVER) - changes_before == changed + redelivered
    wait_for(lambda: in_sync(postgres, pipeline), 60, "the target to equal the source after the replay", interval=0.5)
    values = metrics(job)
    print(f"\nre-delivered {redelivered} events; duplicates counted "
          f"{total(values, 'cdcwatch_spark_duplicates_total', query=QUERY, server=SERVER) - counted_before}")
    assert total(values, "cdcwatch_spark_duplicates_total", query=QUERY, server=SERVER) - counted_before == redelivered
    assert total(values, "cdcwatch_spark_stale_events_total", query=QUERY, server=SERVER) == 0


def raw_record(row_id: int) -> str:
    now_ms = int(time.time() * 1000)
    return json.dumps({"op": "c", "ts_ms": now_ms, "after": {"id": row_id, "qty": row_id % 5},
                       "source": {"connector": "postgresql", "name": SERVER, "ts_ms": now_ms - 5, "db": "postgres",
                                  "schema": "public", "table": "raw", "lsn": 10_000_000 + row_id}})


def blocked_copies(postgres) -> int:
    """Staging COPYs of the apply job's executors waiting for the test's advisory lock."""
    return int(postgres.sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory' AND query LIKE 'COPY%'"))


def test_a_worker_killed_in_the_middle_of_a_micro_batch_loses_and_doubles_no_count(pipeline, cluster, postgres, kafka) -> None:
    worker, job = pipeline
    wait_for(lambda: in_sync(postgres, pipeline), 240, "the target to be in sync", interval=1)
    before = metrics(job)  # whole batches: a batch's sink counts are recorded with its observed ones, at its progress
    counts = ("cdcwatch_spark_changes_total", "cdcwatch_spark_malformed_events_total", "cdcwatch_spark_duplicates_total",
              "cdcwatch_spark_changes_applied_total")

    def grown(values: dict, name: str, **labels: str) -> float:
        return (total(values, name, query=QUERY, **labels) or 0) - (total(before, name, query=QUERY, **labels) or 0)

    # every staging COPY waits, inside its task, for an advisory lock the test holds: both executors are then in the
    # middle of the same micro-batch, their rows decoded and observed but not yet reported to the driver
    with psycopg.connect(f"host=127.0.0.1 port={postgres.port} user=postgres dbname={TARGET_DB}", autocommit=True) as db:
        db.execute("CREATE OR REPLACE FUNCTION cdcwatch_apply.hold() RETURNS trigger LANGUAGE plpgsql AS "
                   "$$ BEGIN PERFORM pg_advisory_xact_lock_shared(27); RETURN NEW; END $$")
        db.execute("CREATE TRIGGER hold BEFORE INSERT ON cdcwatch_apply.staging FOR EACH ROW "
                   "WHEN (NEW.table_id LIKE '%.raw') EXECUTE FUNCTION cdcwatch_apply.hold()")
        db.execute("SELECT pg_advisory_lock(27)")
        try:
            # one produce request for both partitions: the batch that reads them reads both
            producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5000})
            ids = range(1, 201)
            for row_id in ids:
                producer.produce(RAW_TOPIC, key=json.dumps({"id": row_id}), value=raw_record(row_id), partition=row_id % 2)
            for partition, garbage in enumerate((b"not json", b"[1, 2")):
                producer.produce(RAW_TOPIC, key=b'{"id": -1}', value=garbage, partition=partition)
            assert producer.flush(10) == 0
            wait_for(lambda: blocked_copies(postgres) == 2, 120, "a staging COPY blocked on each executor")
            assert cluster.executor_pids(0), "worker 0 runs no executor"
            killed = cluster.kill_worker(0)  # the worker, its executor JVM and the executor's Python workers
            print(f"\nkilled worker 0 in the middle of a micro-batch: pids {killed}")
        finally:
            db.execute("SELECT pg_advisory_unlock(27)")
            db.execute("DROP TRIGGER hold ON cdcwatch_apply.staging")
    wait_for(lambda: len(target_rows(postgres, "raw")) == len(ids), 180, "every raw row in the target after the retry", interval=1)
    # the sink's counts are recorded with their batch's progress, so this scrape holds the batch's observed counts too
    values = wait_for(lambda: (v := metrics(job)) and grown(v, "cdcwatch_spark_changes_applied_total") == len(ids) and v,
                      60, "the retried batch's merge and progress")
    print("\nafter the worker kill: " + ", ".join(f"{name} +{grown(values, name, server=SERVER):g}" for name in counts[:3]))
    assert target_rows(postgres, "raw") == {json.dumps([["id", i]], separators=(",", ":")): {"id": i, "qty": i % 5}
                                            for i in ids}
    assert grown(values, "cdcwatch_spark_changes_total", server=SERVER) == len(ids)
    # every record the Kafka source read (Spark's own count) is one event observed: none twice, none lost
    events = sum(v - (before.get((name, labels)) or 0) for (name, labels), v in values.items()
                 if name == "cdcwatch_spark_events_total" and ("query", QUERY) in labels)
    assert events == grown(values, "cdcwatch_spark_input_rows_total")
    assert grown(values, "cdcwatch_spark_malformed_events_total", server=SERVER) == 2
    assert grown(values, "cdcwatch_spark_duplicates_total", server=SERVER) == 0
    for stage, kind in (("capture", ""), ("produce", "create_time"), ("queue", "create_time"), ("apply", "")):
        assert grown(values, "cdcwatch_spark_stage_latency_seconds_count", stage=stage, timestamp_type=kind) == len(ids), stage
    assert value(values, "cdcwatch_spark_query_state", query=QUERY, state="active") == 1
    cluster.start_worker(0)  # the cluster whole again
