"""The postgres collector on a real PostgreSQL 15 with a real Debezium connector's replication slot.

While the connector streams, its slot is active and tied to the connector's `server`; once the
connector stops, writes make the retained WAL and the confirmed-flush lag grow while the slot's
last advance stays put; back, it confirms past WAL no captured change follows only through its heartbeat query (a
write to a captured table), and the slot releases the WAL; the database going down gives up 0 within the deadline,
and back, up 1.

The runway: the WAL position is checked against `pg_current_wal_lsn()` read by the test, and
safe_wal_size against the failure position the test computes from the slot's restart_lsn and
`max_slot_wal_keep_size`; then, while the test writes WAL at a steady rate into a stopped slot, the
generated rules on a real Prometheus must predict the moment PostgreSQL itself reports the slot
`unreserved`, and the critical runway alert must fire before it.
"""

from __future__ import annotations

import json
import threading
import time

import psycopg
import pytest

from cdcwatch.events import decode
from cdcwatch.mixin import MixinConfig
from cdcwatch.mixin.generate import rules_yaml
from cdcwatch.promapi import PrometheusApi
from devstack.configs import exporter_config, postgres_source
from devstack.debezium import DebeziumProcess, postgres_connector_properties
from devstack.procs import free_port, wait_for
from devstack.prometheus import PrometheusServer
from tests.integration.conftest import promtool_check, value

pytestmark = pytest.mark.integration

SLOT = "slotwatch_dbz"
MANUAL = "slotwatch_manual"
SERVER = "slotsrv"
RUNWAY_SLOT = "slotwatch_runway"
KEEP_MB = 128
CHUNK = 400_000
"""Bytes of WAL message the writer emits every 0.1 s: 4 MB a second."""
RUNWAY = "slot:cdcwatch_postgres_replication_slot_safe_wal_runway_seconds:deriv5m"
WAL_RATE = "target:cdcwatch_postgres_wal_position_bytes:deriv5m"
FAST = MixinConfig.model_validate({"durations": {"critical": "5s", "warning": "5s", "instant": "1s"}})


def config(postgres) -> str:
    return exporter_config(postgres=[postgres_source("source", postgres.port, timeout_seconds=3,
                                                     slots={"allow": ["slotwatch_.*"]}, slot_servers={SLOT: SERVER})])


def streamed(connector: DebeziumProcess, key: tuple) -> bool:
    records = [json.loads(line) for line in connector.events_file.read_text(encoding="utf-8").splitlines() if line]
    return any(decode(r["key"], r["value"]).key == key for r in records if r["value"])


def slot_value(values, metric: str, slot: str = SLOT, **labels: str) -> float | None:
    return value(values, f"cdcwatch_postgres_replication_slot_{metric}", target="source", slot=slot, **labels)


