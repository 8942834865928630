"""Buckets of keys that every engine computes alike: how a whole-table pass (`cdcwatch.reconcile.bucketed`) splits
a table pair so that each side digests all its rows in one pass, where its rows are, and only the buckets' counts
and checksums travel.

Integer keys fall into ranges of `width` keys from `low` (`floor((key - low) / width)`, exact integer arithmetic
on every engine): a bucket's rows are read back with a range on the key index. Text keys fall into `count`
buckets by the first 32 bits of their MD5: the same on every engine whatever its collation, so a source that
sorts text under `en_US` and a Spark target that sorts by bytes still agree on every bucket; reading a text bucket
back walks the side's keys (in its own order) and keeps the bucket's rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from cdcwatch.tables.side import Digest, Key, Side

__all__ = ["PAGE_ROWS", "BucketSide", "Buckets", "SqlBucketPass", "SqlBuckets", "mysql_bucket", "pg_bucket", "plan_buckets",
           "spark_bucket"]

PAGE_ROWS = 100_000
"""Rows one query of a SQL side reads: its statement stays well within a statement timeout."""


@dataclass(frozen=True)
class Buckets:
    """A pass's buckets: integer keys by ranges (`low`, `width`), text keys by hash (`low` None)."""

    count: int
    low: int | None = None
    width: int = 1
    rows_per_bucket: int = 1
    """About how many rows a bucket holds (as planned)."""

    def range_of(self, bucket: int) -> tuple[int, int]:
        """The keys [from, to) of an integer bucket."""
        assert self.low is not None
        return self.low + bucket * self.width, self.low + (bucket + 1) * self.width

    def in_ranges(self, key: str, buckets: Sequence[int]) -> str:
        """SQL (every engine's, Spark's too) selecting the rows of integer `buckets` by ranges of `key`: an index
        range each, or the files whose key statistics overlap."""
        return " OR ".join(f"({key} >= {self.range_of(b)[0]} AND {key} < {self.range_of(b)[1]})" for b in sorted(set(buckets)))


def plan_buckets(rows: int, chunk_rows: int, bounds: tuple[int, int] | None, integer: bool) -> Buckets:
    """About `chunk_rows` rows a bucket for a table of about `rows` rows; integer keys spread over `bounds` (the
    source's smallest and largest key; None: an empty table)."""
    count = max(1, math.ceil(rows / chunk_rows))
    if not integer:
        return Buckets(count, rows_per_bucket=chunk_rows)
    if bounds is None:
        return Buckets(1, 0, 1, rows_per_bucket=chunk_rows)
    low, high = bounds
    width = max(1, math.ceil((high - low + 1) / count))
    count = math.ceil((high - low + 1) / width)
    return Buckets(count, low, width, rows_per_bucket=max(1, math.ceil(rows / count)))


def _range_bucket(key: str, plan: Buckets, div: str) -> str:
    return (f"CASE WHEN {key} >= {plan.low} THEN ({key} - {plan.low}) {div} {plan.width} "
            f"ELSE -1 - (({plan.low} - {key} - 1) {div} {plan.width}) END")


def pg_bucket(plan: Buckets, key: str) -> str:
    """The bucket of `key` (a quoted column) on PostgreSQL."""
    if plan.low is not None:
        return _range_bucket(f"{key}::bigint", plan, "/")
    return f"mod(('x' || substr(md5({key}::text), 1, 8))::bit(32)::bigint, {plan.count})"


def mysql_bucket(plan: Buckets, key: str) -> str:
    """The bucket of `key` on MySQL/MariaDB."""
    if plan.low is not None:
        return _range_bucket(f"CAST({key} AS SIGNED)", plan, "DIV")
    return f"MOD(CAST(CONV(SUBSTRING(MD5(CONVERT({key} USING utf8mb4)), 1, 8), 16, 10) AS UNSIGNED), {plan.count})"


def spark_bucket(plan: Buckets, key: str) -> str:
    """The bucket of `key` in Spark SQL."""
    if plan.low is not None:
        return _range_bucket(f"CAST({key} AS BIGINT)", plan, "div")
    return f"pmod(CAST(conv(substr(md5(CAST({key} AS STRING)), 1, 8), 16, 10) AS BIGINT), {plan.count})"


class BucketSide(Side, Protocol):
    """A side a whole-table pass reads: every row digested by bucket in one pass, a few buckets' rows read back."""

    def estimated_rows(self) -> int:
        """About how many rows the side holds (its statistics: cheap)."""
        ...

    def key_bounds(self) -> tuple[int, int] | None:
        """The smallest and largest integer key (None: no row)."""
        ...

    def bucket_digests(self, plan: Buckets, pace: Callable[[], None]) -> dict[int, Digest]:
        """Every bucket's count and checksum; `pace` is called after each query (it pays the side's budget)."""
        ...

    def bucket_rows(self, plan: Buckets, buckets: Sequence[int]) -> dict[Key, int]:
        """The row hash of every row in `buckets`."""
        ...


Query = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]


