"""Every example event in the seed documents decodes to what the document says it is.

Expectations are written by hand from each document's text. Where an example has a real typo
(not just an annotation), the case names the one replacement it needed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pytest

from cdcwatch.events import EventDecodeError, Kind, Op, Snapshot, SourceSystem, TableId, TransactionBlock, TransactionBoundary, decode
from tests.seed_examples import example_starts, seed_example, seed_text

YUGABYTE = "000_7f975adbc97f1617.txt"
SQLSERVER = "001_9efb98d9f9e3798f.txt"
POSTGRES = "002_e03e39008dc43f1c.txt"
TICDC = "003_7c7f64400a859d22.txt"
ORACLE = "004_581ffacaec7218a9.txt"

MS = 1_000_000  # ns per ms


def sqlserver_lsn(text: str) -> int:
    vlf, block, slot = (int(part, 16) for part in text.split(":"))
    return (vlf << 48) | (block << 16) | slot


@dataclass(frozen=True)
class Case:
    id: str
    seed: str
    anchor: str
    expect: dict[str, Any]
    occurrence: int = 1
    fixes: tuple[tuple[str, str], ...] = ()
    key: str | None = None
    """The record key: the id of the case holding the document's key example, or a literal key document."""
    topic: str | None = None


PG_SEQUENCE_TYPO = ('"[\\\\"24023119\\\\",\\\\"24023128\\\\"]""schema"', '"[\\"24023119\\",\\"24023128\\"]","schema"')