def test_replication_slots_of_a_real_connector(postgres, stack_dir, serve_factory) -> None:
    postgres.sql("DROP TABLE IF EXISTS slot_items, slot_heartbeat, slot_other;"
                 "CREATE TABLE slot_items (id int PRIMARY KEY, body text); INSERT INTO slot_items VALUES (1, 'a');"
                 "CREATE TABLE slot_heartbeat (id int PRIMARY KEY, ts timestamptz); INSERT INTO slot_heartbeat VALUES (1, now());"
                 "CREATE TABLE slot_other (id int)")
    postgres.sql(f"SELECT pg_create_logical_replication_slot('{MANUAL}', 'pgoutput')")
    postgres.sql("ALTER SYSTEM SET max_slot_wal_keep_size = '1GB'")  # ALTER SYSTEM runs outside a transaction
    postgres.sql("SELECT pg_reload_conf()")
    state = stack_dir / "dbz-slots"
    properties = postgres_connector_properties(state, postgres.port, SERVER, "public.slot_items,public.slot_heartbeat",
                                               slot=SLOT)
    # A connector confirms the position of the last change it streamed, no further: WAL that other tables (or
    # autovacuum) write after it stays in the slot until a captured table changes again. Debezium's remedy, a
    # heartbeat that writes a captured table, lets this one confirm past the WAL slot_other writes below.
    properties["heartbeat.interval.ms"] = "500"
    properties["heartbeat.action.query"] = "UPDATE slot_heartbeat SET ts = now() WHERE id = 1"
    connector = DebeziumProcess(state, free_port(), properties)
    connector.start()
    serve = serve_factory(config(postgres))
    try:
        # the slot exists once it is active; it is active during its creation too, and released again until the
        # snapshot ends and streaming starts, so the checks below wait for a streamed change
        wait_for(lambda: slot_value(serve.scrape(), "active", server=SERVER) == 1, 60, "the connector's slot to be active")
        # a streamed change makes the engine store a post-snapshot offset; stopped before that, it would
        # snapshot again on restart, and its streaming would then never confirm the skipped backlog
        postgres.sql("INSERT INTO slot_items VALUES (0, 'streamed')")
        wait_for(lambda: streamed(connector, (("id", 0),)), 60, "the streamed change")
        values = serve.scrape()
        assert value(values, "cdcwatch_up", collector="postgres", target="source") == 1
        assert value(values, "cdcwatch_postgres_replication_slots", target="source") == 2
        assert slot_value(values, "active", plugin="pgoutput", slot_type="logical", database="postgres") == 1
        assert slot_value(values, "wal_status", wal_status="reserved") == 1
        assert slot_value(values, "wal_status", wal_status="lost") == 0
        assert 0.5 * 1024**3 < slot_value(values, "safe_wal_size_bytes") < 2 * 1024**3  # max_slot_wal_keep_size 1GB
        assert slot_value(values, "active", slot=MANUAL, server="") == 0
    finally:
        connector.stop()

    wait_for(lambda: slot_value(serve.scrape(), "active") == 0, 30, "the slot to be released")
    before = serve.scrape()
    start_lsn = postgres.sql("SELECT pg_current_wal_lsn()")
    # a synchronous commit: pg_current_wal_lsn() (what was written) then holds the whole insert, not part of it
    postgres.sql("SET synchronous_commit = on;"
                 "INSERT INTO slot_items SELECT g, repeat('x', 200) FROM generate_series(2, 20001) g")
    written = int(postgres.sql(f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{start_lsn}')"))
    after = serve.scrape()
    grown = slot_value(after, "retained_wal_bytes") - slot_value(before, "retained_wal_bytes")
    # everything the insert wrote stays for the stopped connector (plus what the server wrote meanwhile)
    assert written > 1024 * 1024
    assert written <= grown <= written + 256 * 1024
    assert slot_value(after, "confirmed_flush_lag_bytes") - slot_value(before, "confirmed_flush_lag_bytes") == grown
    assert slot_value(after, "last_advance_timestamp_seconds") == slot_value(before, "last_advance_timestamp_seconds")

    # WAL no captured change follows (as autovacuum's ANALYZE of the table just filled writes it)
    postgres.sql("INSERT INTO slot_other VALUES (1)")
    # the connector comes back, streams the backlog and its heartbeats, and confirms them: the slot releases the WAL
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
    postgres.drop_slot(MANUAL)
    postgres.drop_slot(SLOT)
    postgres.sql("ALTER SYSTEM RESET max_slot_wal_keep_size")
    postgres.sql("SELECT pg_reload_conf()")


def _lsn(postgres, expression: str = "pg_current_wal_lsn()") -> int:
    return int(postgres.sql(f"SELECT pg_wal_lsn_diff({expression}, '0/0')::bigint"))


class WalWriter:
    """Writes WAL at a steady rate (a non-transactional logical message every 0.1 s) until stopped."""

    def __init__(self, port: int) -> None:
        self.connection = psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres",
                                          autocommit=True)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        due = time.monotonic()
        while not self.stop.is_set():
            self.connection.execute("SELECT pg_logical_emit_message(false, 'runway', repeat('x', %s))", (CHUNK,))
            due += 0.1
            self.stop.wait(max(due - time.monotonic(), 0))

    def __enter__(self) -> WalWriter:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)
        self.connection.close()


