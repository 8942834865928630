"""What one decoded Debezium-format record says: kind, operation, table, row key, position, times."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from cdcwatch.events.positions import Position, SourceSystem

__all__ = ["ROW_OPS", "ChangeEvent", "Kind", "Op", "RowKey", "Snapshot", "TableId",
           "TransactionBlock", "TransactionBoundary"]

RowKey = tuple[tuple[str, Any], ...]
"""A row's primary key as sorted (column, value) pairs; nested structs and arrays become tuples, so it hashes."""


class Kind(enum.Enum):
    DATA = "data"                    # a payload with `op`: row change, read, truncate, message / watermark
    SCHEMA_CHANGE = "schema_change"  # DDL on the schema-change topic
    TRANSACTION = "transaction"      # BEGIN / END on the transaction topic
    HEARTBEAT = "heartbeat"          # `__debezium-heartbeat.<prefix>`
    TOMBSTONE = "tombstone"          # null value after a delete, for log compaction


class Op(enum.Enum):
    CREATE = "c"
    UPDATE = "u"
    DELETE = "d"
    READ = "r"
    TRUNCATE = "t"
    MESSAGE = "m"


class Snapshot(enum.Enum):
    """`source.snapshot`: a boolean in older events, an enum string since Debezium 2."""

    FALSE = "false"
    TRUE = "true"
    FIRST = "first"
    FIRST_IN_DATA_COLLECTION = "first_in_data_collection"
    LAST_IN_DATA_COLLECTION = "last_in_data_collection"
    LAST = "last"
    INCREMENTAL = "incremental"


@dataclass(frozen=True, slots=True)
class TableId:
    database: str | None
    schema: str | None
    table: str

    def __str__(self) -> str:
        return ".".join(part for part in (self.database, self.schema, self.table) if part)


@dataclass(frozen=True, slots=True)
class TransactionBlock:
    """The `transaction` block a data event carries when transaction metadata is enabled."""

    id: str
    total_order: int
    data_collection_order: int


@dataclass(frozen=True, slots=True)
class TransactionBoundary:
    """A BEGIN or END event; END carries the event count, overall and per data collection."""

    status: str
    id: str
    event_count: int | None
    data_collections: tuple[tuple[str, int], ...]


@dataclass(slots=True)
class ChangeEvent:
    """One decoded record. Read-only by convention (not frozen: a frozen dataclass costs a third of the decode time)."""

    kind: Kind
    op: Op | None = None
    system: SourceSystem | None = None
    server: str | None = None
    """The connector's logical name (`topic.prefix`; TiCDC: the cluster id; heartbeat: `serverName`)."""
    table: TableId | None = None
    key: RowKey | None = None
    position: Position | None = None
    commit_time_ns: int | None = None
    """When the change was committed at the source, in ns since the epoch; None when the source does not say."""
    emitted_time_ns: int | None = None
    """`payload.ts_ms` (or `ts_us`/`ts_ns`): when the connector processed the event."""
    snapshot: Snapshot = Snapshot.FALSE
    source_transaction_id: str | None = None
    transaction: TransactionBlock | None = None
    boundary: TransactionBoundary | None = None
    ddl: str | None = None
    after: dict[str, Any] | None = None
    """The row after the change (create, update, snapshot read); None for deletes and other kinds."""
    after_fields: list[dict[str, Any]] | None = None
    """The Connect schema's `fields` of the row image, when the record carries its schema (JsonConverter with
    `schemas.enable=true`): what a typed target's columns are made from."""

    @property
    def commit_time(self) -> float | None:
        """Source commit time in seconds since the epoch."""
        return None if self.commit_time_ns is None else self.commit_time_ns / 1_000_000_000  # int / int: correctly rounded

    @property
    def is_snapshot(self) -> bool:
        return self.snapshot is not Snapshot.FALSE

    @property
    def is_watermark(self) -> bool:
        """A TiCDC WATERMARK: every event before its commit_ts has been sent."""
        return self.op is Op.MESSAGE and self.system is SourceSystem.TICDC

    @property
    def is_row_change(self) -> bool:
        """An event that changes one row of the target (create, update, delete, snapshot read)."""
        return self.op in ROW_OPS

    @property
    def identity(self) -> tuple[TableId | None, RowKey | None, Position | None]:
        """Table + row key + source position: two deliveries of the same change share it."""
        return self.table, self.key, self.position


ROW_OPS = (Op.CREATE, Op.UPDATE, Op.DELETE, Op.READ)
"""The ops that change one row of the target."""
