"""Every event a real Debezium PostgreSQL connector emits decodes, in every kind the recorded fixtures lack.

The connector runs with transaction metadata, heartbeats, truncate and logical messages enabled.
Two transactions interleave: A writes first but commits after B, so A's first change has a lower
LSN than B's yet streams after it. Positions must still never go back in stream order, and END
events must count the changes of their transaction.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from cdcwatch.events import ChangeEvent, Kind, Op, decode
from devstack.debezium import DebeziumProcess, postgres_connector_properties
from devstack.procs import free_port, wait_for

pytestmark = pytest.mark.integration

SERVER = "evsrv"
LOCK = 4242


class Session:
    """An open psql session, to hold a lock or a transaction while other sessions work."""

    def __init__(self, postgres, statements: str = "") -> None:
        self.process = subprocess.Popen(
            ["psql", "-h", "127.0.0.1", "-p", str(postgres.port), "-U", "postgres", "-d", "postgres", "-v",
             "ON_ERROR_STOP=1", "-q"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, start_new_session=True)
        if statements:
            self.send(statements)

    def send(self, statements: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(statements + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        if self.process.wait(30) != 0:
            raise AssertionError(f"psql session failed: {self.process.stderr.read() if self.process.stderr else ''}")


def decoded(events_file: Path) -> list[tuple[str, ChangeEvent]]:
    lines = events_file.read_text(encoding="utf-8").splitlines() if events_file.exists() else []
    records = [json.loads(line) for line in lines if line]
    return [(r["destination"], decode(r["key"], r["value"], r["destination"])) for r in records]


def test_live_events_decode_with_positions_in_stream_order(postgres, stack_dir) -> None:
    postgres.sql("DROP TABLE IF EXISTS accounts; CREATE TABLE accounts (id int PRIMARY KEY, balance int);"
                 "INSERT INTO accounts VALUES (1, 10), (2, 20);")
    state = stack_dir / "dbz-events"
    properties = postgres_connector_properties(state, postgres.port, SERVER, "public.accounts", slot="events_slot")
    properties.update({"provide.transaction.metadata": "true", "heartbeat.interval.ms": "200",
                       "skipped.operations": "none"})
    connector = DebeziumProcess(state, free_port(), properties)
    started_ns = time.time_ns()
    connector.start()
    try:
        wait_for(lambda: sum(e.op is Op.READ for _, e in decoded(connector.events_file)) == 2, 60, "snapshot reads")

        # A inserts 100, then waits for a lock the test holds; B inserts 200 and commits; then A commits
        holder = Session(postgres, f"SELECT pg_advisory_lock({LOCK});")
        wait_for(lambda: postgres.sql(f"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = {LOCK}"
                                      " AND granted") == "1", 30, "the test holding the advisory lock")
        writer_a = Session(postgres, "BEGIN; INSERT INTO accounts VALUES (100, 1);"
                                     f"SELECT pg_advisory_lock({LOCK}); INSERT INTO accounts VALUES (101, 1); COMMIT;")
        wait_for(lambda: postgres.sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                      " AND query LIKE '%pg_advisory_lock%'") == "1", 30, "transaction A waiting")
        postgres.sql("INSERT INTO accounts VALUES (200, 1)")
        holder.close()
        writer_a.close()

        postgres.sql("UPDATE accounts SET balance = balance + 1 WHERE id IN (1, 2);"
                     "DELETE FROM accounts WHERE id = 200;"
                     "SELECT pg_logical_emit_message(true, 'cdcwatch', 'in a transaction');"
                     "SELECT pg_logical_emit_message(false, 'cdcwatch', 'outside any transaction');")
        postgres.sql("TRUNCATE accounts")
        postgres.sql("INSERT INTO accounts VALUES (999, 0)")  # a next transaction, so the previous END is emitted
        wait_for(lambda: any(e.key == (("id", 999),) for _, e in decoded(connector.events_file)), 60, "the last insert")
        wait_for(lambda: any(e.kind is Kind.HEARTBEAT for _, e in decoded(connector.events_file)), 30, "a heartbeat")
    finally:
        connector.stop()
        postgres.drop_slot("events_slot")

    events = decoded(connector.events_file)
    kinds = Counter(event.kind for _, event in events)
    assert {Kind.DATA, Kind.TOMBSTONE, Kind.TRANSACTION, Kind.HEARTBEAT} <= set(kinds)
    assert {Op.READ, Op.CREATE, Op.UPDATE, Op.DELETE, Op.TRUNCATE, Op.MESSAGE} <= {e.op for _, e in events}

    heartbeat = next(event for _, event in events if event.kind is Kind.HEARTBEAT)
    assert heartbeat.server == SERVER and heartbeat.emitted_time_ns is not None
    assert started_ns - 10**9 <= heartbeat.emitted_time_ns <= time.time_ns()

    data = [event for _, event in events if event.kind is Kind.DATA and event.position is not None]
    assert all(event.server == SERVER for event in data)
    assert all(started_ns - 10**9 <= (event.commit_time_ns or 0) <= time.time_ns() for event in data)
    # a non-transactional logical message streams the moment it is written, ahead of the transaction
    # around it: it is outside the commit order (and has no transaction id); every other change is in it
    ordered = [event for event in data if event.source_transaction_id is not None]
    assert len(ordered) >= len(data) - 1
    assert all(earlier.position <= later.position for earlier, later in itertools.pairwise(ordered))

    by_id = {event.key[0][1]: event for event in data if event.op is Op.CREATE and event.key}
    a_first, a_second, b = by_id[100], by_id[101], by_id[200]
    assert a_first.position.order[1] < b.position.order[1], "A's first change was written to WAL before B's"
    assert data.index(b) < data.index(a_first), "B committed first, so it streamed first"
    assert b.position < a_first.position < a_second.position

    streamed = [event for event in ordered if not event.is_snapshot]
    assert all(event.transaction is not None for event in streamed)
    ends = [event.boundary for _, event in events if event.kind is Kind.TRANSACTION and event.boundary.status == "END"]
    assert len(ends) >= 4
    for end in ends:
        # PostgreSQL transaction ids read `txId:lsn`, the lsn of the event that carries them
        members = [event for event in streamed if event.source_transaction_id == end.id.split(":")[0]]
        assert end.event_count == len(members) == sum(count for _, count in end.data_collections)
