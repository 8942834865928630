"""The real Debezium PostgreSQL connector, watched through `cdcwatch serve` with both JMX backends.

One connector's life in order: a snapshot long enough to observe (running, rows scanned per
table), completed, streaming counters equal to the changes made, kill -9 (up 0 within the
deadline), SIGSTOP (a hung JVM: still within the deadline), restart (up 1 again).
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time

import pytest

from devstack.configs import exporter_config, jmx_target
from devstack.debezium import DebeziumProcess, postgres_connector_properties
from devstack.procs import free_port, wait_for
from tests.integration.conftest import process_start_time, value

pytestmark = pytest.mark.integration

ORDERS = 30000
CUSTOMERS = 120
JPYPE_TIMEOUT = 3.0
JMXQUERY_TIMEOUT = 20.0
SIGNALS = "debezium_signal"


@pytest.fixture(scope="module")
def connector(postgres, stack_dir):
    postgres.sql(f"DROP TABLE IF EXISTS orders, customers, {SIGNALS};"
                 f"CREATE TABLE {SIGNALS} (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048));"
                 "CREATE TABLE customers (id int PRIMARY KEY, name text);"
                 "CREATE TABLE orders (id int PRIMARY KEY, amount int);"
                 f"INSERT INTO customers SELECT g, 'c' || g FROM generate_series(1, {CUSTOMERS}) g;"
                 f"INSERT INTO orders SELECT g, g % 100 FROM generate_series(1, {ORDERS}) g;")
    state = stack_dir / "dbz-pg"
    # the signal table captured too, as a deployment that starts incremental snapshots has it
    props = postgres_connector_properties(state, postgres.port, "pgsrv", f"public.customers,public.orders,public.{SIGNALS}",
                                          slot="pgsrv_slot")
    props["signal.data.collection"] = f"public.{SIGNALS}"
    # ~30 batches of 1024 rows with a pause after each: the snapshot runs for several seconds
    process = DebeziumProcess(state, free_port(), props, batch_pause_seconds=0.25)
    process.start()
    yield process
    process.stop()
    postgres.drop_slot("pgsrv_slot")


@pytest.fixture(scope="module")
def exporter(connector, stack_dir):
    from tests.integration.conftest import Serve

    serve = Serve(exporter_config(debezium=[
        jmx_target("pg-jpype", connector.jmx_port, timeout_seconds=JPYPE_TIMEOUT, labels={"env": "test"}),
        {"name": "pg-jmxquery", "timeout_seconds": JMXQUERY_TIMEOUT,
         "jmx": {"url": connector.jmx_url, "backend": "jmxquery"}}]), stack_dir)
    yield serve
    serve.stop()


def snapshot_state(values, target="pg-jpype"):
    return {dict(ls)["state"]: v for (n, ls), v in values.items()
            if n == "cdcwatch_debezium_snapshot_state" and dict(ls)["target"] == target}


def test_snapshot_running_then_completed_with_rows_per_table(exporter):
    # Debezium reports a table's rows every 10,000 rows and when the table completes: while `orders`
    # is still being read, the finished `customers` table already shows all its rows.
    def running_with_rows():
        values = exporter.scrape()
        rows = value(values, "cdcwatch_debezium_snapshot_rows_scanned_total", target="pg-jpype", table="public.customers")
        return values if snapshot_state(values).get("running") == 1 and rows else None

    during = wait_for(running_with_rows, 60, "the snapshot to be seen running with rows scanned", interval=0.3)
    assert value(during, "cdcwatch_debezium_snapshot_state", target="pg-jpype", state="completed") == 0
    assert value(during, "cdcwatch_debezium_snapshot_rows_scanned_total", target="pg-jpype", table="public.customers") == CUSTOMERS
    assert (value(during, "cdcwatch_debezium_snapshot_rows_scanned_total", target="pg-jpype", table="public.orders") or 0) < ORDERS
    assert value(during, "cdcwatch_up", target="pg-jpype") == 1

    after = wait_for(lambda: (v := exporter.scrape()) and snapshot_state(v).get("completed") == 1 and v, 120,
                     "the snapshot to complete")
    assert value(after, "cdcwatch_debezium_snapshot_rows_scanned_total", target="pg-jpype", table="public.orders") == ORDERS
    assert value(after, "cdcwatch_debezium_snapshot_rows_scanned_total", target="pg-jpype", table="public.customers") == CUSTOMERS
    assert value(after, "cdcwatch_debezium_snapshot_state", target="pg-jpype", state="running") == 0
    assert value(after, "cdcwatch_debezium_captured_tables", target="pg-jpype", context="snapshot") == 3
    # progress by tables (1 - remaining / total, server:cdcwatch_debezium_snapshot_tables_progress:ratio) reaches 1:
    # the signal table, included but never copied, is not left over
    for target in ("pg-jpype", "pg-jmxquery"):
        assert value(after, "cdcwatch_debezium_snapshot_tables", target=target, context="snapshot") == 3
        assert value(after, "cdcwatch_debezium_snapshot_remaining_tables", target=target, context="snapshot") == 0
    assert value(during, "cdcwatch_debezium_snapshot_remaining_tables", target="pg-jpype", context="snapshot") >= 1
    labels = dict(next(ls for (n, ls) in after if n == "cdcwatch_debezium_snapshot_state" and dict(ls)["target"] == "pg-jpype"))
    assert {k: labels[k] for k in ("plugin", "server", "context", "env")} == \
        {"plugin": "postgres", "server": "pgsrv", "context": "snapshot", "env": "test"}


def test_streaming_counters_equal_the_changes_made(exporter, postgres):
    wait_for(lambda: value(exporter.scrape(), "cdcwatch_debezium_connected", target="pg-jpype") == 1, 60, "streaming")
    inserts, updates, deletes = 9, 5, 3
    for i in range(inserts):
        postgres.sql(f"INSERT INTO customers VALUES ({100000 + i}, 'new')")
    for i in range(updates):
        postgres.sql(f"UPDATE customers SET name = 'changed' WHERE id = {i + 1}")
    postgres.sql(f"DELETE FROM customers WHERE id IN ({', '.join(str(100000 + i) for i in range(deletes))})")

    def counts(target):
        values = exporter.scrape()
        return {op: value(values, "cdcwatch_debezium_events_by_operation_total", target=target, context="streaming", operation=op)
                for op in ("create", "update", "delete")}

    expected = {"create": inserts, "update": updates, "delete": deletes}
    wait_for(lambda: counts("pg-jpype") == expected, 60, f"streaming counters to reach {expected}")
    values = exporter.scrape()
    assert value(values, "cdcwatch_debezium_events_seen_total", target="pg-jpype", context="streaming") == inserts + updates + deletes
    assert value(values, "cdcwatch_debezium_connected", target="pg-jpype") == 1
    lag = value(values, "cdcwatch_debezium_lag_behind_source_seconds", target="pg-jpype")
    assert lag is not None and 0 <= lag < 60
    assert value(values, "cdcwatch_debezium_lag_behind_source_percentile_seconds", target="pg-jpype", percentile="99") is not None
    assert value(values, "cdcwatch_debezium_source_position", target="pg-jpype", key="lsn") > 0
    assert value(values, "cdcwatch_debezium_committed_transactions_total", target="pg-jpype") >= inserts + updates + 1


def test_jmxquery_backend_reads_the_same_counters_but_no_maps_or_arrays(exporter, connector):
    values = exporter.scrape()
    assert value(values, "cdcwatch_up", target="pg-jmxquery") == 1
    for op in ("create", "update", "delete"):
        assert value(values, "cdcwatch_debezium_events_by_operation_total", target="pg-jmxquery", context="streaming", operation=op) == \
            value(values, "cdcwatch_debezium_events_by_operation_total", target="pg-jpype", context="streaming", operation=op)
    assert value(values, "cdcwatch_debezium_connected", target="pg-jmxquery") == 1
    assert value(values, "cdcwatch_debezium_snapshot_state", target="pg-jmxquery", state="completed") == 1
    # documented limits: Map/TabularData and String[] values do not come through jmxquery
    assert value(values, "cdcwatch_debezium_snapshot_rows_scanned_total", target="pg-jmxquery", table="public.orders") is None
    assert value(values, "cdcwatch_debezium_captured_tables", target="pg-jmxquery", context="streaming") is None
    assert value(values, "cdcwatch_debezium_source_position", target="pg-jmxquery", key="lsn") is None
    assert value(values, "cdcwatch_debezium_captured_tables", target="pg-jpype", context="streaming") == 3
    # the JVM's start time, read in the same jmxquery run as the connector beans
    started = value(values, "cdcwatch_debezium_jvm_start_time_seconds", target="pg-jmxquery")
    assert started == value(values, "cdcwatch_debezium_jvm_start_time_seconds", target="pg-jpype")
    assert process_start_time(connector.server.pid) - 0.02 <= started <= time.time()  # the engine's JVM starts in it


def test_promtool_check_metrics_passes_on_a_real_scrape(exporter):
    text = exporter.text()
    assert "cdcwatch_debezium_events_seen_total" in text
    done = subprocess.run([shutil.which("promtool") or "promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_check_command_exits_0_with_key_figures(exporter):
    import sys

    done = subprocess.run([sys.executable, "-m", "cdcwatch.cli", "check", "--config", str(exporter.config)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines()[1:]}
    assert "yes" in rows["pg-jpype"] and "connectors=1" in rows["pg-jpype"] and "connected=1/1" in rows["pg-jpype"]
    assert "yes" in rows["pg-jmxquery"]


def test_hung_jvm_still_answers_within_deadline(exporter, connector):
    connector.signal(signal.SIGSTOP)
    try:
        values, took = exporter.timed_scrape()
        assert value(values, "cdcwatch_up", target="pg-jpype") == 0
        assert took < JMXQUERY_TIMEOUT + 3
    finally:
        connector.signal(signal.SIGCONT)
    wait_for(lambda: value(exporter.scrape(), "cdcwatch_up", target="pg-jpype") == 1, 60, "recovery after SIGCONT")


def test_killed_jvm_is_up_0_within_deadline_then_recovers_on_restart(exporter, connector, postgres):
    # streaming after a completed snapshot, with an offset flushed after a streamed change: a restart skips the snapshot
    wait_for(lambda: (v := exporter.scrape()) and snapshot_state(v).get("completed") == 1
             and value(v, "cdcwatch_debezium_connected", target="pg-jpype") == 1, 180, "streaming after the snapshot")
    offsets = connector.dir / "offsets.dat"
    changed = time.time()
    postgres.sql(f"INSERT INTO orders VALUES ({ORDERS + 1}, 1)")  # the module's tables are created by its fixture
    wait_for(lambda: offsets.stat().st_mtime > changed, 30, "an offset flush after a streamed change")
    logged_before = len(exporter.log.read_text())
    first_start = value(exporter.scrape(), "cdcwatch_debezium_jvm_start_time_seconds", target="pg-jpype")
    connector.kill()
    values, took = exporter.timed_scrape()
    assert value(values, "cdcwatch_up", target="pg-jpype") == 0
    assert value(values, "cdcwatch_up", target="pg-jmxquery") == 0
    assert value(values, "cdcwatch_scrape_errors_total", target="pg-jpype") >= 1
    assert value(values, "cdcwatch_debezium_connected", target="pg-jpype") is None  # no stale series
    assert took < JMXQUERY_TIMEOUT + 3
    assert exporter.process.poll() is None  # the exporter never exits

    restarted = time.time()
    connector.start()
    recovered = wait_for(lambda: (v := exporter.scrape()) and value(v, "cdcwatch_up", target="pg-jpype") == 1
                         and value(v, "cdcwatch_debezium_connected", target="pg-jpype") == 1 and v, 90, "recovery after restart")
    # after a restart from stored offsets the snapshot is skipped and counters start again from 0
    assert value(recovered, "cdcwatch_debezium_snapshot_state", target="pg-jpype", state="skipped") == 1
    assert value(recovered, "cdcwatch_up", target="pg-jmxquery") == 1
    # a new JVM: a new start time, after the test started it
    assert first_start < restarted <= value(recovered, "cdcwatch_debezium_jvm_start_time_seconds", target="pg-jpype") <= time.time()
    # a line when it went down and one when it came back, not one per failed scrape: the lines alternate (a JVM
    # still starting may answer once and fail again), from down to up
    log = exporter.log.read_text()[logged_before:]
    turns = re.findall(r"target pg-jpype \(debezium\) is (down|up again)", log)
    assert turns and turns[0] == "down" and turns[-1] == "up again", turns
    assert all(turn != following for turn, following in zip(turns, turns[1:], strict=False)), turns

