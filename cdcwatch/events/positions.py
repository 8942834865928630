"""Source positions: where in the source's log a change happened, totally ordered per source system.

Each system's `source` block carries its own coordinates; a parser turns them into a `Position`
whose `order` tuple sorts the way that system streams changes:

| system | order | why |
|---|---|---|
| PostgreSQL, YugabyteDB | (last commit LSN, LSN) from `sequence`/`lsn` | commit order: a change's LSN can precede an earlier commit |
| SQL Server | (commit LSN, change LSN, event serial no) | the connector's own offset order; hex LSN parts compare as numbers |
| Oracle | (commit SCN, SCN) | big integers carried as strings, compared as integers (no 2^63 limit) |
| MySQL, MariaDB | (binlog file index, pos, row) | the numeric file suffix orders rollover (`.000009` < `.000010`) |
| TiCDC | (commit_ts,) | a TiDB TSO: physical ms << 18 + logical counter |

A missing first part (a snapshot read, the first transaction after a restart) takes the next
part's value, so the order stays total. Positions of different systems do not compare (TypeError).
A non-transactional PostgreSQL logical message streams when written, ahead of the transaction
around it: it is the one change outside this order (docs/events.md).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from cdcwatch.events.errors import EventDecodeError, integer

__all__ = ["Position", "SourceSystem", "TSO_LOGICAL_BITS", "parse_position", "system_of"]

TSO_LOGICAL_BITS = 18
"""A TiDB TSO is `physical milliseconds << 18 | logical counter`."""


class SourceSystem(enum.Enum):
    POSTGRES = "postgresql"
    YUGABYTEDB = "yugabytedb"
    SQLSERVER = "sqlserver"
    ORACLE = "oracle"
    MYSQL = "mysql"
    TICDC = "ticdc"


class Position(NamedTuple):
    """A point in one source system's change stream.

    A tuple of (system, order): positions of one system compare by `order`; comparing positions of
    two systems raises TypeError (the systems themselves do not order).
    """

    system: SourceSystem
    order: tuple[int, ...]

    def __str__(self) -> str:
        return _DESCRIBE[self.system](self.order)

    def sortable(self) -> str:
        """A string whose byte order is the position order (for a text column compared with C collation)."""
        return ".".join(f"{part + _SORTABLE_OFFSET:040d}" for part in self.order)


_SORTABLE_OFFSET = 10**20
"""Shifts the -1 of a NULL SQL Server change LSN to a non-negative number; every part stays below 10^40."""


def _optional_integer(source: Mapping[str, Any], name: str) -> int | None:
    value = source.get(name)
    return None if value is None else integer(value, f"source.{name}")


def _postgres(source: Mapping[str, Any], system: SourceSystem) -> Position:
    lsn = _optional_integer(source, "lsn")
    last_commit: int | None = None
    sequence = source.get("sequence")
    if sequence is not None:
        last_commit, sequence_lsn = _pg_sequence(sequence)
        lsn = lsn if lsn is not None else sequence_lsn
    if lsn is None:
        raise EventDecodeError("source has neither lsn nor sequence")
    commit = last_commit if last_commit is not None else lsn
    return Position(system, (commit, lsn))


def _pg_sequence(sequence: Any) -> tuple[int | None, int | None]:
    """`sequence` is a JSON array in a string: `["<last commit lsn>","<lsn>"]`, either may be null."""
    if not isinstance(sequence, str) or not (sequence.startswith("[") and sequence.endswith("]")):
        raise EventDecodeError("source.sequence is not a JSON array string")
    first, comma, second = sequence[1:-1].partition(",")
    if not comma or "," in second:
        raise EventDecodeError("source.sequence does not hold two LSNs")
    return _sequence_lsn(first), _sequence_lsn(second)


def _sequence_lsn(part: str) -> int | None:
    part = part.strip()
    if part == "null":
        return None
    if len(part) >= 2 and part[0] == part[-1] == '"':
        part = part[1:-1]
    return integer(part, "source.sequence")


def _describe_postgres(order: tuple[int, ...]) -> str:
    commit, lsn = order
    return f"lsn {lsn >> 32:X}/{lsn & 0xFFFFFFFF:X} (after commit {commit >> 32:X}/{commit & 0xFFFFFFFF:X})"


def _describe_sqlserver(order: tuple[int, ...]) -> str:
    commit, change, serial = order
    change_text = "null" if change < 0 else _sqlserver_lsn_text(change)
    return f"commit_lsn {_sqlserver_lsn_text(commit)} change_lsn {change_text} event_serial_no {serial}"


def _sqlserver_lsn_text(lsn: int) -> str:
    return f"{lsn >> 48:08x}:{(lsn >> 16) & 0xFFFFFFFF:08x}:{lsn & 0xFFFF:04x}"


_SQLSERVER_LSN = re.compile(r"([0-9A-Fa-f]{8}):([0-9A-Fa-f]{8}):([0-9A-Fa-f]{4})")


def _sqlserver_lsn(value: Any, name: str) -> int | None:
    """`00000025:00000d98:0002` (VLF:block:slot, hex) as one comparable integer; NULL LSN as None."""
    if value is None:
        return None
    match = _SQLSERVER_LSN.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise EventDecodeError(f"source.{name} is not a SQL Server LSN (xxxxxxxx:xxxxxxxx:xxxx)")
    vlf, block, slot = (int(part, 16) for part in match.groups())
    return (vlf << 48) | (block << 16) | slot


def _sqlserver(source: Mapping[str, Any], system: SourceSystem) -> Position:
    commit = _sqlserver_lsn(source.get("commit_lsn"), "commit_lsn")
    change = _sqlserver_lsn(source.get("change_lsn"), "change_lsn")
    serial = _optional_integer(source, "event_serial_no")
    if commit is None and change is None:
        raise EventDecodeError("source has neither commit_lsn nor change_lsn")
    commit = commit if commit is not None else change
    return Position(system, (commit or 0, -1 if change is None else change, serial or 0))


def _oracle(source: Mapping[str, Any], system: SourceSystem) -> Position:
    scn = _optional_integer(source, "scn")
    commit = _optional_integer(source, "commit_scn")
    if scn is None and commit is None:
        raise EventDecodeError("source has neither scn nor commit_scn")
    scn = scn if scn is not None else commit
    commit = commit if commit is not None else scn
    return Position(system, (commit or 0, scn or 0))


def _mysql(source: Mapping[str, Any], system: SourceSystem) -> Position:
    binlog = source.get("file")
    if not isinstance(binlog, str) or not binlog:
        raise EventDecodeError("source.file (binlog file name) is missing")
    _, _, suffix = binlog.rpartition(".")
    if not (suffix.isascii() and suffix.isdigit()):
        raise EventDecodeError("source.file does not end in a numeric binlog index")
    pos = _optional_integer(source, "pos") or 0
    row = _optional_integer(source, "row") or 0
    return Position(system, (int(suffix), pos, row))


def _ticdc(source: Mapping[str, Any], system: SourceSystem) -> Position:
    commit_ts = _optional_integer(source, "commit_ts")
    if commit_ts is None:
        raise EventDecodeError("source.commit_ts is missing")
    return Position(system, (commit_ts,))


_DESCRIBE: dict[SourceSystem, Callable[[tuple[int, ...]], str]] = {
    SourceSystem.POSTGRES: _describe_postgres,
    SourceSystem.YUGABYTEDB: _describe_postgres,
    SourceSystem.SQLSERVER: _describe_sqlserver,
    SourceSystem.ORACLE: lambda order: f"commit_scn {order[0]} scn {order[1]}",
    SourceSystem.MYSQL: lambda order: f"binlog file #{order[0]} pos {order[1]} row {order[2]}",
    SourceSystem.TICDC: lambda order: f"commit_ts {order[0]}",
}

_PARSERS: dict[SourceSystem, Callable[[Mapping[str, Any], SourceSystem], Position]] = {
    SourceSystem.POSTGRES: _postgres,
    SourceSystem.YUGABYTEDB: _postgres,
    SourceSystem.SQLSERVER: _sqlserver,
    SourceSystem.ORACLE: _oracle,
    SourceSystem.MYSQL: _mysql,
    SourceSystem.TICDC: _ticdc,
}

CONNECTOR_SYSTEMS: dict[str, SourceSystem] = {
    "postgresql": SourceSystem.POSTGRES,
    "yugabytedb": SourceSystem.YUGABYTEDB,
    "sqlserver": SourceSystem.SQLSERVER,
    "oracle": SourceSystem.ORACLE,
    "mysql": SourceSystem.MYSQL,
    "mariadb": SourceSystem.MYSQL,
    "ticdc": SourceSystem.TICDC,
}
"""`source.connector` (lower-cased) → system."""

FIELD_SYSTEMS: tuple[tuple[str, SourceSystem], ...] = (
    ("commit_ts", SourceSystem.TICDC),
    ("commit_lsn", SourceSystem.SQLSERVER),
    ("change_lsn", SourceSystem.SQLSERVER),
    ("scn", SourceSystem.ORACLE),
    ("commit_scn", SourceSystem.ORACLE),
    ("lsn", SourceSystem.POSTGRES),
    ("sequence", SourceSystem.POSTGRES),
    ("file", SourceSystem.MYSQL),
)
"""When `source.connector` is absent or unknown (some documented examples omit it): the first field present decides."""


def system_of(source: Mapping[str, Any]) -> SourceSystem | None:
    """The source system that wrote this `source` block, or None for one cdcwatch has no position rules for."""
    connector = source.get("connector")
    if isinstance(connector, str):
        system = CONNECTOR_SYSTEMS.get(connector.lower())
        if system is not None:
            return system
    for name, system in FIELD_SYSTEMS:
        if source.get(name) is not None:
            return system
    return None


def parse_position(source: Mapping[str, Any], system: SourceSystem) -> Position:
    """The position of the change this `source` block describes; EventDecodeError when it cannot be read."""
    return _PARSERS[system](source, system)
