"""`instrument` only observes: the rows of the decoded stream come out exactly as they went in."""

from __future__ import annotations

import json

import pytest

from tests.fixtures import RECORDED

pytestmark = pytest.mark.spark  # needs pyspark (the spark extra)


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[1]").appName("cdcwatch-test-instrument")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "1").config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    yield session
    session.stop()


def decoded_rows() -> list[tuple]:
    """The recorded PostgreSQL and MySQL events as decode_events makes them, and a malformed record."""
    from spark_listeners.decode import _row

    records = [json.loads(line) for name in ("postgres-events.jsonl", "mysql-events.jsonl")
               for line in (RECORDED / name).read_text(encoding="utf-8").splitlines()]
    rows = [_row({"topic": r["destination"], "partition": 0, "offset": offset, "key": r["key"], "value": r["value"]})
            for offset, r in enumerate(records)]
    rows.append(_row({"topic": "pgsrv.public.customers", "partition": 0, "offset": len(rows), "key": None, "value": "{"}))
    return rows


def test_instrument_leaves_rows_and_schema_unchanged(spark) -> None:
    from spark_listeners.decode import EVENT_SCHEMA
    from spark_listeners.instrument import instrument

    rows = decoded_rows()
    assert {row[3] for row in rows} >= {"data", "tombstone", "malformed"}
    events = spark.createDataFrame(rows, EVENT_SCHEMA)
    observed = instrument(events)
    assert observed.schema == events.schema
    assert [tuple(row) for row in observed.collect()] == rows