class SqlBuckets:
    """`bucket_digests` and `bucket_rows` of a SQL side, in queries of about PAGE_ROWS rows each. `select` gives
    the side's `SELECT <key> AS k, <bucket> AS b, <row hash> AS h FROM <relation>` for a plan; `key` is the quoted
    key column (its WHERE and ORDER BY)."""

    def __init__(self, side: Side, query: Query, key: str, select: Callable[[Buckets], str]) -> None:
        self.side, self.query, self.key, self.select = side, query, key, select

    def digests(self, plan: Buckets, pace: Callable[[], None]) -> dict[int, Digest]:
        found: dict[int, Digest] = {}
        if plan.low is not None:
            for where in self._range_pages(plan):
                self._add(found, self.query(f"SELECT b, count(*), coalesce(sum(h), 0) FROM ({self.select(plan)} "
                                            f"{where}) x GROUP BY b", ()))
                pace()
            return found
        after: Key | None = None
        while True:
            where, params = self._after(after)
            page = self.query(f"WITH page AS ({self.select(plan)} {where} ORDER BY {self.key} LIMIT {PAGE_ROWS}) "
                              "SELECT b, count(*), coalesce(sum(h), 0), (SELECT max(k) FROM page) FROM page GROUP BY b",
                              params)
            read = self._add(found, page)
            pace()
            if read < PAGE_ROWS:
                return found
            after = page[0][3]

    def rows(self, plan: Buckets, buckets: Sequence[int]) -> dict[Key, int]:
        found: dict[Key, int] = {}
        if plan.low is not None:
            rows = self.query(f"{self.select(plan)} WHERE {plan.in_ranges(self.key, buckets)}", ())
            self.side.rows_read += len(rows)
            return {row[0]: int(row[2]) for row in rows}
        chosen = ", ".join(str(int(b)) for b in sorted(set(buckets)))
        after: Key | None = None
        while True:
            where, params = self._after(after)
            page = self.query(f"WITH page AS ({self.select(plan)} {where} ORDER BY {self.key} LIMIT {PAGE_ROWS}) "
                              f"SELECT k, h, NULL FROM page WHERE b IN ({chosen}) "
                              "UNION ALL SELECT NULL, count(*), max(k) FROM page", params)
            *rows, (_, read, last) = page
            found.update({row[0]: int(row[1]) for row in rows})
            self.side.rows_read += int(read)
            if int(read) < PAGE_ROWS:
                return found
            after = last

    def _add(self, found: dict[int, Digest], page: list[tuple[Any, ...]]) -> int:
        read = 0
        for row in page:
            found[int(row[0])] = Digest(int(row[1]), int(row[2]))
            read += int(row[1])
        self.side.rows_read += read
        return read

    def _after(self, after: Key | None) -> tuple[str, tuple[Any, ...]]:
        return ("", ()) if after is None else (f"WHERE {self.key} > %s", (after,))

    def _range_pages(self, plan: Buckets) -> list[str]:
        """Consecutive buckets of about PAGE_ROWS rows each, the first and the last open-ended: keys outside the
        planned bounds (written since) still fall in some bucket."""
        assert plan.low is not None
        per_page = max(1, PAGE_ROWS // max(plan.rows_per_bucket, 1))
        pages = []
        for first in range(0, plan.count, per_page):
            conditions = []
            if first > 0:
                conditions.append(f"{self.key} >= {plan.range_of(first)[0]}")
            if first + per_page < plan.count:
                conditions.append(f"{self.key} < {plan.range_of(first + per_page)[0]}")
            pages.append("WHERE " + " AND ".join(conditions) if conditions else "")
        return pages


class SqlBucketPass:
    """A SQL side's part of a whole-table pass. The side brings `_query`, `relation`, `rows_read`, `_hash()`,
    `_quoted_key()` (its key column, quoted its engine's way) and `_bucket(plan, key)` (its engine's bucket SQL)."""

    relation: str
    rows_read: int

    def _query(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _quoted_key(self) -> str:
        raise NotImplementedError

    def _hash(self) -> str:
        raise NotImplementedError

    def _bucket(self, plan: Buckets, key: str) -> str:
        raise NotImplementedError

    def key_bounds(self) -> tuple[int, int] | None:
        k = self._quoted_key()
        rows = self._query(f"SELECT min({k}), max({k}) FROM {self.relation}", ())
        self.rows_read += 2
        return None if rows[0][0] is None else (int(rows[0][0]), int(rows[0][1]))

    def _buckets(self) -> SqlBuckets:
        k = self._quoted_key()
        return SqlBuckets(cast(Side, self), self._query, k, lambda plan: (
            f"SELECT {k} AS k, {self._bucket(plan, k)} AS b, {self._hash()} AS h FROM {self.relation}"))

    def bucket_digests(self, plan: Buckets, pace: Callable[[], None]) -> dict[int, Digest]:
        return self._buckets().digests(plan, pace)

    def bucket_rows(self, plan: Buckets, buckets: Sequence[int]) -> dict[Key, int]:
        return self._buckets().rows(plan, buckets)
