"""Typed columns from a change event's Kafka Connect schema: what a Delta table holds of a Debezium row image.

The JsonConverter writes each value as its Connect type encodes it; Debezium's logical types say what it means.
A column's SQL type (for `CREATE TABLE`) and its Python value (for the Arrow batch that is merged) follow:

| Connect schema                                                  | column           | value                          |
|-----------------------------------------------------------------|------------------|--------------------------------|
| int8, int16, int32, int64, float32, float64, boolean, string     | TINYINT … STRING | as is                          |
| bytes                                                           | BINARY           | base64 decoded                 |
| org.apache.kafka.connect.data.Decimal (precise handling)        | DECIMAL(p, s)    | base64 two's complement (1)    |
| io.debezium.data.VariableScaleDecimal                           | DECIMAL(38, 18)  | {scale, value} struct          |
| io.debezium.time.Date, org.apache.kafka.connect.data.Date       | DATE             | days since the epoch           |
| io.debezium.time.Timestamp / MicroTimestamp / NanoTimestamp     | TIMESTAMP_NTZ    | ms / µs / ns since the epoch (2) |
| org.apache.kafka.connect.data.Timestamp                         | TIMESTAMP        | ms since the epoch (UTC)       |
| io.debezium.time.ZonedTimestamp                                 | TIMESTAMP        | ISO-8601 with offset           |
| io.debezium.time.Time / MicroTime / NanoTime, Connect Time      | BIGINT           | µs since midnight              |
| struct, array, map (and Json, Uuid, Xml, Enum, ZonedTime: strings) | STRING         | JSON text                      |

(1) the unscaled value, big-endian; the precision from `connect.decimal.precision`, else 38.
(2) the source's wall time, without a zone (a `timestamp without time zone` column).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Column", "columns_of", "converted", "sql_name"]

_PLAIN = {"int8": "TINYINT", "int16": "SMALLINT", "int32": "INT", "int64": "BIGINT", "float32": "FLOAT",
          "float64": "DOUBLE", "boolean": "BOOLEAN", "string": "STRING", "bytes": "BINARY"}
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)
_DECIMAL_DEFAULT_PRECISION = 38
_VARIABLE_SCALE = 18


@dataclass(frozen=True)
class Column:
    """One typed column: its name, SQL type and how a JSON value becomes the column's Python value."""

    name: str
    sql_type: str
    convert: Callable[[Any], Any]

    @property
    def ddl(self) -> str:
        return f"{sql_name(self.name)} {self.sql_type}"


def sql_name(name: str) -> str:
    """A column or path name quoted for Spark SQL."""
    return "`" + name.replace("`", "``") + "`"


def _unscaled(encoded: str, scale: int) -> decimal.Decimal:
    return decimal.Decimal(int.from_bytes(base64.b64decode(encoded), "big", signed=True)).scaleb(-scale)


def _since_epoch(divisor: int) -> Callable[[Any], dt.datetime]:
    return lambda value: _EPOCH + dt.timedelta(microseconds=value * 1_000_000 // divisor)


def _micros_of_day(multiplier: int, divisor: int) -> Callable[[Any], int]:
    return lambda value: value * multiplier // divisor


def _zoned(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(dt.UTC)


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), sort_keys=True)


def _as_is(value: Any) -> Any:
    return value


_LOGICAL: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "io.debezium.time.Date": ("DATE", lambda days: _EPOCH_DATE + dt.timedelta(days=days)),
    "org.apache.kafka.connect.data.Date": ("DATE", lambda days: _EPOCH_DATE + dt.timedelta(days=days)),
    "io.debezium.time.Timestamp": ("TIMESTAMP_NTZ", _since_epoch(1_000)),
    "io.debezium.time.MicroTimestamp": ("TIMESTAMP_NTZ", _since_epoch(1_000_000)),
    "io.debezium.time.NanoTimestamp": ("TIMESTAMP_NTZ", _since_epoch(1_000_000_000)),
    "org.apache.kafka.connect.data.Timestamp": (
        "TIMESTAMP", lambda ms: dt.datetime.fromtimestamp(ms / 1000, dt.UTC)),
    "io.debezium.time.ZonedTimestamp": ("TIMESTAMP", _zoned),
    "io.debezium.time.Time": ("BIGINT", _micros_of_day(1_000, 1)),
    "org.apache.kafka.connect.data.Time": ("BIGINT", _micros_of_day(1_000, 1)),
    "io.debezium.time.MicroTime": ("BIGINT", _micros_of_day(1, 1)),
    "io.debezium.time.NanoTime": ("BIGINT", _micros_of_day(1, 1_000)),
    "io.debezium.data.VariableScaleDecimal": (
        f"DECIMAL({_DECIMAL_DEFAULT_PRECISION}, {_VARIABLE_SCALE})",
        lambda v: _unscaled(v["value"], int(v["scale"])).quantize(decimal.Decimal(1).scaleb(-_VARIABLE_SCALE))),
}


def _column(field: Mapping[str, Any]) -> Column:
    name, kind, logical = str(field["field"]), field.get("type"), field.get("name")
    if logical == "org.apache.kafka.connect.data.Decimal":
        parameters = field.get("parameters") or {}
        scale = int(parameters.get("scale", 0))
        precision = int(parameters.get("connect.decimal.precision", _DECIMAL_DEFAULT_PRECISION))
        return Column(name, f"DECIMAL({max(precision, scale, 1)}, {scale})", lambda v: _unscaled(v, scale))
    if logical in _LOGICAL:
        sql_type, convert = _LOGICAL[logical]
        return Column(name, sql_type, convert)
    if kind == "bytes":
        return Column(name, "BINARY", base64.b64decode)
    if kind in _PLAIN:
        return Column(name, _PLAIN[kind], _as_is)
    return Column(name, "STRING", _json_text)  # struct, array, map


def columns_of(fields: Sequence[Mapping[str, Any]]) -> list[Column]:
    """The typed columns of a row image, from the `fields` of its Connect struct schema (the envelope's `after`)."""
    return [_column(field) for field in fields]


def converted(columns: Sequence[Column], row: Mapping[str, Any]) -> list[Any]:
    """A row image's values in `columns` order; a column the row lacks (or holds null in) is null."""
    values = []
    for column in columns:
        value = row.get(column.name)
        values.append(None if value is None else column.convert(value))
    return values
