"""Reconciliation as a Spark job (`cdcwatch-reconcile`), on real PostgreSQL, MariaDB, Spark and Delta Lake.

- Spark hashes a Delta table's rows as PostgreSQL and MariaDB hash theirs: for every type class of the row image
  (integer, boolean, decimal, float, timestamp with and without time zone, date, text, NULLs), column by column,
  each key's row hash is the same on the three engines; whole rows' bucket digests agree, with integer buckets and
  with text keys' hash buckets.
- The job, run as a user runs it, compares a PostgreSQL table with its Delta copy: quiet while they agree; rows
  deleted, changed and added in the Delta table behind the pipeline's back are reported by kind and count exactly,
  and a column added at the source that the Delta table lacks is reported as schema drift; repaired, all agree
  again. A pair whose Delta path is not a Delta table is `cdcwatch_up 0` naming the path, beside a pair that
  compares on.
"""

from __future__ import annotations

import datetime as dt
import decimal
import time
from pathlib import Path

import psycopg
import pytest

from cdcwatch.config import DeltaReconcileSide, TableConfig
from cdcwatch.tables.buckets import Buckets, plan_buckets
from cdcwatch.tables.mysql import MysqlTableSide
from cdcwatch.tables.postgres import PostgresTableSide
from devstack.procs import wait_for
from devstack.spark import ReconcileJob, spark_jars
from tests.integration.conftest import parse, value

pytestmark = [pytest.mark.integration, pytest.mark.delta]

COLUMNS = ("id", "i", "b", "d", "f", "r", "ts", "tz", "day", "t")
PG_TYPES = ("CREATE TABLE rs_types (id int PRIMARY KEY, i bigint, b boolean, d numeric(14, 4), f double precision, "
            "r real, ts timestamp(6), tz timestamptz, day date, t text NOT NULL UNIQUE)")
MARIA_TYPES = ("CREATE DATABASE IF NOT EXISTS rsdb; DROP TABLE IF EXISTS rsdb.rs_types; CREATE TABLE rsdb.rs_types "
               "(id INT PRIMARY KEY, i BIGINT, b BOOLEAN, d DECIMAL(14, 4), f DOUBLE, r FLOAT, ts DATETIME(6), "
               "tz DATETIME(6), day DATE, t VARCHAR(64) NOT NULL UNIQUE) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")
UTC = dt.UTC
ROWS = [
    (1, 0, True, decimal.Decimal("12.5000"), 0.1, 0.5, dt.datetime(2024, 1, 2, 3, 4, 5, 123456),
     dt.datetime(2024, 6, 30, 21, 59, 59, 1, tzinfo=UTC), dt.date(2024, 2, 29), "plain"),
    (2, -9007199254740993, False, decimal.Decimal("-0.0500"), 1 / 3, -3.75, dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
     dt.datetime(1970, 1, 1, tzinfo=UTC), dt.date(1969, 7, 20), "ü, with a comma"),
    (3, 9223372036854775807, None, decimal.Decimal("0.0000"), 123456.789, 1024.125, dt.datetime(2038, 1, 19, 3, 14, 8),
     dt.datetime(2099, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), dt.date(1900, 1, 1), "N"),
    (4, None, True, None, None, None, None, None, None, "1:N"),
    (5, 42, False, decimal.Decimal("99999.9999"), -0.0025, 0.0, dt.datetime(2000, 2, 29, 12, 0, 0, 500000),
     dt.datetime(2012, 6, 30, 23, 59, 59, tzinfo=UTC), dt.date(2000, 1, 1), "emoji 🙂"),
    (6, 7, True, decimal.Decimal("1.0000"), 1e15, 1.25, dt.datetime(2001, 9, 9, 1, 46, 40),
     dt.datetime(2001, 9, 9, 1, 46, 40, tzinfo=UTC), dt.date(2001, 9, 9), ""),
]


@pytest.fixture(scope="module")
def spark():
    from spark_listeners.apply import spark_session

    session = spark_session("local[2]", "cdcwatch-test-reconcile", tuple(spark_jars("delta").split(",")), delta=True)
    session.conf.set("spark.sql.session.timeZone", "UTC")
    yield session
    session.stop()


