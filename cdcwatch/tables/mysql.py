"""A MySQL or MariaDB table (source or target) with a single-column key (needs PyMySQL: the `mysql` extra).

One connection, autocommit, the session read-only (`SET SESSION TRANSACTION READ ONLY`: InnoDB's consistent reads
take no row locks), in UTC (timestamps are normalised as UTC microseconds), under a statement timeout
(`max_statement_time` on MariaDB, `max_execution_time` on MySQL) and a socket timeout a little longer. Key walks are
`ORDER BY key LIMIT n` after the last key and lookups `key IN (...)`: both read the primary key index.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cdcwatch.config import TableConfig
from cdcwatch.tables.buckets import Buckets, SqlBucketPass, mysql_bucket
from cdcwatch.tables.image import Column, mysql_image_hash, mysql_value, type_class
from cdcwatch.tables.side import Digest, Key, Shape, SideError, key_page, time_class

__all__ = ["MysqlTableSide"]

_COLUMNS = """
SELECT column_name, data_type, coalesce(datetime_precision, 0), column_key FROM information_schema.columns
WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position
"""


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class MysqlTableSide(SqlBucketPass):
    """A MySQL / MariaDB table."""

    def __init__(self, side: str, config: TableConfig) -> None:
        assert config.table is not None
        self.side = side
        self.config = config
        self.rows_read = 0
        self.database, self.table = config.table.split(".")
        self.relation = f"{_ident(self.database)}.{_ident(self.table)}"
        self._connection: Any = None
        self.key: Column | None = None
        self.columns: list[Column] = []
        self.newest_queries: dict[str, str] = {}
        """`newest_time`'s query of each column, built from the catalog at its first read."""

    def _connect(self) -> Any:
        if self._connection is None:
            try:
                import pymysql
            except ImportError:
                raise SideError(self.side, "a mysql side needs PyMySQL: pip install 'cdcwatch[mysql]'") from None
            c = self.config
            timeout = c.statement_timeout_seconds
            connection = pymysql.connect(
                host=c.host, port=c.server_port, user=c.user,
                password=c.password.get_secret_value() if c.password else "",
                ssl={"ca": c.ssl_ca} if c.ssl_ca else None, connect_timeout=max(timeout, 1),
                read_timeout=timeout + 5, write_timeout=timeout + 5, autocommit=True, charset="utf8mb4")
            with connection.cursor() as cursor:
                cursor.execute("SET SESSION time_zone = '+00:00'")
                cursor.execute("SET SESSION TRANSACTION READ ONLY")
                try:
                    cursor.execute(f"SET SESSION max_statement_time = {timeout:g}")  # MariaDB
                except pymysql.err.MySQLError:
                    cursor.execute(f"SET SESSION max_execution_time = {int(timeout * 1000)}")  # MySQL
            self._connection = connection
        return self._connection

    def _query(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        import pymysql

        try:
            with self._connect().cursor() as cursor:
                cursor.execute(query, tuple(params))
                return list(cursor.fetchall())
        except (pymysql.err.MySQLError, OSError) as exc:
            self.close()
            message = exc.args[-1] if isinstance(exc, pymysql.err.MySQLError) and exc.args else exc
            raise SideError(self.side, str(message)) from None

    def describe(self) -> Shape:
        rows = self._query(_COLUMNS, (self.database, self.table))
        if not rows:
            raise SideError(self.side, f"table {self.config.table} not found (or not visible to {self.config.user})")
        primary = [str(row[0]) for row in rows if row[3] == "PRI"]
        return Shape(primary[0] if len(primary) == 1 else None,
                     {str(name): Column(str(name), type_class(str(kind)), int(precision), str(kind).lower())
                      for name, kind, precision, _ in rows})

    def use(self, key: Column, columns: Sequence[Column]) -> None:
        self.key, self.columns = key, list(columns)

    def _hash(self) -> str:
        return mysql_image_hash([mysql_value(column) for column in self.columns])

    def newest_time(self, column: str) -> float | None:
        if column not in self.newest_queries:  # the catalog once: then one aggregate a read
            c = _ident(column)
            timestamp = time_class(self.side, self.describe(), self.config.table, column) == "timestamp"
            # whole microseconds (or milliseconds), divided here: MySQL's division keeps 4 decimal places
            value = (f"TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', max({c})), 1000000" if timestamp
                     else f"max({c}), 1000")
            self.newest_queries[column] = f"SELECT {value} FROM {self.relation}"
        rows = self._query(self.newest_queries[column])
        self.rows_read += 1
        return None if rows[0][0] is None else int(rows[0][0]) / int(rows[0][1])

    def keys_after(self, after: Key | None, limit: int) -> list[Key]:
        assert self.key is not None
        keys = key_page(self._query, self.relation, _ident(self.key.name), after, limit)
        self.rows_read += len(keys)
        return keys

    def digest(self, keys: Sequence[Key]) -> Digest:
        assert self.key is not None
        if not keys:
            return Digest(0, 0)
        rows = self._query(f"SELECT count(*), coalesce(sum(h), 0) FROM (SELECT {self._hash()} AS h FROM {self.relation} "
                           f"WHERE {_ident(self.key.name)} IN %s) x", (tuple(keys),))
        count, checksum = rows[0]
        self.rows_read += int(count)
        return Digest(int(count), int(checksum))

    def row_hashes(self, keys: Sequence[Key]) -> dict[Key, int]:
        assert self.key is not None
        if not keys:
            return {}
        k = _ident(self.key.name)
        rows = self._query(f"SELECT {k}, {self._hash()} FROM {self.relation} WHERE {k} IN %s", (tuple(keys),))
        self.rows_read += len(rows)
        return {row[0]: int(row[1]) for row in rows}

    # --- a whole-table pass (cdcwatch.reconcile.bucketed) ---------------------------------------------------------------
    def estimated_rows(self) -> int:
        rows = self._query("SELECT coalesce(TABLE_ROWS, 0) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                           "AND TABLE_NAME = %s", (self.database, self.table))
        return int(rows[0][0]) if rows else 0

    def _quoted_key(self) -> str:
        assert self.key is not None
        return _ident(self.key.name)

    def _bucket(self, plan: Buckets, key: str) -> str:
        return mysql_bucket(plan, key)

    def close(self) -> None:
        if self._connection is not None:
            try:
                self._connection.close()
            except Exception:  # a broken socket closes anyway
                pass
            self._connection = None
