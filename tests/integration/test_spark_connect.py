"""`instrument()` and the listener on a Spark Connect session: a real Spark Connect server from pyspark's own jars
(bound to 127.0.0.1), a client session on it, a streaming query over Debezium-format records.

The listener added on the client receives every progress with the observed summaries and counts exactly the
records written; `instrument()` reads the Connect client's plan and refuses a filter between `decode_events()` and
itself, as it does on a classic session.
"""

from __future__ import annotations

import json
import os

import pytest

from devstack.procs import wait_for
from devstack.spark import ConnectServer
from tests.integration.conftest import parse, value

pytestmark = [pytest.mark.integration, pytest.mark.spark]

SERVER = "remote"
QUERY = "connect_apply"
SCHEMA = "key string, value string, topic string, partition int, offset long, timestamp timestamp, timestampType int"


@pytest.fixture(scope="module")
def connect_server(stack_dir):
    server = ConnectServer(stack_dir / "spark-connect")
    server.start()
    yield server
    server.stop()


def record(offset: int, value: str) -> dict:
    return {"key": json.dumps({"id": offset}), "value": value, "topic": f"{SERVER}.public.items", "partition": 0,
            "offset": offset, "timestamp": "2026-01-01T00:00:01.000Z", "timestampType": 0}


def change(offset: int) -> str:
    return json.dumps({"op": "c" if offset % 2 else "u", "ts_ms": 1_767_225_600_500, "after": {"id": offset},
                       "source": {"connector": "postgresql", "name": SERVER, "ts_ms": 1_767_225_600_000, "db": "shop",
                                  "schema": "public", "table": "items", "lsn": 1000 + offset}})


@pytest.fixture
def client_environment():
    """pyspark's Connect client marks the whole process as in Connect mode (SPARK_CONNECT_MODE_ENABLED in its
    environment) and never unmarks it: every later classic session of the test run, and every child process (the
    apply jobs), would then ask for a Connect server. The environment is restored after the test."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def test_instrument_and_the_listener_count_exactly_on_a_spark_connect_session(connect_server, client_environment,
                                                                            tmp_path) -> None:
    from prometheus_client import generate_latest
    from pyspark.sql import SparkSession

    from spark_listeners import CdcMetricsListener, decode_events, instrument

    source = tmp_path / "records"
    source.mkdir()
    changes = [record(offset, change(offset)) for offset in range(6)]
    malformed = [record(6, "not json"), record(7, "[1, 2")]
    (source / "part-0.json").write_text("".join(json.dumps(r) + "\n" for r in changes + malformed))

    spark = SparkSession.builder.remote(connect_server.url).create()
    assert type(spark).__module__.startswith("pyspark.sql.connect")
    listener = CdcMetricsListener.attach(spark)
    try:
        records = spark.readStream.schema(SCHEMA).json(str(source))
        with pytest.raises(ValueError, match="a Filter stands between them"):
            instrument(decode_events(records).where("malformed = 0"))
        events = instrument(decode_events(records).withColumnRenamed("after", "row_after"))
        query = events.writeStream.queryName(QUERY).format("noop").trigger(availableNow=True).start()
        query.awaitTermination(180)
        values = wait_for(lambda: (v := parse(generate_latest(listener.registry).decode())) and
                          value(v, "cdcwatch_spark_query_state", query=QUERY, state="terminated") == 1 and v,
                          60, "the query's progress and termination at the client's listener")
    finally:
        spark.streams.removeListener(listener)
        spark.stop()
    assert value(values, "cdcwatch_spark_events_total", query=QUERY, server=SERVER) == 8
    assert value(values, "cdcwatch_spark_changes_total", query=QUERY, server=SERVER) == 6
    assert value(values, "cdcwatch_spark_malformed_events_total", query=QUERY, server=SERVER) == 2
    assert value(values, "cdcwatch_spark_input_rows_total", query=QUERY) == 8
    for stage, kind in (("capture", ""), ("produce", "create_time"), ("queue", "create_time")):
        assert value(values, "cdcwatch_spark_stage_latency_seconds_count", query=QUERY, stage=stage, timestamp_type=kind) == 6
    assert value(values, "cdcwatch_spark_stage_latency_seconds_sum", query=QUERY, stage="capture", timestamp_type="") == 6 * 0.5