CASES = [
    # --- PostgreSQL (Debezium event structure document) ---
    Case("postgres-key", POSTGRES, '"payload": {"id": "1"}',
         {"kind": Kind.DATA}, key=None),
    Case("postgres-create", POSTGRES, '"op": "c"', fixes=(PG_SEQUENCE_TYPO,), key="postgres-key",
         expect={"kind": Kind.DATA, "op": Op.CREATE, "system": SourceSystem.POSTGRES, "server": "PostgreSQL_server",
                 "table": TableId("postgres", "public", "customers"), "key": (("id", "1"),),
                 "position.order": (24023119, 24023128), "commit_time_ns": 1559033904863 * MS,
                 "emitted_time_ns": 1559033904863 * MS, "snapshot": Snapshot.TRUE, "source_transaction_id": "555"}),
    Case("postgres-update", POSTGRES, '"op": "u"',
         {"op": Op.UPDATE, "system": SourceSystem.POSTGRES, "table": TableId("postgres", "public", "customers"),
          "position.order": (24023128, 24023128), "commit_time_ns": 1559033904863 * MS,
          "emitted_time_ns": 1465584025523 * MS, "snapshot": Snapshot.FALSE, "source_transaction_id": "556"}),
    Case("postgres-truncate", POSTGRES, '"op": "t"',
         {"op": Op.TRUNCATE, "table": TableId("postgres", "public", "customers"), "key": None,
          "position.order": (46523128, 46523128), "emitted_time_ns": 1559033904961 * MS, "is_row_change": False}),
    Case("postgres-message-transactional", POSTGRES, '"op": "m"',
         {"op": Op.MESSAGE, "table": None, "source_transaction_id": "556", "position.order": (46523128, 46523128),
          "is_watermark": False, "commit_time_ns": 1559033904863 * MS}),
    Case("postgres-message-non-transactional", POSTGRES, '"op": "m"', occurrence=2,
         fixes=(('1559033904961"message": {"prefix": "foo","content": "Ymfy"}}\n',
                 '1559033904961,"message": {"prefix": "foo","content": "Ymfy"}}}\n'),),
         expect={"op": Op.MESSAGE, "table": None, "source_transaction_id": None, "position.order": (46523128, 46523128)}),
    Case("postgres-delete", POSTGRES, '"op": "d"', key='{"id": 1}',
         expect={"op": Op.DELETE, "key": (("id", 1),), "position.order": (46523128, 46523128),
                 "emitted_time_ns": 1465581902461 * MS, "is_row_change": True}),
    # --- YugabyteDB ---
    Case("yugabyte-transaction-begin", YUGABYTE, '"status": "BEGIN"', topic="YugabyteDB_server.transaction",
         expect={"kind": Kind.TRANSACTION, "server": "YugabyteDB_server", "commit_time_ns": 1486500577125 * MS,
                 "boundary": TransactionBoundary("BEGIN", "571:53195829", None, ())}),
    Case("yugabyte-transaction-end", YUGABYTE, '"status": "END"',
         {"kind": Kind.TRANSACTION, "commit_time_ns": 1486500577691 * MS,
          "boundary": TransactionBoundary("END", "571:53195832", 2, (("s1.a", 1), ("s2.a", 1)))}),
    Case("yugabyte-enriched", YUGABYTE, '"total_order": "1"',
         {"kind": Kind.DATA, "op": Op.CREATE, "system": None, "position": None,
          "emitted_time_ns": 1580390884335 * MS, "transaction": TransactionBlock("571:53195832", 1, 1)}),
    Case("yugabyte-key", YUGABYTE, '"name": "YugabyteDB_server.public.customers.Key"', {"kind": Kind.DATA}),
    Case("yugabyte-create", YUGABYTE, '"op": "c", --> 9',
         {"op": Op.CREATE, "system": SourceSystem.YUGABYTEDB, "server": "YugabyteDB_server",
          "table": TableId("postgres", "public", "customers"), "position.order": (24023119, 24023128),
          "commit_time_ns": 1559033904863 * MS, "snapshot": Snapshot.TRUE, "source_transaction_id": "555"}),
    Case("yugabyte-update", YUGABYTE, '"op": "u", --> 4',
         {"op": Op.UPDATE, "system": SourceSystem.YUGABYTEDB, "position.order": (24023128, 24023128),
          "commit_time_ns": 1559033904863 * MS, "emitted_time_ns": 1465584025523 * MS, "snapshot": Snapshot.FALSE}),
    Case("yugabyte-delete", YUGABYTE, '"op": "d", --> 4',
         {"op": Op.DELETE, "system": SourceSystem.YUGABYTEDB, "position.order": (46523128, 46523128),
          "emitted_time_ns": 1465581902461 * MS}),
    # --- SQL Server ---
    Case("sqlserver-schema-change", SQLSERVER, '"commit_lsn": "00000025:00000d98:00a2"',
         key="sqlserver-schema-key",
         expect={"kind": Kind.SCHEMA_CHANGE, "system": SourceSystem.SQLSERVER, "server": "server1",
                 "table": TableId("testDB", "dbo", "customers"), "key": (("databaseName", "testDB"),), "ddl": None,
                 "position.order": (sqlserver_lsn("00000025:00000d98:00a2"), -1, 0),
                 "commit_time_ns": None, "emitted_time_ns": 1588252618953 * MS, "snapshot": Snapshot.TRUE}),
    Case("sqlserver-schema-key-schema", SQLSERVER, '"databaseName": "inventory"', {"kind": Kind.DATA}),
    Case("sqlserver-schema-key", SQLSERVER, '"databaseName": "testDB"\n  }\n}', {"kind": Kind.DATA}),
    Case("sqlserver-incremental-snapshot", SQLSERVER, '"snapshot":"incremental"',
         {"op": Op.READ, "snapshot": Snapshot.INCREMENTAL, "is_snapshot": True, "system": None,
          "emitted_time_ns": 1620393591654547920}),
    Case("sqlserver-create", SQLSERVER, '"commit_lsn": "00000027:00000758:0005"',
         fixes=(('"ts_ms": 1559729471739876, (10)', '"ts_us": 1559729471739876, (10)'),
                ('"ts_ms": 1559729471739876149 (10)', '"ts_ns": 1559729471739876149 (10)')),
         expect={"op": Op.CREATE, "system": SourceSystem.SQLSERVER, "server": "server1",
                 "table": TableId("testDB", "dbo", "customers"),
                 "position.order": (sqlserver_lsn("00000027:00000758:0005"), sqlserver_lsn("00000027:00000758:0003"), 1),
                 "commit_time_ns": 1559729468470000000, "emitted_time_ns": 1559729471739876149}),
    Case("sqlserver-update", SQLSERVER, '"commit_lsn": "00000027:00000ac0:0007"',
         {"op": Op.UPDATE, "system": SourceSystem.SQLSERVER,
          "position.order": (sqlserver_lsn("00000027:00000ac0:0007"), sqlserver_lsn("00000027:00000ac0:0002"), 2),
          "commit_time_ns": 1559729995937000000, "emitted_time_ns": 1559729998706318547}),
    Case("sqlserver-delete", SQLSERVER, '"commit_lsn": "00000027:00000db0:0007"',
         fixes=(('"schema": { ... },\n  },', '"schema": { ... },'),),
         expect={"op": Op.DELETE, "system": SourceSystem.SQLSERVER,
                 "position.order": (sqlserver_lsn("00000027:00000db0:0007"), sqlserver_lsn("00000027:00000db0:0005"), 1),
                 "commit_time_ns": 1559730445243000000, "emitted_time_ns": 1559730450205387492}),
    Case("sqlserver-transaction-begin", SQLSERVER, '"status": "BEGIN"',
         {"kind": Kind.TRANSACTION, "boundary": TransactionBoundary("BEGIN", "00000025:00000d08:0025", None, ()),
          "commit_time_ns": 1486500577125 * MS}),
    Case("sqlserver-transaction-end", SQLSERVER, '"status": "END"',
         {"kind": Kind.TRANSACTION, "commit_time_ns": 1486500577691 * MS,
          "boundary": TransactionBoundary("END", "00000025:00000d08:0025", 2,
                                          (("testDB.dbo.testDB.tablea", 1), ("testDB.dbo.testDB.tableb", 1)))}),
    Case("sqlserver-enriched", SQLSERVER, '"total_order": "1"',
         {"op": Op.CREATE, "emitted_time_ns": 1580390884335172574,
          "transaction": TransactionBlock("00000025:00000d08:0025", 1, 1)}),
    # --- Oracle: the value examples carry no table in `source`; the topic names it ---
    Case("oracle-create", ORACLE, '"commit_scn": "2122185"', topic="server1.DEBEZIUM.CUSTOMERS",
         key='{"ID": 1004}',
         expect={"op": Op.CREATE, "system": SourceSystem.ORACLE, "server": "server1",
                 "table": TableId(None, "DEBEZIUM", "CUSTOMERS"), "key": (("ID", 1004),),
                 "position.order": (2122185, 2122185), "commit_time_ns": 1520085154000 * MS,
                 "emitted_time_ns": 1532592105975 * MS, "snapshot": Snapshot.FALSE, "source_transaction_id": "6.28.807"}),
    Case("oracle-update", ORACLE, '"commit_scn": "2125544"', topic="server1.DEBEZIUM.CUSTOMERS",
         expect={"op": Op.UPDATE, "system": SourceSystem.ORACLE, "table": TableId(None, "DEBEZIUM", "CUSTOMERS"),
                 "position.order": (2125544, 2125544), "commit_time_ns": 1520085811000 * MS,
                 "source_transaction_id": "6.9.809"}),
    Case("oracle-delete", ORACLE, '"commit_scn": "2122184"', topic="server1.DEBEZIUM.CUSTOMERS",
         expect={"op": Op.DELETE, "position.order": (2122184, 2122184), "commit_time_ns": 1520085153000 * MS}),
    Case("oracle-truncate", ORACLE, '"commit_scn": "13271102"',
         {"op": Op.TRUNCATE, "system": SourceSystem.ORACLE, "server": "oracle_server", "key": None,
          "table": TableId("ORCLPDB1", "DEBEZIUM", "TEST_TABLE"), "position.order": (13271102, 13234397),
          "commit_time_ns": 1638974535000 * MS, "emitted_time_ns": 1638974558961 * MS,
          "source_transaction_id": "02000a0037030000"}),
    # --- TiCDC: commit time is the TSO's physical part (commit_ts >> 18); the examples use toy TSOs ---
    Case("ticdc-ddl-key", TICDC, '"io.debezium.connector.mysql.SchemaChangeKey", "optional"', {"kind": Kind.DATA}),
    Case("ticdc-ddl", TICDC, '"ddl": "RENAME TABLE',
         key="ticdc-ddl-key",
         expect={"kind": Kind.SCHEMA_CHANGE, "system": SourceSystem.TICDC, "server": "test_cluster",
                 "key": (("databaseName", "test"),), "ddl": "RENAME TABLE test.table1 to test.table2",
                 "table": TableId("test", None, "table1"), "position.order": (1,), "commit_time_ns": 0,
                 "emitted_time_ns": 1701326309000 * MS}),
    Case("ticdc-dml-key", TICDC, '"name": "test_cluster.test.table1.Key"', {"kind": Kind.DATA}),
    Case("ticdc-dml", TICDC, '"op": "u"', key="ticdc-dml-key",
         expect={"op": Op.UPDATE, "system": SourceSystem.TICDC, "server": "test_cluster", "key": (("tiny", 1),),
                 "table": TableId("test", None, "table1"), "position.order": (1,), "commit_time_ns": 0,
                 "emitted_time_ns": 1701326309000 * MS, "is_watermark": False}),
    Case("ticdc-watermark-key", TICDC, '"name": "test_cluster.watermark.Key"', {"kind": Kind.DATA}),
    Case("ticdc-watermark", TICDC, '"commit_ts": 3', key="ticdc-watermark-key",
         expect={"op": Op.MESSAGE, "system": SourceSystem.TICDC, "is_watermark": True, "table": None, "key": (),
                 "position.order": (3,), "commit_time_ns": 0}),
]