def _delta_types(spark, rows, path: Path) -> None:
    from pyspark.sql import types as T

    schema = T.StructType([
        T.StructField("id", T.IntegerType(), False), T.StructField("i", T.LongType()), T.StructField("b", T.BooleanType()),
        T.StructField("d", T.DecimalType(14, 4)), T.StructField("f", T.DoubleType()), T.StructField("r", T.FloatType()),
        T.StructField("ts", T.TimestampNTZType()), T.StructField("tz", T.TimestampType()), T.StructField("day", T.DateType()),
        T.StructField("t", T.StringType(), False)])
    spark.createDataFrame(rows, schema).write.format("delta").mode("overwrite").save(str(path))


def _sides(postgres, mariadb, spark, path: Path):
    from spark_listeners.reconcile import DeltaSide

    pg = PostgresTableSide("source", TableConfig(engine="postgres", port=postgres.port, user="postgres",
                                                 table="public.rs_types"))
    my = MysqlTableSide("source", TableConfig(engine="mysql", port=mariadb.port, user=mariadb.user,
                                              password=mariadb.password, table="rsdb.rs_types"))
    delta = DeltaSide(spark, "target", DeltaReconcileSide(engine="delta", uri=str(path)))
    return {"postgres": pg, "mariadb": my, "delta": delta}


def _use(sides, key: str, columns: tuple[str, ...]) -> None:
    for side in sides.values():
        shape = side.describe()
        side.use(shape.columns[key], [shape.columns[name] for name in columns])


def test_spark_hashes_rows_as_postgresql_and_mariadb_do(postgres, mariadb, spark, stack_dir) -> None:
    postgres.sql(f"DROP TABLE IF EXISTS rs_types; {PG_TYPES}")
    mariadb.root_sql(MARIA_TYPES)
    with psycopg.connect(f"host=127.0.0.1 port={postgres.port} user=postgres dbname=postgres", autocommit=True) as pg:
        with pg.cursor() as cursor:
            cursor.executemany("INSERT INTO rs_types VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", ROWS)
    import pymysql

    with pymysql.connect(host="127.0.0.1", port=mariadb.port, user=mariadb.user, password=mariadb.password,
                         autocommit=True, charset="utf8mb4", init_command="SET time_zone = '+00:00'") as my:
        with my.cursor() as cursor:
            cursor.executemany("INSERT INTO rsdb.rs_types VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                               [(*row[:7], row[7] and row[7].replace(tzinfo=None), *row[8:]) for row in ROWS])
    path = stack_dir / "rs-types-delta"
    _delta_types(spark, ROWS, path)
    sides = _sides(postgres, mariadb, spark, path)
    keys = [row[0] for row in ROWS]
    # column by column: a type class that normalises differently names itself
    for column in COLUMNS[1:]:
        _use(sides, "id", ("id", column))
        hashes = {engine: side.row_hashes(keys) for engine, side in sides.items()}
        assert hashes["delta"] == hashes["postgres"], column
        if column != "b":  # MariaDB's BOOLEAN is TINYINT(1): an integer, compared where the texts agree
            assert hashes["mariadb"] == hashes["postgres"], column
    # whole rows, digested by integer buckets and (keyed by the text column) by hash buckets
    _use(sides, "id", COLUMNS)
    integer = plan_buckets(len(ROWS), 2, (1, 6), integer=True)
    digests = {engine: side.bucket_digests(integer, lambda: None) for engine, side in sides.items() if engine != "mariadb"}
    assert len(digests["postgres"]) == integer.count == 3
    assert digests["delta"] == digests["postgres"]
    _use(sides, "t", tuple(c for c in COLUMNS if c != "b"))
    text = Buckets(3)
    digests = {engine: side.bucket_digests(text, lambda: None) for engine, side in sides.items()}
    assert sum(d.rows for d in digests["postgres"].values()) == len(ROWS)
    assert digests["delta"] == digests["postgres"] == digests["mariadb"]
    rows = {engine: side.bucket_rows(text, sorted(digests["postgres"])) for engine, side in sides.items()}
    assert rows["delta"] == rows["postgres"] == rows["mariadb"] and len(rows["postgres"]) == len(ROWS)


ITEMS = ("CREATE TABLE rs_items (id int PRIMARY KEY, name text, qty int, price numeric(10, 2), seen timestamptz);"
         "INSERT INTO rs_items SELECT g, 'item ' || g, g % 13, g * 0.25, timestamptz '2026-01-01 00:00:00+00' + "
         "g * interval '1.25 second' FROM generate_series(1, 3000) g")
KINDS = ("missing", "extra", "different")


def _copy_to_delta(spark, postgres, path: Path) -> None:
    from pyspark.sql import types as T

    with psycopg.connect(f"host=127.0.0.1 port={postgres.port} user=postgres dbname=postgres") as connection:
        rows = connection.execute("SELECT id, name, qty, price, seen FROM rs_items").fetchall()
    schema = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("name", T.StringType()),
                           T.StructField("qty", T.IntegerType()), T.StructField("price", T.DecimalType(10, 2)),
                           T.StructField("seen", T.TimestampType()), T.StructField("_cdc_position", T.StringType())])
    spark.createDataFrame([(*row, "0") for row in rows], schema).write.format("delta").mode("overwrite").save(str(path))


