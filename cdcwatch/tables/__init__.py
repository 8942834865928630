"""Tables read with read-only SQL, one module per engine behind `side.Side`: what reconciliation compares (counts,
checksums and row hashes of key ranges, computed where the rows are) and where a canary's newest time is read.

`make_side` picks the module for a configured table.
"""

from __future__ import annotations

from cdcwatch.config import TableConfig
from cdcwatch.tables.mysql import MysqlTableSide
from cdcwatch.tables.postgres import ApplyRowsSide, PostgresTableSide
from cdcwatch.tables.side import Side

__all__ = ["make_side"]


def make_side(side: str, config: TableConfig, source: TableConfig) -> Side:
    """The side module for a configured side."""
    if config.format == "apply":
        return ApplyRowsSide(side, config, config.table_id or _table_id(source))
    if config.engine == "postgres":
        return PostgresTableSide(side, config)
    return MysqlTableSide(side, config)


def _table_id(source: TableConfig) -> str:
    """The table as the Debezium event (and so the apply job) names it: database.schema.table on PostgreSQL,
    database.table on MySQL."""
    assert source.table is not None
    return f"{source.dbname}.{source.table}" if source.engine == "postgres" else source.table
