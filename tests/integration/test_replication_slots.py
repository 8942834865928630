"""The postgres collector on a real PostgreSQL 15 with a real Debezium connector's replication slot.

While the connector streams, its slot is active and tied to the connector's `server`; once the
connector stops, writes make the retained WAL and the confirmed-flush lag grow while the slot's
last advance stays put; the database going down gives up 0 within the deadline, and back, up 1.
"""

from __future__ import annotations

import json

import pytest

from cdcwatch.events import decode
from devstack.debezium import DebeziumProcess, postgres_connector_properties
from devstack.procs import free_port, wait_for
from tests.integration.conftest import promtool_check, value

pytestmark = pytest.mark.integration

SLOT = "slotwatch_dbz"
MANUAL = "slotwatch_manual"
SERVER = "slotsrv"


def config(postgres) -> str:
    return (f"postgres:\n  - name: source\n    host: 127.0.0.1\n    port: {postgres.port}\n    timeout_seconds: 3\n"
            f"    slots: {{allow: ['slotwatch_.*']}}\n    slot_servers: {{{SLOT}: {SERVER}}}\n")


def streamed(connector: DebeziumProcess, key: tuple) -> bool:
    records = [json.loads(line) for line in connector.events_file.read_text(encoding="utf-8").splitlines() if line]
    return any(decode(r["key"], r["value"]).key == key for r in records if r["value"])


def slot_value(values, metric: str, slot: str = SLOT, **labels: str) -> float | None:
    return value(values, f"cdcwatch_postgres_replication_slot_{metric}", target="source", slot=slot, **labels)


def test_replication_slots_of_a_real_connector(postgres, stack_dir, serve_factory) -> None:
    postgres.sql("DROP TABLE IF EXISTS slot_items; CREATE TABLE slot_items (id int PRIMARY KEY, body text);"
                 "INSERT INTO slot_items VALUES (1, 'a');")
    postgres.sql(f"SELECT pg_create_logical_replication_slot('{MANUAL}', 'pgoutput')")
    postgres.sql("ALTER SYSTEM SET max_slot_wal_keep_size = '1GB'")  # ALTER SYSTEM runs outside a transaction
    postgres.sql("SELECT pg_reload_conf()")
    state = stack_dir / "dbz-slots"
    properties = postgres_connector_properties(state, postgres.port, SERVER, "public.slot_items", slot=SLOT)
    # without heartbeats a caught-up connector confirms nothing more, and the slot never releases its WAL
    properties["heartbeat.interval.ms"] = "500"
    connector = DebeziumProcess(state, free_port(), properties)
    connector.start()
    serve = serve_factory(config(postgres))
    try:
        wait_for(lambda: slot_value(serve.scrape(), "active", server=SERVER) == 1, 60, "the connector's slot to be active")
        values = serve.scrape()
        assert value(values, "cdcwatch_up", collector="postgres", target="source") == 1
        assert value(values, "cdcwatch_postgres_replication_slots", target="source") == 2
        assert slot_value(values, "active", plugin="pgoutput", slot_type="logical", database="postgres") == 1
        assert slot_value(values, "wal_status", wal_status="reserved") == 1
        assert slot_value(values, "wal_status", wal_status="lost") == 0
        assert 0.5 * 1024**3 < slot_value(values, "safe_wal_size_bytes") < 2 * 1024**3  # max_slot_wal_keep_size 1GB
        assert slot_value(values, "active", slot=MANUAL, server="") == 0
        # a streamed change makes the engine store a post-snapshot offset; stopped before that, it would
        # snapshot again on restart, and its streaming would then never confirm the skipped backlog
        postgres.sql("INSERT INTO slot_items VALUES (0, 'streamed')")
        wait_for(lambda: streamed(connector, (("id", 0),)), 60, "the streamed change")
    finally:
        connector.stop()

    wait_for(lambda: slot_value(serve.scrape(), "active") == 0, 30, "the slot to be released")
    before = serve.scrape()
    start_lsn = postgres.sql("SELECT pg_current_wal_lsn()")
    postgres.sql("INSERT INTO slot_items SELECT g, repeat('x', 200) FROM generate_series(2, 20001) g")
    written = int(postgres.sql(f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{start_lsn}')"))
    after = serve.scrape()
    grown = slot_value(after, "retained_wal_bytes") - slot_value(before, "retained_wal_bytes")
    # everything the insert wrote stays for the stopped connector (plus what the server wrote meanwhile)
    assert written > 1024 * 1024
    assert written <= grown <= written + 256 * 1024
    assert slot_value(after, "confirmed_flush_lag_bytes") - slot_value(before, "confirmed_flush_lag_bytes") == grown
    assert slot_value(after, "last_advance_timestamp_seconds") == slot_value(before, "last_advance_timestamp_seconds")

    # the connector comes back, streams the backlog and confirms it: the slot releases the WAL
    connector.start()
    try:
        def released() -> bool:
            postgres.sql("CHECKPOINT")  # restart_lsn moves at the next running-xacts record; a checkpoint writes one
            return slot_value(serve.scrape(), "retained_wal_bytes") < slot_value(after, "retained_wal_bytes") - written / 2
        wait_for(released, 90, f"the slot to release the WAL the connector confirmed (log {connector.log})", interval=1)
        values = serve.scrape()
        assert slot_value(values, "active") == 1
        assert slot_value(values, "last_advance_timestamp_seconds") > slot_value(after, "last_advance_timestamp_seconds")
        promtool_check(serve.text())
    finally:
        connector.stop()

    postgres.stop()
    try:
        values, took = serve.timed_scrape()
        assert value(values, "cdcwatch_up", collector="postgres", target="source") == 0
        assert took < 3 + 1.5
    finally:
        postgres.start()
    wait_for(lambda: value(serve.scrape(), "cdcwatch_up", collector="postgres", target="source") == 1, 30,
             "the source to be back")
    postgres.sql(f"SELECT pg_drop_replication_slot('{MANUAL}'); SELECT pg_drop_replication_slot('{SLOT}');")
    postgres.sql("ALTER SYSTEM RESET max_slot_wal_keep_size")
    postgres.sql("SELECT pg_reload_conf()")