def _passes_after(job: ReconcileJob, moment: float, pair: str = "items") -> dict:
    """A scrape taken once a whole pass of `pair` began and ended after `moment`."""
    ends: list[float] = []

    def ended() -> dict | None:
        values = parse(job.metrics())
        end = value(values, "cdcwatch_reconcile_last_pass_timestamp_seconds", target=pair)
        if end is not None and end > moment and end not in ends:
            ends.append(end)
        return values if len(ends) >= 2 else None  # the first may have begun before the moment

    return wait_for(ended, 300, f"two passes of {pair} (log {job.log})", interval=0.5)


def diverged(values: dict, pair: str) -> dict[str, float | None]:
    return {kind: value(values, "cdcwatch_reconcile_rows_diverged", target=pair, kind=kind) for kind in KINDS}


def test_the_job_reports_a_delta_targets_divergences_and_drift(postgres, spark, stack_dir) -> None:
    postgres.sql(f"DROP TABLE IF EXISTS rs_items; {ITEMS}")
    path, bad = stack_dir / "rs-items-delta", stack_dir / "rs-not-a-table"
    bad.mkdir(exist_ok=True)
    _copy_to_delta(spark, postgres, path)
    source = {"engine": "postgres", "port": postgres.port, "user": "postgres", "table": "public.rs_items",
              "rows_per_second": 1_000_000}
    settings = {"chunk_rows": 200, "settle_seconds": 1, "confirm_rechecks": 2, "pass_interval_seconds": 0}
    job = ReconcileJob(stack_dir / "rs-job", [
        {"name": "items", "source": source, "target": {"engine": "delta", "uri": str(path)}, **settings},
        {"name": "nowhere", "source": source, "target": {"engine": "delta", "uri": str(bad)}, **settings}])
    job.start()
    try:
        values = _passes_after(job, time.time())
        assert value(values, "cdcwatch_up", collector="reconcile", target="items") == 1
        assert diverged(values, "items") == dict.fromkeys(KINDS, 0.0)
        assert value(values, "cdcwatch_reconcile_rows_suspect", target="items") == 0
        assert value(values, "cdcwatch_reconcile_schema_drift_columns", target="items", kind="target_only") == 0
        assert value(values, "cdcwatch_reconcile_chunks_checked_total", target="items") >= 15  # 3000 rows / 200
        assert value(values, "cdcwatch_up", collector="reconcile", target="nowhere") == 0
        assert f"{bad} is not a Delta table" in job.log.read_text(encoding="utf-8")

        spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 10")
        spark.sql(f"UPDATE delta.`{path}` SET qty = qty + 1 WHERE id IN (20, 2999)")
        spark.sql(f"INSERT INTO delta.`{path}` VALUES (100000, 'stray', 1, 1.00, timestamp'2026-01-01 00:00:00', '0')")
        postgres.sql("ALTER TABLE rs_items ADD COLUMN tier text")
        expected = {"missing": 1.0, "extra": 1.0, "different": 2.0}

        def reported() -> dict | None:
            values = parse(job.metrics())
            drift = value(values, "cdcwatch_reconcile_schema_drift_columns", target="items", kind="source_only")
            return values if diverged(values, "items") == expected and drift == 1 else None

        wait_for(reported, 300, f"the divergences and the drift reported (log {job.log})", interval=0.5)
        values = _passes_after(job, time.time())
        assert diverged(values, "items") == expected

        postgres.sql("ALTER TABLE rs_items DROP COLUMN tier")
        _copy_to_delta(spark, postgres, path)
        values = _passes_after(job, time.time())
        assert diverged(values, "items") == dict.fromkeys(KINDS, 0.0)
        assert value(values, "cdcwatch_reconcile_schema_drift_columns", target="items", kind="source_only") == 0
    finally:
        job.stop()
