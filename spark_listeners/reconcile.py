"""`cdcwatch-reconcile`: reconciliation as a Spark job, for targets the exporter cannot compare (a Delta Lake table,
which has no server to hash its rows) and tables too large for a chunk walk.

Each configured pair (`ReconcileJobConfig`, the same keys as the exporter's `reconcile` section, plus `engine:
delta` targets) is compared pass after pass on its own thread (`cdcwatch.reconcile.bucketed`): the SQL side
digests its rows by bucket in paged aggregate queries on its own server (the same row image and 60-bit hash as the
exporter's reconciliation, computed where the rows are), the Delta side in one distributed Spark aggregation
(`spark_value`: the same image in Spark SQL); only the differing buckets' rows are read back, and differing rows are
re-checked and confirmed behind the freshness gate as in the exporter.

The job serves its results itself on `/metrics` (default port 10123), under the exporter's names: the
`cdcwatch_reconcile_*` series of each pair and `cdcwatch_up{collector="reconcile"}` with its failure, so the
reconciliation alerts, board and runbook work unchanged with Prometheus scraping the job as `cdcwatch-reconcile`.
It is a long-running service, not a batch: Prometheus's own `up` tells a dead job, and a pass overdue shows in
`cdcwatch_reconcile_last_pass_timestamp_seconds` (no Pushgateway, whose last push would outlive the job).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cdcwatch.config import ConfigError, DeltaReconcileSide, ReconcileJobConfig, SparkReconcileConfig, load_yaml_model
from cdcwatch.exporter import Exporter, ScheduledCollector
from cdcwatch.reconcile.bucketed import BucketedReconciler
from cdcwatch.reconcile.collector import SCRAPE_TIMEOUT_SECONDS, ReconcileCollector
from cdcwatch.tables import make_side
from cdcwatch.tables.buckets import Buckets, spark_bucket
from cdcwatch.tables.image import Column, spark_image_hash, spark_type_class, spark_value
from cdcwatch.tables.side import Digest, Key, Shape, Side, SideError
from spark_listeners.apply import spark_session
from spark_listeners.delta_target import DeltaMissing, require_delta

__all__ = ["DEFAULT_PORT", "DeltaSide", "main"]

log = logging.getLogger("cdcwatch.reconcile")

DEFAULT_PORT = 10123
"""The job's /metrics: next to the exporter's 10121 and the listener's 10122."""
_EXIT_CONFIG = 2


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class DeltaSide:
    """A Delta table read by Spark, a `BucketSide`: every read loads the table's newest version; rows are hashed on
    the executors, and only digests, a few buckets' row hashes and keys reach the driver."""

    def __init__(self, spark: Any, side: str, config: DeltaReconcileSide) -> None:
        self.spark, self.side, self.config = spark, side, config
        self.rows_read = 0
        self.key: Column | None = None
        self.columns: list[Column] = []

    def _spark(self, call: Callable[[], Any]) -> Any:
        """`call()`, Spark's failures (a missing path, no Delta table, an unreadable file) as this side's error."""
        try:
            return call()
        except SideError:
            raise
        except Exception as exc:  # Spark's AnalysisException, a Py4J error, an executor's failure
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if any(marker in text for marker in ("PATH_NOT_FOUND", "DELTA_TABLE_NOT_FOUND", "DELTA_MISSING_DELTA_TABLE",
                                                 "not a Delta table")):
                text = f"{self.config.uri} is not a Delta table ({text}): set uri to the directory holding _delta_log/"
            raise SideError(self.side, text) from None

    def _frame(self) -> Any:
        return self._spark(lambda: self.spark.read.format("delta").load(self.config.uri))

    def describe(self) -> Shape:
        fields = self._spark(lambda: self._frame().schema.fields)
        skipped = set(self.config.bookkeeping_columns)
        return Shape(None, {f.name: Column(f.name, spark_type_class(f.dataType.simpleString()), 6,
                                           f.dataType.simpleString()) for f in fields if f.name not in skipped})

    def use(self, key: Column, columns: Sequence[Column]) -> None:
        self.key, self.columns = key, list(columns)

    def _key(self) -> str:
        assert self.key is not None
        return _ident(self.key.name)

    def _hash(self) -> str:
        return spark_image_hash([spark_value(column) for column in self.columns])

    def _hashes(self, where: Any) -> dict[Key, int]:
        """The row hashes of the rows `where` (SQL text or a Column) selects."""
        rows = self._spark(lambda: self._frame().where(where).selectExpr(f"{self._key()} AS k", f"{self._hash()} AS h")
                           .collect())
        self.rows_read += len(rows)
        return {row["k"]: int(row["h"]) for row in rows}

    def estimated_rows(self) -> int:
        """The table's row count (Delta answers it from the log's file statistics)."""
        return int(self._spark(lambda: self._frame().count()))

    def key_bounds(self) -> tuple[int, int] | None:
        row = self._spark(lambda: self._frame().selectExpr(f"CAST(min({self._key()}) AS BIGINT) AS low",
                                                           f"CAST(max({self._key()}) AS BIGINT) AS high").collect())[0]
        self.rows_read += 2
        return None if row["low"] is None else (int(row["low"]), int(row["high"]))

    def bucket_digests(self, plan: Buckets, pace: Callable[[], None]) -> dict[int, Digest]:
        """One distributed aggregation: each bucket's count and checksum (the hashes summed as DECIMAL(38, 0): a
        BIGINT sum of 60-bit hashes overflows beyond 8 rows)."""
        from pyspark.sql import functions as F

        def aggregate() -> list[Any]:
            frame = self._frame().selectExpr(f"{spark_bucket(plan, self._key())} AS b", f"{self._hash()} AS h")
            return frame.groupBy("b").agg(F.count(F.lit(1)), F.sum(F.col("h").cast("decimal(38,0)"))).collect()

        found = {int(row[0]): Digest(int(row[1]), int(row[2])) for row in self._spark(aggregate)}
        self.rows_read += sum(digest.rows for digest in found.values())
        pace()
        return found

    def bucket_rows(self, plan: Buckets, buckets: Sequence[int]) -> dict[Key, int]:
        chosen = sorted(set(buckets))
        if plan.low is not None:  # ranges of the key: Delta skips the files whose key statistics lie outside
            where = plan.in_ranges(self._key(), chosen)
        else:
            where = f"{spark_bucket(plan, self._key())} IN ({', '.join(map(str, chosen))})"
        return self._hashes(where)

    def row_hashes(self, keys: Sequence[Key]) -> dict[Key, int]:
        from pyspark.sql import functions as F

        return self._hashes(F.col(self._key()).isin(list(keys))) if keys else {}

    def digest(self, keys: Sequence[Key]) -> Digest:
        hashes = self.row_hashes(keys)
        return Digest(len(hashes), sum(hashes.values()))

    def keys_after(self, after: Key | None, limit: int) -> list[Key]:
        """Keys in Spark's order (bytes for text): only this side's walk uses it."""
        from pyspark.sql import functions as F

        def page() -> list[Any]:
            frame = self._frame()
            if after is not None:
                frame = frame.where(F.col(self._key()) > F.lit(after))
            return frame.select(F.col(self._key())).orderBy(F.col(self._key())).limit(limit).collect()

        rows = self._spark(page)
        self.rows_read += len(rows)
        return [row[0] for row in rows]

    def newest_time(self, column: str) -> float | None:
        row = self._spark(lambda: self._frame().selectExpr(f"unix_micros(CAST(max({_ident(column)}) AS TIMESTAMP))")
                          .collect())[0]
        self.rows_read += 1
        return None if row[0] is None else row[0] / 1_000_000

    def close(self) -> None:
        pass  # the session outlives a failure: the next read starts afresh


