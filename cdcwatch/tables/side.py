"""What the comparison needs of one side of a table pair; another SQL engine is one module implementing `Side`.

A chunk is a set of keys (walked in one side's key index order); both sides then answer for exactly that set, so
the two engines never have to agree on a sort order or on key ranges. Rows stay on their server: a chunk costs a
count and a checksum from each side, and only a narrowed-down handful of rows is fetched as row hashes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cdcwatch.tables.image import Column

__all__ = ["Digest", "Key", "Shape", "Side", "SideError", "key_page", "time_class"]

Key = int | str
"""A single-column key: integer or text."""


@dataclass(frozen=True)
class Digest:
    """A set of rows' count and checksum (the sum of their 60-bit row hashes)."""

    rows: int
    checksum: int


@dataclass(frozen=True)
class Shape:
    """A table as its catalog describes it: the primary key column (None without a single-column one) and the
    columns by name, in table order."""

    key: str | None
    columns: dict[str, Column]


class SideError(RuntimeError):
    """A side failed (down, timed out, refused, misconfigured); `side` is `source` or `target`."""

    def __init__(self, side: str, message: str) -> None:
        self.side = side
        super().__init__(f"{side}: {message}")


class Side(Protocol):
    """One side of a table pair, connected lazily; every method raises on failure. `rows_read` counts the rows the
    side's queries read (keys walked, rows looked up), which the budget is spent on."""

    rows_read: int

    def describe(self) -> Shape | None:
        """The table's shape from the side's catalog; None where the side stores row images without a catalog (the
        apply job's JSON rows): it then takes the source's columns."""
        ...

    def use(self, key: Column, columns: Sequence[Column]) -> None:
        """Compare on `key` and `columns` (in this order) from now on."""
        ...

    def keys_after(self, after: Key | None, limit: int) -> list[Key]:
        """Up to `limit` keys of the side's rows after `after` (from the first without), in its key index order."""
        ...

    def digest(self, keys: Sequence[Key]) -> Digest:
        """The count and checksum of the side's rows among `keys`."""
        ...

    def row_hashes(self, keys: Sequence[Key]) -> dict[Key, int]:
        """The row hash of each of `keys` the side holds."""
        ...

    def newest_time(self, column: str) -> float | None:
        """The newest value of `column` over the side's rows, as seconds since 1970 (a timestamp; an integer is
        milliseconds); None without a row. One aggregate a canary table answers from one row or its index."""
        ...

    def close(self) -> None:
        """Close the connection; the next call connects again."""
        ...


def key_page(query: Callable[[str, Sequence[Any]], list[tuple[Any, ...]]], relation: str, key: str,
             after: Key | None, limit: int) -> list[Key]:
    """The next `limit` keys after `after` in key order: one ranged scan of the key index, the same SQL on every engine
    (`key` and `relation` already quoted the engine's way)."""
    where = f"WHERE {key} > %s " if after is not None else ""
    params: tuple[Any, ...] = (after, limit) if after is not None else (limit,)
    return [row[0] for row in query(f"SELECT {key} FROM {relation} {where}ORDER BY {key} LIMIT %s", params)]


def time_class(side: str, shape: Shape, table: str | None, column: str) -> str:
    """The type class of a canary's time `column` in `shape`: `timestamp` or `integer` (milliseconds since 1970); any
    other, or no such column, is a SideError naming the table and the column."""
    found = shape.columns.get(column)
    if found is None or found.type_class not in ("timestamp", "integer"):
        raise SideError(side, f"{table}.{column} is no timestamp or integer column")
    return found.type_class
