"""The normalised row image both sides hash, so the same row gives the same 60-bit hash on every engine.

Each compared column becomes a text by its type class (from the side's own catalog; for the apply job's JSON rows,
from the source's), NULL becomes `N`, any other value `<UTF-8 bytes>:<text>`, and the fields are joined with `,` in
the column order of the source: an injective image (a value cannot pose as two). The row hash is the first 15 hex
digits of the image's MD5 (UTF-8 bytes) as an integer; a chunk's checksum is the sum of its rows' hashes, which does
not depend on the order rows are read in. Every function here returns SQL text evaluated where the rows are (the
database server, or Spark for a Delta table): rows are hashed where they are, and only counts and sums travel.

Type classes and their text:
- integer: decimal digits; boolean: `1`/`0` (MySQL's TINYINT(1) is an integer that holds 1/0 already);
- decimal: the exact value without trailing fractional zeros (12.50 → `12.5`, 12.00 → `12`);
- float: rounded to 6 decimal places, then as decimal (binary floats print differently per engine; PostgreSQL and
  Spark first take the value's 15 significant digits as a double precision value);
- timestamp (with or without time zone, DATETIME, TIMESTAMP): microseconds since 1970-01-01 UTC (a value without
  a time zone is read as UTC, as Debezium encodes it);
- date: days since 1970-01-01;
- text and everything else: the value's text (compare such a column across engines only where its text agrees,
  else leave it out with `exclude_columns`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["HASH_DIGITS", "Column", "TypeClass", "apply_value", "mysql_image_hash", "mysql_value", "pg_image_hash",
           "pg_value", "spark_image_hash", "spark_type_class", "spark_value", "type_class"]

TypeClass = Literal["integer", "boolean", "decimal", "float", "timestamp", "date", "text"]

HASH_DIGITS = 15
"""Hex digits of the MD5 a row hash keeps: 60 bits, so a sum of a billion hashes still fits a 96-bit decimal."""

_CLASSES: dict[str, TypeClass] = {
    "smallint": "integer", "integer": "integer", "bigint": "integer", "int": "integer", "tinyint": "integer",
    "mediumint": "integer", "boolean": "boolean", "numeric": "decimal", "decimal": "decimal", "real": "float",
    "double precision": "float", "double": "float", "float": "float", "date": "date", "datetime": "timestamp",
    "timestamp": "timestamp", "timestamp without time zone": "timestamp", "timestamp with time zone": "timestamp",
}


@dataclass(frozen=True)
class Column:
    """A compared column: its name, type class and fractional-second precision (timestamps), and the type its
    catalog declares (for the drift between sides, not compared)."""

    name: str
    type_class: TypeClass
    precision: int = 6
    data_type: str = field(default="", compare=False)


def type_class(data_type: str) -> TypeClass:
    """The class of an information_schema.columns.data_type (PostgreSQL or MySQL spelling)."""
    return _CLASSES.get(data_type.lower(), "text")


_SPARK_CLASSES: dict[str, TypeClass] = {
    "tinyint": "integer", "smallint": "integer", "int": "integer", "bigint": "integer", "boolean": "boolean",
    "float": "float", "double": "float", "date": "date", "timestamp": "timestamp", "timestamp_ntz": "timestamp",
}


def spark_type_class(simple_type: str) -> TypeClass:
    """The class of a Spark SQL type as `DataType.simpleString()` spells it (`decimal(12,2)` is a decimal)."""
    return "decimal" if simple_type.startswith("decimal") else _SPARK_CLASSES.get(simple_type, "text")


def _pg_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _my_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def pg_value(column: Column) -> str:
    """The column's normalised text on PostgreSQL."""
    c = _pg_ident(column.name)
    return {
        "integer": f"{c}::text",
        "boolean": f"CASE WHEN {c} THEN '1' WHEN NOT {c} THEN '0' END",  # NULL stays NULL
        "decimal": f"trim_scale({c})::text",
        "float": f"trim_scale(round({c}::float8::numeric, 6))::text",  # 15 significant digits, a real's too
        "timestamp": f"(extract(epoch FROM {c}) * 1000000)::bigint::text",
        "date": f"({c} - DATE '1970-01-01')::text",
        "text": f"{c}::text",
    }[column.type_class]


_NUMBER = r"'^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$'"


