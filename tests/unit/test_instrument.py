"""`instrument` only observes: the rows of the decoded stream come out exactly as they went in."""

from __future__ import annotations

import json

import pytest

from tests.fixtures import RECORDED

pytestmark = pytest.mark.spark  # needs pyspark (the spark extra)


@pytest.fixture(scope="module")
def spark():
    import os
    import sys

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need this interpreter's packages
    session = (SparkSession.builder.master("local[1]").appName("cdcwatch-test-instrument")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "1").config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    yield session
    session.stop()


def decode(records: list[dict], batch_time: float) -> list[tuple]:
    """What decode_events makes of Kafka records (dicts of its input columns) in a micro-batch started at
    `batch_time`, as rows of EVENT_SCHEMA."""
    import pyarrow as pa

    from spark_listeners.decode import EVENT_SCHEMA, decode_batches

    columns = {"key": pa.binary(), "value": pa.binary(), "topic": pa.string(), "partition": pa.int32(),
               "offset": pa.int64(), "timestamp": pa.float64(), "timestampType": pa.int32()}
    batch = pa.RecordBatch.from_pydict(
        {**{name: pa.array([r.get(name) for r in records], type=kind) for name, kind in columns.items()},
         "batch_time": pa.array([batch_time] * len(records), type=pa.float64())})
    out = pa.Table.from_batches(list(decode_batches(iter([batch])))).to_pylist()
    return [tuple(row[name] for name in EVENT_SCHEMA.fieldNames()) for row in out]


def stages_of(row: tuple) -> dict:
    """The `stage_latency` of a decoded row."""
    from spark_listeners.decode import EVENT_SCHEMA

    return row[EVENT_SCHEMA.fieldNames().index("stage_latency")]


def observe(spark, rows: list[tuple]) -> dict:
    """What the listener makes of what `instrument` observes over decoded rows: the merged summaries."""
    from spark_listeners.decode import EVENT_SCHEMA
    from spark_listeners.instrument import SUMMARIES, _observations
    from spark_listeners.observation import merge_summaries

    return merge_summaries(spark.createDataFrame(rows, EVENT_SCHEMA).agg(*_observations()).collect()[0][SUMMARIES])


def decoded_rows() -> list[tuple]:
    """The recorded PostgreSQL and MySQL events as decode_events makes them, and a malformed record."""
    records = [json.loads(line) for name in ("postgres-events.jsonl", "mysql-events.jsonl")
               for line in (RECORDED / name).read_text(encoding="utf-8").splitlines()]
    kafka = [{"topic": r["destination"], "partition": 0, "offset": offset, "key": r["key"], "value": r["value"],
              "timestamp": 1795304603.0, "timestampType": offset % 2} for offset, r in enumerate(records)]
    kafka.append({"topic": "pgsrv.public.customers", "partition": 0, "offset": len(kafka), "key": None, "value": "{"})
    return decode(kafka, 1795304604.0)


def test_instrument_leaves_rows_and_schema_unchanged(spark) -> None:
    from spark_listeners.decode import EVENT_SCHEMA
    from spark_listeners.instrument import instrument

    rows = decoded_rows()
    assert {row[3] for row in rows} >= {"data", "tombstone", "malformed"}
    assert any(stages_of(row)["queue_code"] is not None for row in rows)
    events = spark.createDataFrame(rows, EVENT_SCHEMA)
    observed = instrument(events)
    assert observed.schema == events.schema
    assert [tuple(row) for row in observed.collect()] == [tuple(row) for row in events.collect()]


def test_instrument_refuses_a_plan_that_changes_the_decoded_rows(spark) -> None:
    from pyspark.sql import functions as F

    from spark_listeners.decode import decode_events
    from spark_listeners.instrument import instrument

    records = spark.createDataFrame(
        [(b'{"id": 1}', b"{", "shop.public.items", 0, 1)], "key binary, value binary, topic string, partition int, offset long")
    events = decode_events(records)
    kept = [events, events.withColumn("seen", F.lit(1)), events.select("op", "batch_summary").alias("e"),
            events.repartition(2)]
    for frame in kept:
        assert instrument(frame).count() == 1
    changed = {"Filter": events.filter(F.col("malformed") == 0), "GlobalLimit": events.limit(5),
               "Deduplicate": events.dropDuplicates(["op"]),
               "Join": events.join(records.select("offset"), "offset").select(*events.columns),
               "Union": events.union(events)}
    for node, frame in changed.items():
        with pytest.raises(ValueError, match=f"a {node} stands between"):
            instrument(frame)


