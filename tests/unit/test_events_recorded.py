"""The change events recorded from a real Debezium 3.6.3 run decode to what was done to the databases."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from typing import Any

import pytest

from cdcwatch.events import ChangeEvent, Kind, Op, Snapshot, SourceSystem, TableId, decode
from tests.fixtures import RECORDED


def recorded(name: str) -> list[tuple[dict[str, Any], ChangeEvent]]:
    records = [json.loads(line) for line in (RECORDED / name).read_text(encoding="utf-8").splitlines() if line]
    return [(record, decode(record["key"], record["value"], record["destination"])) for record in records]


POSTGRES = recorded("postgres-events.jsonl")
MYSQL = recorded("mysql-events.jsonl")
CUSTOMERS = TableId("inventory", "public", "customers")
ORDERS = TableId("inventory", "public", "orders")
PRODUCTS = TableId("shop", None, "products")


def test_postgres_operations_per_table_are_what_the_run_did() -> None:
    counts = Counter((event.kind, event.op, event.table) for _, event in POSTGRES)
    assert counts == {
        (Kind.DATA, Op.READ, CUSTOMERS): 3,       # the first rows of the initial snapshot
        (Kind.DATA, Op.CREATE, CUSTOMERS): 16,    # ids 1005..1020
        (Kind.DATA, Op.UPDATE, CUSTOMERS): 10,    # ids 1..10 in one transaction
        (Kind.DATA, Op.DELETE, ORDERS): 5,
        (Kind.DATA, Op.DELETE, CUSTOMERS): 2,
        (Kind.TOMBSTONE, None, None): 7,          # one after each delete
    }


def test_postgres_events_read_by_hand() -> None:
    first = POSTGRES[0][1]
    assert (first.op, first.snapshot, first.key, first.server, first.system) == (
        Op.READ, Snapshot.FIRST, (("id", 1),), "pgsrv", SourceSystem.POSTGRES)
    assert first.position is not None and first.position.order == (26663816, 26663816)  # sequence [null,"26663816"]
    assert first.commit_time_ns == 1795304559075986000  # source.ts_ns
    assert first.emitted_time_ns == 1795304559292257517
    update = next(event for _, event in POSTGRES if event.op is Op.UPDATE)
    assert update.key == (("id", 1),) and update.source_transaction_id == "732"
    assert update.position is not None and update.position.order == (26667184, 26667240)
    assert str(update.position) == "lsn 0/196E8E8 (after commit 0/196E8B0)"
    delete = next(event for _, event in POSTGRES if event.op is Op.DELETE)
    assert (delete.table, delete.key, delete.commit_time_ns) == (ORDERS, (("id", 1),), 1795304602245602000)


def test_each_delete_is_followed_by_a_tombstone_with_its_key() -> None:
    for events in (POSTGRES, MYSQL):
        for (_, event), (_, after) in itertools.pairwise(events):
            if event.op is Op.DELETE:
                assert after.kind is Kind.TOMBSTONE and after.key == event.key


@pytest.mark.parametrize("events", [POSTGRES, MYSQL], ids=["postgres", "mysql"])
def test_positions_never_go_back_in_stream_order(events: list[tuple[dict[str, Any], ChangeEvent]]) -> None:
    positions = [event.position for _, event in events if event.position is not None]
    assert len(positions) > 20
    assert all(earlier <= later for earlier, later in itertools.pairwise(positions))


def test_mysql_schema_changes_and_rows() -> None:
    ddl = [event for _, event in MYSQL if event.kind is Kind.SCHEMA_CHANGE]
    assert len(ddl) == 11
    assert all(event.key is not None and event.key[0][0] == "databaseName" for event in ddl)
    alter = next(event for event in ddl if event.ddl and event.ddl.startswith("ALTER TABLE products"))
    assert (alter.table, alter.snapshot, alter.system) == (PRODUCTS, Snapshot.FALSE, SourceSystem.MYSQL)
    assert alter.position is not None and alter.position.order == (4, 1292, 1)
    rows = Counter((event.op, event.table) for _, event in MYSQL if event.kind is Kind.DATA)
    assert rows == {(Op.CREATE, PRODUCTS): 2, (Op.UPDATE, PRODUCTS): 5, (Op.DELETE, PRODUCTS): 2,
                    (Op.CREATE, TableId("shop", None, "customers2")): 2}
    update = next(event for _, event in MYSQL if event.op is Op.UPDATE and event.key == (("id", 3),))
    assert update.position is not None and str(update.position) == "binlog file #4 pos 805 row 2"
    # the binlog carries whole seconds: the commit time is exact to the second only
    assert update.commit_time_ns == 1795304939000000000


def test_identity_tells_redelivered_changes_apart_from_new_ones() -> None:
    seen: set[Any] = set()
    for record, event in POSTGRES:
        if event.is_row_change:
            assert event.identity not in seen
            seen.add(event.identity)
            again = decode(record["key"], record["value"], record["destination"])
            assert again.identity in seen and hash(again.identity) == hash(event.identity)