KEY_CASES = {
    "postgres-key": (("id", "1"),),
    "yugabyte-key": (("id", "1"),),
    "sqlserver-schema-key-schema": (("databaseName", "inventory"),),
    "sqlserver-schema-key": (("databaseName", "testDB"),),
    "ticdc-ddl-key": (("databaseName", "test"),),
    "ticdc-dml-key": (("tiny", 1),),
    "ticdc-watermark-key": (),
}
"""Cases whose example is a key document: decoded as the key of a tombstone, they give this row key."""


def record_key(case: Case) -> str | None:
    keyed = next((other for other in CASES if other.id == case.key), None)
    return seed_example(keyed.seed, keyed.anchor)[0] if keyed else case.key


def attribute(event: Any, path: str) -> Any:
    for name in path.split("."):
        event = getattr(event, name)
    return event


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_seed_example_decodes_as_documented(case: Case) -> None:
    text, _ = seed_example(case.seed, case.anchor, case.occurrence, case.fixes)
    json.loads(text)  # the de-annotated example is JSON
    if case.id in KEY_CASES:
        event = decode(text, None)
        assert event.kind is Kind.TOMBSTONE
        assert event.key == KEY_CASES[case.id]
        return
    event = decode(record_key(case), text, case.topic)
    for path, expected in case.expect.items():
        assert attribute(event, path) == expected, path


