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


def test_stage_aggregates_put_each_change_in_its_buckets(spark) -> None:
    """capture and produce from chosen timestamps, exactly (a gap of exactly 250 ms is at most 0.25); queue
    against the query's own time, within the time the query ran; heartbeats and malformed records never count."""
    import time

    from cdcwatch.spark.metrics import SparkMetrics
    from spark_listeners.decode import EVENT_SCHEMA, _row
    from spark_listeners.instrument import _observations
    from tests.change_events import change_event
    from tests.unit.test_spark_metrics import BATCH, Clock, buckets

    kafka_ms = int(time.time()) * 1000 - 5000  # whole seconds: every timestamp below is exact in a double
    # (source commit → connector, connector → Kafka timestamp) in ms, and the Kafka timestamp type
    gaps = [(250, 10, 0), (3, -40, 0), (-1500, 600, 1), (45_000, 1000, 1), (700, 20, None)]
    records = []
    for index, (capture, produce, timestamp_type) in enumerate(gaps):
        key, value = change_event("shop", "items", index, kafka_ms - produce - capture, kafka_ms - produce, 100 + index)
        records.append({"topic": "shop.public.items", "partition": 0, "offset": index, "key": key, "value": value,
                        "timestamp": kafka_ms / 1000 if timestamp_type is not None else None, "timestampType": timestamp_type})
    others = [(b'{"serverName": "shop"}', b'{"ts_ms": %d}' % kafka_ms, "__debezium-heartbeat.shop"),
              (b'{"id": 9}', b"not json", "shop.public.items")]
    records += [{"topic": topic, "partition": 0, "offset": 10 + i, "key": key, "value": value, "timestamp": kafka_ms / 1000,
                 "timestampType": 0} for i, (key, value, topic) in enumerate(others)]
    rows = [_row(record) for record in records]
    assert [row[-2:] for row in rows[:3]] == [(kafka_ms / 1000, 0), (kafka_ms / 1000, 0), (kafka_ms / 1000, 1)]

    started = time.time()
    observed = spark.createDataFrame(rows, EVENT_SCHEMA).agg(*_observations()).collect()[0].asDict()
    finished = time.time()
    metrics = SparkMetrics(Clock(finished))
    metrics.progress("q", BATCH, observed)
    assert buckets(metrics, "capture") == {"0.01": 2, "0.25": 3, "0.5": 3, "1.0": 4, "60.0": 5, "600.0": 5, "+Inf": 5,
                                           "count": 5, "sum": 45.953, "skew": 1}
    assert buckets(metrics, "produce", "create_time") == {"0.01": 2, "0.25": 2, "0.5": 2, "1.0": 2, "60.0": 2,
                                                          "600.0": 2, "+Inf": 2, "count": 2, "sum": 0.01, "skew": 1}
    assert buckets(metrics, "produce", "log_append_time") == {"0.01": 0, "0.25": 0, "0.5": 0, "1.0": 2, "60.0": 2,
                                                              "600.0": 2, "+Inf": 2, "count": 2, "sum": 1.6, "skew": 0}
    assert observed["batch_time"] is not None and started - 0.001 <= observed["batch_time"] <= finished
    for timestamp_type in ("create_time", "log_append_time"):
        queue = buckets(metrics, "queue", timestamp_type)
        assert queue["count"] == 2 and queue["skew"] == 0
        assert 2 * (started - 0.001 - kafka_ms / 1000) <= queue["sum"] <= 2 * (finished - kafka_ms / 1000)