def apply_value(column: Column, row: str = "row") -> str:
    """The column's normalised text from the apply job's JSON row image (Debezium's JSON encoding of the source
    type): numbers as JSON numbers or strings (decimal.handling.mode double or string), timestamps as ISO strings
    (ZonedTimestamp) or epoch numbers in ms (precision ≤ 3) or µs, dates as epoch days."""
    text = f"({row} ->> {_pg_literal(column.name)})"
    json = f"({row} -> {_pg_literal(column.name)})"
    number = f"CASE WHEN {text} ~ {_NUMBER} THEN {{}} ELSE {text} END"
    scale = 1000 if column.precision <= 3 else 1
    boolean = f"CASE {text} WHEN 'true' THEN '1' WHEN 'false' THEN '0' ELSE {text} END"
    return {
        "integer": boolean,  # MySQL's TINYINT(1) may be sent as a JSON boolean (declared BOOLEAN)
        "boolean": boolean,
        "decimal": number.format(f"trim_scale({text}::numeric)::text"),
        "float": number.format(f"trim_scale(round({text}::numeric, 6))::text"),
        "timestamp": (f"CASE jsonb_typeof({json}) WHEN 'string' THEN (extract(epoch FROM {text}::timestamptz) * 1000000)"
                      f"::bigint::text ELSE ({text}::numeric * {scale})::bigint::text END"),
        "date": text,
        "text": text,
    }[column.type_class]


def _pg_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def mysql_value(column: Column) -> str:
    """The column's normalised text on MySQL/MariaDB (the session's time zone is UTC)."""
    c = _my_ident(column.name)

    def trimmed(expression: str) -> str:
        return (f"IF(LOCATE('.', {expression}) > 0, TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM {expression})), "
                f"{expression})")

    return {
        "integer": f"CAST({c} AS CHAR)",
        "boolean": f"CAST({c} AS CHAR)",
        "decimal": trimmed(f"CAST({c} AS CHAR)"),
        "float": trimmed(f"CAST(CAST(ROUND({c}, 6) AS DECIMAL(65, 6)) AS CHAR)"),
        "timestamp": f"CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {c}) AS CHAR)",
        "date": f"CAST(DATEDIFF({c}, '1970-01-01') AS CHAR)",
        "text": f"CONVERT({c} USING utf8mb4)",
    }[column.type_class]


def pg_image_hash(values: list[str]) -> str:
    """The row hash of normalised column texts, on PostgreSQL (bigint)."""
    fields = ", ".join(f"coalesce(octet_length({v})::text || ':' || {v}, 'N')" for v in values)
    return f"('x' || substr(md5(concat_ws(',', {fields})), 1, {HASH_DIGITS}))::bit({HASH_DIGITS * 4})::bigint"


def _spark_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _spark_trimmed(text: str) -> str:
    """A decimal's text without trailing fractional zeros, as PostgreSQL's trim_scale prints it."""
    return f"CASE WHEN instr({text}, '.') > 0 THEN regexp_replace(regexp_replace({text}, '0+$', ''), '[.]$', '') ELSE {text} END"


def spark_value(column: Column) -> str:
    """The column's normalised text in Spark SQL, as PostgreSQL's `pg_value` gives it. A timestamp without a time
    zone (TIMESTAMP_NTZ) is read as UTC: the session's time zone must be UTC."""
    c = _spark_ident(column.name)
    return {
        "integer": f"CAST({c} AS STRING)",
        "boolean": f"CASE WHEN {c} THEN '1' WHEN NOT {c} THEN '0' END",  # NULL stays NULL
        "decimal": _spark_trimmed(f"CAST({c} AS STRING)"),
        "float": f"CASE WHEN {c} IS NOT NULL THEN "
                 + _spark_trimmed(f"CAST(CAST(format_string('%.15g', CAST({c} AS DOUBLE)) AS DECIMAL(38, 6)) AS STRING)")
                 + " END",
        "timestamp": f"CAST(unix_micros(CAST({c} AS TIMESTAMP)) AS STRING)",
        "date": f"CAST(unix_date({c}) AS STRING)",
        "text": f"CAST({c} AS STRING)",
    }[column.type_class]


def spark_image_hash(values: list[str]) -> str:
    """The row hash of normalised column texts, in Spark SQL (BIGINT)."""
    fields = ", ".join(f"coalesce(concat(CAST(octet_length({v}) AS STRING), ':', {v}), 'N')" for v in values)
    return f"CAST(conv(substr(md5(concat_ws(',', {fields})), 1, {HASH_DIGITS}), 16, 10) AS BIGINT)"


def mysql_image_hash(values: list[str]) -> str:
    """The row hash of normalised column texts, on MySQL/MariaDB (unsigned bigint)."""
    fields = ", ".join(f"COALESCE(CONCAT(LENGTH(CONVERT({v} USING utf8mb4)), ':', {v}), 'N')" for v in values)
    return (f"CAST(CONV(SUBSTRING(MD5(CONVERT(CONCAT_WS(',', {fields}) USING utf8mb4)), 1, {HASH_DIGITS}), 16, 10) "
            f"AS UNSIGNED)")
