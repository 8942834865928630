"""Source positions compare the way each source system orders its changes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdcwatch.events import EventDecodeError, Position, SourceSystem, decode


def event(connector: str | None, **source: Any) -> str:
    block = {"name": "srv", "ts_ms": 1, "table": "t", **source}
    if connector:
        block["connector"] = connector
    return json.dumps({"op": "c", "source": block})


def position(connector: str | None, **source: Any) -> Position:
    decoded = decode('{"id": 1}', event(connector, **source)).position
    assert decoded is not None
    return decoded


def sqlserver(commit: str, change: str | None = None, serial: str | None = "1") -> Position:
    return position("sqlserver", commit_lsn=commit, change_lsn=change or commit, event_serial_no=serial)


def test_sqlserver_lsn_parts_compare_as_hex_numbers_not_text() -> None:
    # as text, lowercase 'a' would sort after uppercase 'B'
    assert sqlserver("0000000a:00000000:0001") < sqlserver("0000000B:00000000:0001")
    # a carry from block into VLF
    assert sqlserver("00000025:ffffffff:ffff") < sqlserver("00000026:00000000:0001")
    assert sqlserver("00000025:00000d98:0002") == sqlserver("00000025:00000D98:0002")


def test_sqlserver_orders_by_commit_then_change_then_serial() -> None:
    commit = "00000027:00000758:0005"
    assert sqlserver(commit, "00000027:00000758:0003", "1") < sqlserver(commit, "00000027:00000758:0003", "2")
    assert sqlserver(commit, "00000027:00000758:0004", "1") < sqlserver("00000027:00000758:0006", "00000027:00000758:0001")
    schema_change = position("sqlserver", commit_lsn=commit, change_lsn=None, event_serial_no=None)
    assert schema_change < sqlserver(commit, "00000027:00000758:0001")


def test_oracle_scns_beyond_2_to_the_63_compare_as_integers() -> None:
    big = 2**63
    assert position("oracle", scn=str(big - 1), commit_scn=str(big - 1)) < position("oracle", scn=str(big), commit_scn=str(big))
    # as text "9999999" would sort after "10000000"
    assert position("oracle", scn="9999999", commit_scn="9999999") < position("oracle", scn="10000000", commit_scn="10000000")
    # transactions stream in commit order: a change made earlier in a later-committed transaction sorts later
    assert position("oracle", scn="500", commit_scn="900") > position("oracle", scn="800", commit_scn="850")
    # a snapshot read has no commit SCN: its SCN stands in
    assert position("oracle", scn="700", commit_scn=None).order == (700, 700)


def test_mysql_binlog_file_rollover() -> None:
    assert position("mysql", file="mysql-bin.000009", pos=99_999, row=3) < position("mysql", file="mysql-bin.000010", pos=4, row=0)
    # the index outgrows its zero padding: as text ".1000000" would sort before ".999999"
    assert position("mysql", file="mysql-bin.999999", pos=4, row=0) < position("mysql", file="mysql-bin.1000000", pos=4, row=0)
    assert position("mariadb", file="mariadb-bin.000004", pos=805, row=0) < position("mariadb", file="mariadb-bin.000004", pos=805, row=1)


def test_postgres_interleaved_transactions_order_by_commit() -> None:
    # B began after A but committed first: B's change has the higher LSN yet streams before A's
    b_change = position("postgresql", sequence='["1000","3000"]', lsn=3000)
    a_change = position("postgresql", sequence='["3100","2000"]', lsn=2000)
    assert b_change < a_change
    assert position("postgresql", sequence='[null,"26663816"]', lsn=26663816).order == (26663816, 26663816)
    assert position("yugabytedb", lsn=5).system is SourceSystem.YUGABYTEDB


def test_ticdc_orders_by_tso_and_reads_its_commit_time() -> None:
    # TiDB's TSO document (docs.pingcap.com/tidb/stable/tso) takes TSO 443852055297916932 apart: its first 46 bits
    # are the physical time (TIDB_PARSE_TSO: 2023-08-27 20:33:41.687 in the session's zone, 18:33:41.687 UTC),
    # its last 18 bits the logical counter 4.
    tso = 443852055297916932
    physical_ms = int("0000011000101000111000010001011110111000110111", 2)
    decoded = decode(None, event("TiCDC", commit_ts=tso, ts_ms=0, file="", pos=0, row=0))
    assert decoded.commit_time_ns == physical_ms * 1_000_000
    assert decoded.position == Position(SourceSystem.TICDC, (tso,))
    # logical counters 4 and 5 of one millisecond, then counter 0 of the next one
    next_ms = int("0000011000101000111000010001011110111000111000" + "0" * 18, 2)
    assert position("TiCDC", commit_ts=tso) < position("TiCDC", commit_ts=tso + 1) < position("TiCDC", commit_ts=next_ms)
    assert decode(None, event("TiCDC", commit_ts=next_ms)).commit_time_ns == (physical_ms + 1) * 1_000_000


def test_positions_of_different_systems_do_not_compare() -> None:
    with pytest.raises(TypeError):
        _ = position("mysql", file="a.000001", pos=1) < position("oracle", scn="1")
    assert position("mysql", file="a.000001", pos=1) != position("oracle", scn="1")


@pytest.mark.parametrize("source", [
    {"connector": "sqlserver", "commit_lsn": "25:d98:2"},
    {"connector": "sqlserver", "commit_lsn": None, "change_lsn": None},
    {"connector": "oracle", "scn": "12a"},
    {"connector": "oracle", "scn": 1.5},
    {"connector": "mysql", "file": "binlog", "pos": 4},
    {"connector": "mysql", "file": "", "pos": 4},
    {"connector": "postgresql", "sequence": '["1"]'},
    {"connector": "postgresql", "sequence": "1,2"},
    {"connector": "postgresql"},
    {"connector": "TiCDC"},
])
def test_unreadable_positions_are_decode_errors(source: dict[str, Any]) -> None:
    with pytest.raises(EventDecodeError):
        decode(None, json.dumps({"op": "u", "source": source}))


def hex_lsn(value: int) -> str:
    return f"{value >> 48:08x}:{(value >> 16) & 0xFFFFFFFF:08x}:{value & 0xFFFF:04x}"


@given(st.integers(0, 2**80 - 1), st.integers(0, 2**80 - 1))
def test_sqlserver_order_matches_the_lsn_as_a_number(first: int, second: int) -> None:
    a, b = sqlserver(hex_lsn(first)), sqlserver(hex_lsn(second))
    assert (a < b) == (first < second) and (a == b) == (first == second)


@given(st.integers(0, 10**30), st.integers(0, 10**30))
def test_oracle_order_matches_the_scn_as_a_number(first: int, second: int) -> None:
    a = position("oracle", scn=str(first), commit_scn=str(first))
    b = position("oracle", scn=str(second), commit_scn=str(second))
    assert (a < b) == (first < second)


@given(st.tuples(st.integers(1, 10**7), st.integers(4, 2**40), st.integers(0, 10**4)),
       st.tuples(st.integers(1, 10**7), st.integers(4, 2**40), st.integers(0, 10**4)))
def test_mysql_order_matches_file_pos_row(first: tuple[int, int, int], second: tuple[int, int, int]) -> None:
    def at(coordinates: tuple[int, int, int]) -> Position:
        index, pos, row = coordinates
        return position("mysql", file=f"mysql-bin.{index:06d}", pos=pos, row=row)

    assert (at(first) < at(second)) == (first < second)
