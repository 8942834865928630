"""Typed Delta columns from Kafka Connect schemas: the encodings as the Kafka Connect and Debezium docs define them."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from spark_listeners.columns import columns_of, converted


def one(field: dict, value):
    (column,) = columns_of([{"field": "c", **field}])
    return column.sql_type, converted([column], {"c": value})[0]


@pytest.mark.parametrize("field, encoded, sql_type, expected", [
    ({"type": "int16"}, -3, "SMALLINT", -3),
    ({"type": "int64"}, 2 ** 62, "BIGINT", 2 ** 62),
    ({"type": "boolean"}, True, "BOOLEAN", True),
    ({"type": "bytes"}, "AAH/", "BINARY", b"\x00\x01\xff"),
    # Decimal: the unscaled value as big-endian two's complement bytes, base64 in JSON
    ({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
      "parameters": {"scale": "2", "connect.decimal.precision": "12"}}, "/w==", "DECIMAL(12, 2)", Decimal("-0.01")),
    ({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "0"}},
     "AQA=", "DECIMAL(38, 0)", Decimal(256)),
    ({"type": "struct", "name": "io.debezium.data.VariableScaleDecimal"}, {"scale": 3, "value": "BNI="},
     "DECIMAL(38, 18)", Decimal("1.234")),
    ({"type": "int32", "name": "io.debezium.time.Date"}, 19000, "DATE", dt.date(2022, 1, 8)),
    ({"type": "int64", "name": "io.debezium.time.MicroTimestamp"}, 1, "TIMESTAMP_NTZ", dt.datetime(1970, 1, 1, 0, 0, 0, 1)),
    ({"type": "int64", "name": "io.debezium.time.Timestamp"}, -1, "TIMESTAMP_NTZ", dt.datetime(1969, 12, 31, 23, 59, 59, 999000)),
    ({"type": "int64", "name": "io.debezium.time.NanoTimestamp"}, 1_500, "TIMESTAMP_NTZ", dt.datetime(1970, 1, 1, 0, 0, 0, 1)),
    ({"type": "string", "name": "io.debezium.time.ZonedTimestamp"}, "2024-06-30T21:59:59.25Z", "TIMESTAMP",
     dt.datetime(2024, 6, 30, 21, 59, 59, 250000, tzinfo=dt.UTC)),
    ({"type": "int64", "name": "org.apache.kafka.connect.data.Timestamp"}, 1000, "TIMESTAMP",
     dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)),
    ({"type": "int64", "name": "io.debezium.time.MicroTime"}, 3_600_000_001, "BIGINT", 3_600_000_001),
    ({"type": "int32", "name": "io.debezium.time.Time"}, 1, "BIGINT", 1000),
    ({"type": "string", "name": "io.debezium.data.Json"}, '{"a": 1}', "STRING", '{"a": 1}'),
    ({"type": "array", "items": {"type": "int32"}}, [1, 2], "STRING", "[1,2]"),
])
def test_each_encoding_becomes_its_typed_value(field, encoded, sql_type, expected) -> None:
    assert one(field, encoded) == (sql_type, expected)


def test_a_null_or_absent_value_is_null_and_names_are_quoted() -> None:
    columns = columns_of([{"field": "a`b", "type": "int32"}, {"field": "c", "type": "string"}])
    assert converted(columns, {"a`b": None}) == [None, None]
    assert columns[0].ddl == "`a``b` INT"