def _target(spark: Any, pair: SparkReconcileConfig) -> Side:
    if isinstance(pair.target, DeltaReconcileSide):
        return DeltaSide(spark, "target", pair.target)
    return make_side("target", pair.target, pair.source)


def collectors(spark: Any, config: ReconcileJobConfig) -> list[ReconcileCollector]:
    """One comparison per pair, by whole-table passes."""
    return [ReconcileCollector(pair, make_side("source", pair.source, pair.source), _target(spark, pair),
                               reconciler=BucketedReconciler) for pair in config.reconcile]


def parser() -> argparse.ArgumentParser:
    """The flags of `cdcwatch-reconcile`."""
    job = argparse.ArgumentParser(prog="cdcwatch-reconcile", description=(
        "Reconciliation as a Spark job: compares each configured table pair (a SQL source with a SQL or Delta Lake "
        "target) pass after pass and serves the results on /metrics under the exporter's cdcwatch_reconcile_* names."))
    job.add_argument("--config.file", dest="config_file", required=True, help="the pairs (docs/reconcile.md)")
    job.add_argument("--master", default="local[*]", help="Spark master URL")
    job.add_argument("--jars", default="", help="comma-separated jars for Spark (delta-spark_2.13 and delta-storage), "
                     "when Spark's classpath lacks them")
    job.add_argument("--metrics-address", default="0.0.0.0", help="address /metrics binds to (default every interface)")
    job.add_argument("--metrics-port", type=int, default=DEFAULT_PORT, help=f"port of /metrics (default {DEFAULT_PORT})")
    return job


def main(argv: Sequence[str] | None = None) -> int:
    """The `cdcwatch-reconcile` command: runs until SIGTERM or Ctrl-C; 2 on a bad configuration."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parser().parse_args(argv)
    try:
        config = load_yaml_model(args.config_file, ReconcileJobConfig)
    except ConfigError as exc:
        print(f"cdcwatch-reconcile: {exc}", file=sys.stderr)
        return _EXIT_CONFIG
    jars = tuple(j for j in args.jars.split(",") if j)
    missing = [jar for jar in jars if not Path(jar).is_file()]
    if missing:
        print(f"cdcwatch-reconcile: --jars: no such file: {', '.join(missing)}", file=sys.stderr)
        return _EXIT_CONFIG
    delta = any(isinstance(pair.target, DeltaReconcileSide) for pair in config.reconcile)
    spark = spark_session(args.master, "cdcwatch-reconcile", jars, delta=delta)
    spark.conf.set("spark.sql.session.timeZone", "UTC")  # a timestamp without time zone is hashed as UTC
    try:
        if delta:
            require_delta(spark)
    except DeltaMissing as exc:
        print(f"cdcwatch-reconcile: {exc}", file=sys.stderr)
        spark.stop()
        return _EXIT_CONFIG
    return serve(spark, config, args.metrics_address, args.metrics_port)


def serve(spark: Any, config: ReconcileJobConfig, address: str, port: int) -> int:
    """Compare every pair and serve /metrics until told to stop."""
    from prometheus_client import CollectorRegistry, start_http_server

    pairs = collectors(spark, config)
    exporter = Exporter([ScheduledCollector(pair, SCRAPE_TIMEOUT_SECONDS, pair.config) for pair in pairs])
    registry = CollectorRegistry(auto_describe=False)
    registry.register(exporter)
    server, thread = start_http_server(port, addr=address, registry=registry)
    for pair in pairs:
        pair.start()
    log.info("comparing %s; /metrics on %s:%d", ", ".join(p.target for p in pairs), address, port)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    stopping.wait()
    server.shutdown()
    exporter.close()
    spark.stop()
    return 0


def console_main() -> None:
    sys.exit(main())


if __name__ == "__main__":
    console_main()