def kafka_records(kafka_ms: int) -> list[dict]:
    """Row changes whose (source commit → connector, connector → Kafka timestamp) gaps in ms and Kafka
    timestamp type are chosen; then a heartbeat and a malformed record, which never count."""
    from tests.change_events import change_event

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
    return records


def test_decode_puts_each_stage_of_a_change_in_its_bucket() -> None:
    """Exact to the microsecond: a gap of exactly 250 ms is at most 0.25 s, a negative one is its own code;
    what is no row change, or has no Kafka timestamp, has no produce and queue."""
    from spark_listeners.latency import NEGATIVE_CODE, STAGE_CODES

    kafka_ms = 1_795_304_600_000
    rows = decode(kafka_records(kafka_ms), kafka_ms / 1000 + 45.0)
    stages = [stages_of(row) for row in rows]
    assert [(s["capture_us"], s["produce_us"], s["queue_us"]) for s in stages] == [
        (250_000, 10_000, 45_000_000), (3000, -40_000, 45_000_000), (-1_500_000, 600_000, 45_000_000),
        (45_000_000, 1_000_000, 45_000_000), (700_000, None, None), (None, None, None), (None, None, None)]
    # bounds 0.01 0.025 0.05 0.1 0.25 0.5 1 2.5 5 10 30 60 ...: the code is the first bound at least the latency
    assert [(s["capture_code"], s["produce_code"], s["queue_code"]) for s in stages] == [
        (4, 0, 11), (0, NEGATIVE_CODE, 11), (NEGATIVE_CODE, STAGE_CODES + 6, STAGE_CODES + 11),
        (11, STAGE_CODES + 6, STAGE_CODES + 11), (6, None, None), (None, None, None), (None, None, None)]


def test_stage_aggregates_count_each_change_in_its_bucket(spark) -> None:
    """What the listener makes of the observed summaries of decoded rows: the histograms the decoded
    latencies call for, to the microsecond; the batch's start is the micro-batch's."""
    from spark_listeners.metrics import SparkMetrics
    from tests.unit.test_spark_metrics import BATCH, Clock, buckets

    kafka_ms = 1_795_304_600_000
    rows = decode(kafka_records(kafka_ms), kafka_ms / 1000 + 45.0)
    observed = observe(spark, rows)
    assert observed["batch_time"] == kafka_ms / 1000 + 45.0
    assert (observed["events"], observed["changes"], observed["malformed"]) == (7, 5, 1)
    metrics = SparkMetrics(Clock(kafka_ms / 1000 + 46.0))
    metrics.progress("q", BATCH, observed)
    assert buckets(metrics, "capture") == {"0.01": 2, "0.25": 3, "0.5": 3, "1.0": 4, "60.0": 5, "600.0": 5, "+Inf": 5,
                                           "count": 5, "sum": 45.953, "skew": 1}
    assert buckets(metrics, "produce", "create_time") == {"0.01": 2, "0.25": 2, "0.5": 2, "1.0": 2, "60.0": 2,
                                                          "600.0": 2, "+Inf": 2, "count": 2, "sum": 0.01, "skew": 1}
    assert buckets(metrics, "produce", "log_append_time") == {"0.01": 0, "0.25": 0, "0.5": 0, "1.0": 2, "60.0": 2,
                                                              "600.0": 2, "+Inf": 2, "count": 2, "sum": 1.6, "skew": 0}
    for timestamp_type in ("create_time", "log_append_time"):
        assert buckets(metrics, "queue", timestamp_type) == {"0.01": 0, "0.25": 0, "0.5": 0, "1.0": 0, "60.0": 2,
                                                             "600.0": 2, "+Inf": 2, "count": 2, "sum": 90.0, "skew": 0}


def test_decode_events_without_kafka_timestamps_measures_capture_only(spark) -> None:
    """A source without `timestamp` and `timestampType` (not Kafka): null Kafka time, so no produce and queue."""
    from spark_listeners.decode import decode_events

    kafka_ms = 1_795_304_600_000
    records = [{k: r[k] for k in ("key", "value", "topic", "partition", "offset")} for r in kafka_records(kafka_ms)[:2]]
    frame = spark.createDataFrame(records, "key binary, value binary, topic string, partition int, offset long")
    stages = [row["stage_latency"].asDict() for row in decode_events(frame).collect()]
    assert stages == [{"capture_us": 250_000, "produce_us": None, "queue_us": None, "capture_code": 4, "produce_code": None,
                       "queue_code": None},
                      {"capture_us": 3000, "produce_us": None, "queue_us": None, "capture_code": 0, "produce_code": None,
                       "queue_code": None}]