def test_every_example_event_in_the_seeds_is_a_case() -> None:
    """Each document block holding an `op`, a transaction status or a key payload is covered above."""
    covered = {(case.seed, seed_example(case.seed, case.anchor, case.occurrence, case.fixes)[1]) for case in CASES}
    replica_identity = seed_text(YUGABYTE).index("#### Message formats for replica identities")
    replica_identity_end = seed_text(YUGABYTE).index("{{< /tabpane >}}")
    missing = []
    for seed in (YUGABYTE, SQLSERVER, POSTGRES, TICDC, ORACLE):
        for start in example_starts(seed, r'"op"\s*:\s*"|"status"\s*:\s*"(?:BEGIN|END)"|"databaseName"\s*:\s*"'):
            if seed == YUGABYTE and replica_identity < start < replica_identity_end:
                continue  # before/after fragments illustrating REPLICA IDENTITY: no source block, not whole events
            if (seed, start) not in covered:
                missing.append((seed, seed_text(seed)[start:start + 80]))
    assert not missing


@pytest.mark.parametrize("seed,anchor,occurrence", [
    (POSTGRES, '"op": "c"', 1),   # `..."]""schema"`: a comma is missing
    (POSTGRES, '"op": "m"', 2),   # `1559033904961"message"`: a comma and the closing brace are missing
])
def test_seed_examples_with_typos_are_rejected_as_printed(seed: str, anchor: str, occurrence: int) -> None:
    text = seed_text(seed)
    offset = -1
    for _ in range(occurrence):
        offset = text.index(anchor, offset + 1)
    line = text[text.rfind("\n", 0, offset) + 1:text.index("\n", offset)]
    with pytest.raises(EventDecodeError, match="value is not JSON"):
        decode(None, line)


def test_documented_positions_order_as_the_documents_do() -> None:
    def position(case_id: str) -> Any:
        case = next(case for case in CASES if case.id == case_id)
        return decode(record_key(case), seed_example(case.seed, case.anchor, case.occurrence, case.fixes)[0], case.topic).position

    assert position("sqlserver-create") < position("sqlserver-update") < position("sqlserver-delete")
    assert position("postgres-create") < position("postgres-update") < position("postgres-delete")
    assert position("postgres-truncate") == position("postgres-delete")
    assert position("oracle-delete") < position("oracle-create") < position("oracle-update")
    assert position("ticdc-dml") < position("ticdc-watermark")


def test_yugabyte_wrapped_columns_give_the_same_row_key_as_plain_ones() -> None:
    fragment = re.search(r'"employee_id": \{\s*"value": 1001,\s*"set": true\s*\}', seed_text(YUGABYTE))
    assert fragment is not None
    wrapped = decode("{" + fragment.group(0) + "}", None).key
    plain = decode('{"employee_id": 1001}', None).key
    assert wrapped == plain == (("employee_id", 1001),)
