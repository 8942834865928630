"""The chain into Delta Lake, all real: PostgreSQL → Debezium (Kafka Connect) → Kafka → `cdcwatch-apply --target
delta:ROOT` (Spark with delta-spark) → one typed Delta table per source table, read back here with the `deltalake`
package (delta-rs: a reader independent of the job's).

- after inserts, updates and deletes the Delta table holds the source's rows, typed (integer, numeric, date,
  timestamp with and without time zone), and each row's source position and commit time;
- records produced again into the topic (an at-least-once re-delivery) are counted as duplicates, exactly, and
  a deleted row's re-delivered insert does not bring it back;
- the job dies between a batch's writes and its checkpoint (Spark's commit log cannot be written); restarted,
  Spark runs the batch again: every Delta table holds that batch's commit once, and the target equals the source;
- a batch holding only deletes, the first after a restart, types their keys from the schema their records carry;
- the delta collector, reading the job's table from its log alone, reports the newest `_cdc_commit_time` the
  table holds (Delta's statistics keep milliseconds);
- the canary lands in its own Delta table, where a canary target of `engine: delta` reads the time the source wrote
  it from the log, and the job counts its change under the canary table, apart from the orders';
- the reconciliation job (`cdcwatch-reconcile`) compares the source with the Delta table under live traffic, gated on
  the job's listener: no false alarm, and a row deleted behind the job's back is confirmed missing.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from cdcwatch.delta.log import DeltaLog
from devstack.connect import ConnectWorker
from devstack.debezium import postgres_connector_properties
from devstack.procs import StackError, wait_for
from devstack.spark import ApplyJob, ReconcileJob
from tests.integration.conftest import parse, value

pytestmark = [pytest.mark.integration, pytest.mark.delta]

SERVER = "lake"
TOPIC = f"{SERVER}.public.lake_orders"
QUERY = "lake_apply"
TABLE_ID = "postgres.public.lake_orders"
COLUMNS = ("id, note, qty, price::text, born::text, to_char(seen, 'YYYY-MM-DD HH24:MI:SS.US'), "
           "to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')")


@pytest.fixture(scope="module")
def lake(postgres, kafka, stack_dir):
    postgres.sql("DROP TABLE IF EXISTS lake_orders; CREATE TABLE lake_orders (id int PRIMARY KEY, note text, qty bigint, "
                 "price numeric(12,2), born date, seen timestamp, at timestamptz);"
                 "INSERT INTO lake_orders SELECT g, 'order ' || g, g::bigint * 1000000000, g * 1.25 - 40, date '2024-02-28' + g, "
                 "timestamp '2024-01-01 00:00:00.5' + g * interval '1 hour 1.25 second', "
                 "timestamptz '2024-06-30 23:59:59+02' + g * interval '1 day' FROM generate_series(1, 60) g;"
                 "DROP TABLE IF EXISTS lake_canary; CREATE TABLE lake_canary (id int PRIMARY KEY, ts timestamptz NOT NULL);"
                 "INSERT INTO lake_canary VALUES (1, now())")
    properties = postgres_connector_properties(stack_dir, postgres.port, SERVER, "public.lake_orders,public.lake_canary",
                                               slot="lake_slot")
    for engine_only in ("name", "offset.storage", "offset.storage.file.filename", "offset.flush.interval.ms"):
        properties.pop(engine_only)
    properties["heartbeat.interval.ms"] = "0"  # no batch without a change: the rerun test knows the next batch's id
    worker = ConnectWorker(stack_dir / "lake-connect", kafka.bootstrap, {SERVER: properties})
    worker.start()
    root = stack_dir / "lake-tables"
    job = ApplyJob(stack_dir / "lake-apply", kafka.bootstrap, rf"{SERVER}\..*|__debezium-heartbeat\.{SERVER}",
                   f"delta:{root}", query_name=QUERY)
    job.start()
    yield worker, job, root
    job.stop()
    worker.stop()
    postgres.drop_slot("lake_slot")


def source_rows(postgres) -> dict[int, tuple[str, ...]]:
    lines = postgres.sql(f"SELECT {COLUMNS} FROM lake_orders").splitlines()
    return {int(line.split("|")[0]): tuple(line.split("|")[1:]) for line in lines}


def _text(value) -> str:
    if isinstance(value, dt.datetime):
        return (value.astimezone(dt.UTC) if value.tzinfo else value).strftime("%Y-%m-%d %H:%M:%S.%f")
    return "" if value is None else str(value)


def delta_rows(root: Path) -> dict[int, tuple[str, ...]]:
    from deltalake import DeltaTable

    if not (root / TABLE_ID / "_delta_log").is_dir():
        return {}
    rows = DeltaTable(str(root / TABLE_ID)).to_pyarrow_table().to_pylist()
    return {row["id"]: tuple(_text(row[name]) for name in ("note", "qty", "price", "born", "seen", "at")) for row in rows}


def in_sync(postgres, root: Path, what: str = "the Delta table to equal the source") -> None:
    try:
        wait_for(lambda: delta_rows(root) == source_rows(postgres), 240, what, interval=1)
    except StackError:
        have, want = delta_rows(root), source_rows(postgres)
        assert {k: v for k, v in have.items() if want.get(k) != v} == {k: v for k, v in want.items() if have.get(k) != v}


def counter(job: ApplyJob, name: str) -> float:
    """The counter of the one source table the job applies (its counts are kept by table)."""
    return value(parse(job.metrics()), name, query=QUERY, server=SERVER, table=TABLE_ID)


def test_the_delta_table_holds_the_source_rows_typed(lake, postgres) -> None:
    worker, job, root = lake
    postgres.sql("UPDATE lake_orders SET qty = qty + 1, price = price * 2 WHERE id % 3 = 0; DELETE FROM lake_orders WHERE id > 55;"
                 "INSERT INTO lake_orders VALUES (100, 'late', -5, 123456789.99, '1999-12-31', '2000-01-01 00:00:00.000001',"
                 " '2000-01-01 00:00:00.000001+05:30')")
    in_sync(postgres, root)
    from deltalake import DeltaTable

    table = DeltaTable(str(root / TABLE_ID))
    fields = {f.name: str(f.type) for f in table.schema().fields}
    assert [fields[n] for n in ("id", "qty", "price", "born", "seen", "at")] == [
        'PrimitiveType("integer")', 'PrimitiveType("long")', 'PrimitiveType("decimal(12,2)")',
        'PrimitiveType("date")', 'PrimitiveType("timestamp_ntz")', 'PrimitiveType("timestamp")']
    newest = max(r["_cdc_commit_time"] for r in table.to_pyarrow_table().to_pylist())
    state = DeltaLog(str(root / TABLE_ID), "_cdc_commit_time").read()
    assert state.newest_commit_time == newest.replace(microsecond=newest.microsecond // 1000 * 1000).timestamp()  # stats: ms
    assert state.version == table.version()


def _records(bootstrap: str, topic: str) -> list[tuple[bytes, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lake-reader", "enable.auto.commit": False})
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    consumer.assign([TopicPartition(topic, 0, low)])
    found: list[tuple[bytes, bytes]] = []
    while len(found) < high - low:
        message = consumer.poll(5)
        if message is not None and not message.error():
            found.append((message.key(), message.value()))
    consumer.close()
    return found


def test_redelivered_changes_are_duplicates_and_a_deleted_row_stays_deleted(lake, postgres, kafka) -> None:
    worker, job, root = lake
    in_sync(postgres, root)
    before = wait_for(lambda: (n := counter(job, "cdcwatch_spark_duplicates_total")) is not None and (n,), 60,
                      "the first batch's progress")[0]
    replay = [(key, value_) for key, value_ in _records(kafka.bootstrap, TOPIC)
              if value_ is not None and json.loads(key)["payload"]["id"] in (56, 57, 3)]  # deleted and updated rows
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for key, value_ in replay:
        producer.produce(TOPIC, key=key, value=value_)
    producer.flush(10)
    wait_for(lambda: counter(job, "cdcwatch_spark_duplicates_total") == before + len(replay), 120,
             f"{len(replay)} duplicates counted", interval=1)
    assert delta_rows(root) == source_rows(postgres) and 56 not in delta_rows(root)
    assert counter(job, "cdcwatch_spark_stale_events_total") == 0


def _txn_versions(table: Path) -> list[int]:
    """The idempotent-write versions of every commit of a Delta table, from its log."""
    versions = []
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action and action["txn"]["appId"] == QUERY:
                versions.append(action["txn"]["version"])
    return versions


def test_a_batch_run_again_after_its_writes_is_applied_once(lake, postgres) -> None:
    worker, job, root = lake
    in_sync(postgres, root)
    checkpoint = job.dir / "checkpoint"

    def latest(log: str) -> int:
        return max((int(f.name) for f in (checkpoint / log).iterdir() if f.name.isdigit()), default=-1)

    wait_for(lambda: latest("offsets") == latest("commits"), 60, "the job to have committed its last batch")
    failed = latest("offsets") + 1
    trap = checkpoint / "commits" / str(failed)
    trap.write_text("")  # the batch's commit finds its file there: it dies after its writes, before its checkpoint
    postgres.sql("UPDATE lake_orders SET note = 'again' WHERE id <= 10")
    wait_for(lambda: job.process is not None and job.process.poll() is not None, 120, "the job to fail at its commit")
    assert failed in _txn_versions(root / "_cdcwatch" / "applied") and latest("offsets") == failed
    trap.unlink()
    job.start()
    wait_for(lambda: latest("commits") >= failed, 120, f"the restarted job to run batch {failed} again")
    in_sync(postgres, root, "the Delta table to equal the source after the rerun")
    assert f"batch {failed} ran before" in job.log.read_text()
    for table in (root / TABLE_ID, root / "_cdcwatch" / "applied"):
        versions = _txn_versions(table)
        assert versions.count(failed) == 1, (table, versions)
    # the restarted job reports the batch's counts as its first run wrote them: 10 applied, none duplicate
    wait_for(lambda: counter(job, "cdcwatch_spark_changes_applied_total") == 10, 60, "the rerun batch's counts")
    assert counter(job, "cdcwatch_spark_duplicates_total") == 0


def test_deletes_alone_in_the_first_batch_after_a_restart_delete(lake, postgres) -> None:
    worker, job, root = lake
    in_sync(postgres, root)
    job.stop()
    postgres.sql("DELETE FROM lake_orders WHERE id IN (1, 2)")  # the restarted job's first batch: no row image
    job.start()
    in_sync(postgres, root, "the deletes applied")
    assert not {1, 2} & delta_rows(root).keys()


def test_the_canary_lands_in_its_delta_table_and_is_counted_apart(lake, postgres) -> None:
    from tests.unit.test_delta_collector import scrape

    worker, job, root = lake
    in_sync(postgres, root)
    canary_table = "postgres.public.lake_canary"

    def canary_applied() -> float | None:
        return value(parse(job.metrics()), "cdcwatch_spark_changes_applied_total", query=QUERY, server=SERVER,
                     table=canary_table)

    # counts are recorded with their batch's progress, after its writes: once a progress found nothing left to read
    # in the canary's topic, every canary change read is counted (none since a restart of the job: no series yet)
    wait_for(lambda: value(parse(job.metrics()), "cdcwatch_spark_source_offsets_behind_latest", query=QUERY,
                           topic=f"{SERVER}.public.lake_canary") == 0, 60, "the job to have read the canary's topic")
    canary_before = canary_applied() or 0
    written = postgres.sql("UPDATE lake_canary SET ts = clock_timestamp() RETURNING "
                           "to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS')").splitlines()[0]  # then its tag
    landed = dt.datetime.strptime(written, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=dt.UTC).timestamp()  # stats: ms
    text = (f"canary:\n  - name: lake\n    server: {SERVER}\n    interval_seconds: 10\n"
            f"    source: {{engine: postgres, port: {postgres.port}, user: postgres, password: postgres, "
            f"table: public.lake_canary}}\n"
            f"    target: {{engine: delta, uri: {root / canary_table}}}\n")
    values = wait_for(lambda: (v := scrape(text)) and value(v, "cdcwatch_canary_target_timestamp_seconds",
                                                            target="lake") == landed and v,
                      120, "the canary's new time in its Delta table", interval=1)
    assert value(values, "cdcwatch_canary_source_timestamp_seconds", target="lake") >= landed
    wait_for(lambda: canary_applied() == canary_before + 1, 60, "the canary's change counted under its own table")


def test_the_reconciliation_job_raises_no_false_alarm_under_live_traffic_and_finds_a_write_behind_its_back(
        lake, postgres) -> None:
    """`cdcwatch-reconcile` compares the source with the job's Delta table while changes flow, its freshness gate
    read from the job's listener: nothing is ever confirmed diverged; a row deleted from the Delta table behind the
    job's back (between two batches) is confirmed missing, and agrees again once the source changes it."""
    from deltalake import DeltaTable

    from tests.integration.test_spark_reconcile import KINDS, diverged

    worker, job, root = lake
    in_sync(postgres, root)
    postgres.sql("INSERT INTO lake_orders SELECT g, 'live ' || g, g, g, '2020-01-01', '2020-01-01', now() "
                 "FROM generate_series(200, 260) g ON CONFLICT (id) DO NOTHING")
    source = {"engine": "postgres", "port": postgres.port, "user": "postgres", "table": "public.lake_orders",
              "rows_per_second": 1_000_000}
    checker = ReconcileJob(job.dir.parent / "lake-reconcile", [{
        "name": "lake", "source": source, "target": {"engine": "delta", "uri": str(root / TABLE_ID)}, "chunk_rows": 10,
        "settle_seconds": 2, "confirm_rechecks": 2, "pass_interval_seconds": 0, "freshness_url": job.metrics_url,
        "freshness_labels": {"server": SERVER}}])
    stop, paused, errors = threading.Event(), threading.Event(), []

    def traffic() -> None:  # about 10 updates a second on rows 200-260, never two at once with the check below
        generator = random.Random(52)
        try:
            while not stop.wait(0.1):
                if not paused.is_set():
                    key = generator.randint(200, 260)
                    postgres.sql(f"UPDATE lake_orders SET qty = qty + 1, at = now() WHERE id = {key}")
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    writer = threading.Thread(target=traffic, daemon=True)
    checker.start()
    writer.start()
    try:
        seen: list[dict] = []
        passes: set[float] = set()
        started = time.monotonic()

        def checked_under_traffic() -> bool:  # at least 45 s and two whole passes: never a confirmed divergence
            values = parse(checker.metrics())
            seen.append(values)
            passes.update({value(values, "cdcwatch_reconcile_last_pass_timestamp_seconds", target="lake")} - {None})
            alarm = diverged(values, "lake") not in (dict.fromkeys(KINDS, 0.0), dict.fromkeys(KINDS, None))
            return alarm or (len(passes) >= 3 and time.monotonic() - started >= 45)  # the first began before traffic

        wait_for(checked_under_traffic, 300, f"two passes under traffic (log {checker.log})", interval=0.5)
        assert diverged(seen[-1], "lake") == dict.fromkeys(KINDS, 0.0), f"a false alarm (log {checker.log})"
        assert max(value(v, "cdcwatch_reconcile_rows_suspect", target="lake") or 0 for v in seen) > 0, \
            "no change was ever in flight: the traffic did not test the confirmation"
        paused.set()
        time.sleep(0.2)
        in_sync(postgres, root, "the Delta table caught up before the write behind its back")
        DeltaTable(str(root / TABLE_ID)).delete("id = 5")
        paused.clear()
        wait_for(lambda: diverged(parse(checker.metrics()), "lake") == {"missing": 1.0, "extra": 0.0, "different": 0.0},
                 120, f"the deleted row confirmed missing (log {checker.log})", interval=0.5)
        postgres.sql("UPDATE lake_orders SET note = 'repaired' WHERE id = 5")
        wait_for(lambda: diverged(parse(checker.metrics()), "lake") == dict.fromkeys(KINDS, 0.0), 120,
                 "the repaired row agreeing again", interval=0.5)
        assert not errors, errors
    finally:
        stop.set()
        writer.join(10)
        checker.stop()