def test_wal_position_and_the_runway_of_a_stopped_slot(postgres, stack_dir, serve_factory) -> None:
    postgres.sql(f"ALTER SYSTEM SET max_slot_wal_keep_size = '{KEEP_MB}MB'")
    postgres.sql("SELECT pg_reload_conf()")
    postgres.sql(f"SELECT pg_create_logical_replication_slot('{RUNWAY_SLOT}', 'pgoutput')")
    prometheus = None
    try:
        serve = serve_factory(config(postgres))
        # nothing writes: the position is pg_current_wal_lsn() as the test reads it around the scrape
        before = _lsn(postgres)
        values = serve.scrape()
        after = _lsn(postgres)
        position = value(values, "cdcwatch_postgres_wal_position_bytes", target="source")
        assert before <= position <= after
        assert value(values, "cdcwatch_postgres_wal_directory_bytes", target="source") >= 16 * 1024 * 1024
        # safe_wal_size counts down to where PostgreSQL stops keeping the slot's WAL: restart_lsn's segment plus
        # max_slot_wal_keep_size in segments, plus one
        segment = int(postgres.sql("SELECT setting FROM pg_settings WHERE name = 'wal_segment_size'"))
        restart = _lsn(postgres, f"(SELECT restart_lsn FROM pg_replication_slots WHERE slot_name = '{RUNWAY_SLOT}')")
        fails_at = (restart // segment + KEEP_MB * 1024 * 1024 // segment + 1) * segment
        safe = slot_value(values, "safe_wal_size_bytes", slot=RUNWAY_SLOT)
        assert fails_at <= safe + position <= fails_at + (after - before)

        # the writer starts before Prometheus: every sample in its 5-minute windows is of the steady rate
        with WalWriter(postgres.port):
            written_from, started = _lsn(postgres), time.time()
            rules = stack_dir / "runway-rules.yml"
            rules.write_text(rules_yaml(FAST), encoding="utf-8")
            prometheus = PrometheusServer(stack_dir / "runway-prometheus", {"cdcwatch": [f"127.0.0.1:{serve.port}"]},
                                          [rules])
            prometheus.start()
            api = PrometheusApi(prometheus.url)
            selector = f'{{slot="{RUNWAY_SLOT}"}}'
            wait_for(lambda: api.query("count_over_time(cdcwatch_postgres_wal_position_bytes[5m]) >= 8"), 30,
                     "eight samples of the WAL position")
            # the recorded runway with the time of its evaluation: the moment the slot's WAL becomes removable
            [series] = api.get("/api/v1/query", query=f"{RUNWAY}{selector}[3s]")["result"]
            evaluated, runway = series["values"][-1][0], float(series["values"][-1][1])
            [rate] = api.query(WAL_RATE)
            # what the test wrote over the same time as the samples the rate is of (up to this query)
            written = (_lsn(postgres) - written_from) / (time.time() - started)
            assert 5 < runway < 60, runway

            fired_at = lost_at = None
            reserved_at = time.time()  # the start of the last poll that saw the slot's WAL still kept
            deadline = time.time() + runway + 30
            while lost_at is None and time.time() < deadline:
                polled = time.time()
                status = postgres.sql(f"SELECT wal_status FROM pg_replication_slots WHERE slot_name = '{RUNWAY_SLOT}'")
                if status in ("unreserved", "lost"):
                    lost_at = time.time()
                    break
                reserved_at = polled
                if fired_at is None and api.query(
                        f'ALERTS{{alertname="CdcPostgresSlotRunwayCritical", alertstate="firing", slot="{RUNWAY_SLOT}"}}'):
                    fired_at = time.time()
                time.sleep(0.1)
        assert lost_at is not None, "the slot never became unreserved"
        # the WAL rate the rules use is the rate the test wrote
        assert abs(float(rate["value"][1]) - written) <= 0.05 * written, (rate, written)
        # predicted within a scrape interval and a WAL writer round (the effect: tens of seconds); the loss came after
        # the last poll that saw the WAL kept began and before the poll that saw it lost ended, however long each took
        predicted = evaluated + runway
        assert reserved_at - 2.0 <= predicted <= lost_at + 2.0, (reserved_at - evaluated, lost_at - evaluated, runway)
        # the alert waits for the slot to hold more WAL than it has left, then for its `for`: still before the loss
        assert fired_at is not None and fired_at < lost_at, (fired_at, lost_at)
    finally:
        if prometheus is not None:
            prometheus.stop()
        postgres.drop_slot(RUNWAY_SLOT)
        postgres.sql("ALTER SYSTEM RESET max_slot_wal_keep_size")
        postgres.sql("SELECT pg_reload_conf()")


def estimates(values) -> dict[tuple[str, str], float]:
    return {(dict(labels)["server"], dict(labels)["table"]): v for (name, labels), v in values.items()
            if name == "cdcwatch_postgres_table_rows_estimate"}


def test_row_estimates_of_the_published_tables(postgres, serve_factory) -> None:
    """Exactly the tables of the publications allowed, keyed as Debezium keys RowsScanned, each against count(*):
    an analyzed table by its reltuples, a never-analyzed one (reltuples -1) by its live-row count."""
    postgres.sql("DROP PUBLICATION IF EXISTS est_pub; DROP PUBLICATION IF EXISTS est_other;"
                 "DROP TABLE IF EXISTS est_analyzed, est_fresh, est_unpublished;"
                 "CREATE TABLE est_analyzed (id int PRIMARY KEY); CREATE TABLE est_fresh (id int PRIMARY KEY);"
                 "CREATE TABLE est_unpublished (id int PRIMARY KEY);"
                 "INSERT INTO est_analyzed SELECT generate_series(1, 1234); INSERT INTO est_fresh SELECT generate_series(1, 567);"
                 "INSERT INTO est_unpublished SELECT generate_series(1, 89); ANALYZE est_analyzed;"
                 "CREATE PUBLICATION est_pub FOR TABLE est_analyzed, est_fresh; CREATE PUBLICATION est_other FOR TABLE est_fresh")
    try:
        assert postgres.sql("SELECT reltuples FROM pg_class WHERE relname = 'est_fresh'") == "-1"
        serve = serve_factory(exporter_config(postgres=[postgres_source(
            "source", postgres.port, timeout_seconds=3, publications={"allow": ["est_.*"], "deny": ["est_other"]},
            publication_servers={"est_pub": "estsrv"})]))
        counted = {("estsrv", f"public.{t}"): float(postgres.sql(f"SELECT count(*) FROM {t}"))
                   for t in ("est_analyzed", "est_fresh")}
        # the live-row count reaches the shared statistics within a second of the commit
        wait_for(lambda: estimates(serve.scrape()) == counted, 30, f"the row estimates {counted}")
        assert value(serve.scrape(), "cdcwatch_postgres_table_rows_estimate", table="public.est_fresh",
                     database="postgres") == 567
    finally:
        postgres.sql("DROP PUBLICATION IF EXISTS est_pub; DROP PUBLICATION IF EXISTS est_other;"
                     "DROP TABLE IF EXISTS est_analyzed, est_fresh, est_unpublished")
