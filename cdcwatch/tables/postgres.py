"""PostgreSQL sides: a plain table (`format: table`, source or target) and the reference apply job's rows
(`format: apply`: `<schema>.rows`, one JSON row image per `(table_id, row_key)`, deleted rows kept as `deleted`).

One connection per side, autocommit, every statement read-only (`default_transaction_read_only`) under the side's
`statement_timeout` and a `lock_timeout` as long (a plain SELECT takes only the ACCESS SHARE lock, which no write
waits for). Key walks are `ORDER BY key LIMIT n` after the last key and lookups `key = ANY(array)`: both read the
key index (the primary key; the apply job's `(table_id, row_key)`), never the whole table.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cdcwatch.config import TableConfig
from cdcwatch.tables.buckets import Buckets, SqlBucketPass, pg_bucket
from cdcwatch.tables.image import Column, apply_value, pg_image_hash, pg_value, type_class

if TYPE_CHECKING:
    import psycopg

from cdcwatch.tables.side import Digest, Key, Shape, SideError, key_page, time_class

__all__ = ["ApplyRowsSide", "PostgresTableSide", "render_row_key"]

_COLUMNS = """
SELECT column_name, data_type, coalesce(datetime_precision, 6) FROM information_schema.columns
WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position
"""
_PRIMARY_KEY = """
SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
WHERE i.indrelid = %s::regclass AND i.indisprimary
"""


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def render_row_key(name: str, key: Key) -> str:
    """The apply job's `row_key` of a single-column key: the Debezium key as canonical JSON (`[["id",5]]`)."""
    return json.dumps([[name, key]], separators=(",", ":"))