def test_the_target_stages_every_field_of_stage_latency() -> None:
    """The reference sink stages a change's `stage_latency` fields by name: the same fields, in the same order."""
    from spark_listeners.decode import STAGE_LATENCY_SCHEMA
    from spark_listeners.target import STAGE_COLUMNS

    assert tuple(STAGE_LATENCY_SCHEMA.fieldNames()) == STAGE_COLUMNS


def test_a_ticdc_watermark_is_idle_evidence_by_its_commit_time(spark) -> None:
    """A TiCDC WATERMARK (the protocol document's example, its commit_ts set 2 s before the Kafka timestamp) says
    every change before it was sent: the batch's newest heartbeat is its commit time. A TiCDC row change in the
    same batch, later than it, is no such evidence."""
    from spark_listeners.decode import WATERMARK
    from tests.seed_examples import seed_example

    ticdc = "003_7c7f64400a859d22.txt"
    kafka_ms = 1_795_304_600_000
    watermark = json.loads(seed_example(ticdc, '"commit_ts": 3')[0])
    watermark["payload"]["source"]["commit_ts"] = (kafka_ms - 2000) << 18  # TSO: physical ms << 18
    change = json.loads(seed_example(ticdc, '"op": "u"')[0])
    change["payload"]["source"]["commit_ts"] = (kafka_ms - 500) << 18
    records = [{"topic": topic, "partition": 0, "offset": offset, "key": json.dumps(key).encode(),
                "value": json.dumps(value).encode(), "timestamp": kafka_ms / 1000, "timestampType": 0}
               for offset, (topic, key, value) in enumerate([
                   ("ticdc-watermarks", json.loads(seed_example(ticdc, '"name": "test_cluster.watermark.Key"')[0]),
                    watermark),
                   ("ticdc.test.table1", json.loads(seed_example(ticdc, '"name": "test_cluster.test.table1.Key"')[0]),
                    change)])]
    rows = decode(records, kafka_ms / 1000 + 1.0)
    assert [(row[3], row[4]) for row in rows] == [(WATERMARK, "m"), ("data", "u")]
    observed = observe(spark, rows)
    assert observed["newest_heartbeat"] == (kafka_ms - 2000) / 1000
    assert observed["newest_commit"] == (kafka_ms - 500) / 1000


def test_a_backlog_of_year_old_changes_in_one_batch_still_sums() -> None:
    """A topic replayed a year late, 300,000 changes in one Arrow batch: their capture latencies add up past a
    long's range (9.2e18 µs), yet the batch's stage sum is there, and counted in the listener's histogram."""
    import pyarrow as pa

    from spark_listeners.decode import EVENT_SCHEMA, _Stages, batch_summary
    from spark_listeners.metrics import SparkMetrics
    from spark_listeners.observation import merge_summaries
    from tests.change_events import change_event
    from tests.unit.test_spark_metrics import BATCH, Clock, buckets

    kafka_ms, year_ms, changes = 1_795_304_600_000, 365 * 86_400_000, 300_000
    key, value = change_event("shop", "items", 1, kafka_ms - year_ms, kafka_ms, 100)
    rows = decode([{"topic": "shop.public.items", "partition": 0, "offset": 0, "key": key, "value": value,
                    "timestamp": kafka_ms / 1000, "timestampType": 0}], kafka_ms / 1000 + 1.0)
    assert stages_of(rows[0])["capture_us"] == year_ms * 1000
    backlog = pa.Table.from_pylist([dict(zip(EVENT_SCHEMA.fieldNames(), rows[0], strict=True))] * changes)
    columns = {name: backlog.column(name).combine_chunks() for name in backlog.column_names}
    batch_time = pa.array([kafka_ms / 1000 + 1.0] * changes)
    observed = merge_summaries([batch_summary(columns, _Stages(columns, batch_time), batch_time)])
    metrics = SparkMetrics(Clock(kafka_ms / 1000 + 2.0))
    metrics.progress("q", BATCH, observed)
    found = buckets(metrics, "capture")
    assert (found["count"], found["+Inf"]) == (changes, changes)
    assert found["sum"] == pytest.approx(changes * year_ms / 1000, rel=1e-9)