class _PostgresSide:
    def __init__(self, side: str, config: TableConfig) -> None:
        self.side = side
        self.config = config
        self.rows_read = 0
        self._connection: psycopg.Connection[Any] | None = None
        self.key: Column | None = None
        self.columns: list[Column] = []
        self.newest_queries: dict[str, str] = {}
        """`newest_time`'s query of each column, built from the catalog at its first read."""

    def _connect(self) -> psycopg.Connection[Any]:
        import psycopg  # at the first query: libpq costs about 20 MiB, which an exporter without PostgreSQL does not pay

        if self._connection is None or self._connection.closed:
            c = self.config
            timeout_ms = int(c.statement_timeout_seconds * 1000)
            self._connection = psycopg.connect(
                host=c.host, port=c.server_port, dbname=c.dbname, user=c.user,
                password=c.password.get_secret_value() if c.password else None, sslmode=c.sslmode,
                sslrootcert=c.sslrootcert, sslcert=c.sslcert, sslkey=c.sslkey,
                connect_timeout=max(int(c.statement_timeout_seconds), 1),
                options=(f"-c statement_timeout={timeout_ms} -c lock_timeout={timeout_ms} "
                         "-c default_transaction_read_only=on -c TimeZone=UTC"),
                application_name="cdcwatch-reconcile", autocommit=True)
        return self._connection

    def _query(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        import psycopg

        try:
            rows = self._connect().execute(query, params).fetchall()
        except psycopg.Error as exc:
            self.close()
            raise SideError(self.side, str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__) from None
        return rows

    def _keys_param(self) -> str:
        assert self.key is not None
        return "%s::bigint[]" if self.key.type_class == "integer" else "%s::text[]"

    def use(self, key: Column, columns: Sequence[Column]) -> None:
        self.key, self.columns = key, list(columns)

    def close(self) -> None:
        if self._connection is not None:
            try:
                self._connection.close()
            except Exception:  # a broken socket closes anyway
                pass
            self._connection = None


class PostgresTableSide(_PostgresSide, SqlBucketPass):
    """A plain PostgreSQL table with a single-column key."""

    def __init__(self, side: str, config: TableConfig) -> None:
        super().__init__(side, config)
        assert config.table is not None
        self.schema, self.table = config.table.split(".")
        self.relation = f"{_ident(self.schema)}.{_ident(self.table)}"

    def describe(self) -> Shape:
        rows = self._query(_COLUMNS, (self.schema, self.table))
        if not rows:
            raise SideError(self.side, f"table {self.config.table} not found (or not visible to {self.config.user})")
        primary = self._query(_PRIMARY_KEY, (self.relation,))
        return Shape(str(primary[0][0]) if len(primary) == 1 else None,
                     {str(name): Column(str(name), type_class(str(kind)), int(precision), str(kind).lower())
                      for name, kind, precision in rows})

    def _hash(self) -> str:
        return pg_image_hash([pg_value(column) for column in self.columns])

    def newest_time(self, column: str) -> float | None:
        if column not in self.newest_queries:  # the catalog once: then one aggregate a read
            c = _ident(column)
            timestamp = time_class(self.side, self.describe(), self.config.table, column) == "timestamp"
            value = f"extract(epoch FROM max({c}))" if timestamp else f"max({c}) / 1000.0"
            self.newest_queries[column] = f"SELECT ({value})::float8 FROM {self.relation}"
        rows = self._query(self.newest_queries[column])
        self.rows_read += 1
        return None if rows[0][0] is None else float(rows[0][0])

    def keys_after(self, after: Key | None, limit: int) -> list[Key]:
        assert self.key is not None
        keys = key_page(self._query, self.relation, _ident(self.key.name), after, limit)
        self.rows_read += len(keys)
        return keys

    def digest(self, keys: Sequence[Key]) -> Digest:
        assert self.key is not None
        rows = self._query(f"SELECT count(*), coalesce(sum(h), 0)::numeric FROM (SELECT {self._hash()} AS h FROM "
                           f"{self.relation} WHERE {_ident(self.key.name)} = ANY({self._keys_param()})) x",
                           (list(keys),))
        count, checksum = rows[0]
        self.rows_read += int(count)
        return Digest(int(count), int(checksum))

    def row_hashes(self, keys: Sequence[Key]) -> dict[Key, int]:
        assert self.key is not None
        k = _ident(self.key.name)
        rows = self._query(f"SELECT {k}, {self._hash()} FROM {self.relation} WHERE {k} = ANY({self._keys_param()})",
                           (list(keys),))
        self.rows_read += len(rows)
        return {row[0]: int(row[1]) for row in rows}

    # --- a whole-table pass (cdcwatch.reconcile.bucketed) ---------------------------------------------------------------
    def estimated_rows(self) -> int:
        rows = self._query("SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = %s::regclass", (self.relation,))
        return int(rows[0][0]) if rows else 0

    def _quoted_key(self) -> str:
        assert self.key is not None
        return _ident(self.key.name)

    def _bucket(self, plan: Buckets, key: str) -> str:
        return pg_bucket(plan, key)


class ApplyRowsSide(_PostgresSide):
    """The reference apply job's target: the live (not deleted) rows of one `table_id` in `<schema>.rows`."""

    def __init__(self, side: str, config: TableConfig, table_id: str) -> None:
        super().__init__(side, config)
        self.table_id = table_id
        self.relation = f"{_ident(config.apply_schema)}.rows"

    def describe(self) -> None:
        found = self._query("SELECT to_regclass(%s) IS NOT NULL", (self.relation,))
        if not found[0][0]:
            raise SideError(self.side, f"{self.relation} not found: is apply_schema the apply job's target_schema?")
        return None

    def _hash(self) -> str:
        return pg_image_hash([apply_value(column, '"row"') for column in self.columns])

    def newest_time(self, column: str) -> float | None:
        """Debezium's encoding of the time: an ISO string (ZonedTimestamp) or microseconds (MicroTimestamp)."""
        if column not in self.newest_queries:
            self.describe()
            micros = apply_value(Column(column, "timestamp"), '"row"')
            self.newest_queries[column] = (f"SELECT (max(({micros})::numeric) / 1000000.0)::float8 FROM {self.relation} "
                                           "WHERE table_id = %s AND NOT deleted")
        rows = self._query(self.newest_queries[column], (self.table_id,))
        self.rows_read += 1
        return None if rows[0][0] is None else float(rows[0][0])

    def _render(self, keys: Sequence[Key]) -> list[str]:
        assert self.key is not None
        return [render_row_key(self.key.name, key) for key in keys]

    def _parse(self, row_key: str) -> Key:
        assert self.key is not None
        try:
            ((name, value),) = json.loads(row_key)
        except (ValueError, TypeError):
            raise SideError(self.side, f"row_key {row_key[:80]!r} of {self.table_id} is not a single-column key") from None
        if name != self.key.name or not isinstance(value, (int, str)) or isinstance(value, bool):
            raise SideError(self.side, f"row_key {row_key[:80]!r} of {self.table_id} does not hold the key "
                                       f"{self.key.name!r}: set `key` to the source's key column")
        return value

    def keys_after(self, after: Key | None, limit: int) -> list[Key]:
        assert self.key is not None
        base = f"SELECT row_key FROM {self.relation} WHERE table_id = %s AND NOT deleted"
        if after is None:
            rows = self._query(f"{base} ORDER BY row_key LIMIT %s", (self.table_id, limit))
        else:
            rows = self._query(f"{base} AND row_key > %s ORDER BY row_key LIMIT %s",
                               (self.table_id, render_row_key(self.key.name, after), limit))
        self.rows_read += len(rows)
        return [self._parse(row[0]) for row in rows]

    def digest(self, keys: Sequence[Key]) -> Digest:
        rows = self._query(f"SELECT count(*), coalesce(sum(h), 0)::numeric FROM (SELECT {self._hash()} AS h FROM "
                           f"{self.relation} WHERE table_id = %s AND NOT deleted AND row_key = ANY(%s::text[])) x",
                           (self.table_id, self._render(keys)))
        count, checksum = rows[0]
        self.rows_read += int(count)
        return Digest(int(count), int(checksum))

    def row_hashes(self, keys: Sequence[Key]) -> dict[Key, int]:
        rows = self._query(f"SELECT row_key, {self._hash()} FROM {self.relation} WHERE table_id = %s AND NOT deleted "
                           f"AND row_key = ANY(%s::text[])", (self.table_id, self._render(keys)))
        self.rows_read += len(rows)
        return {self._parse(row[0]): int(row[1]) for row in rows}

