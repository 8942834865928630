"""Reconciliation as a Spark job at scale: one whole-table pass of `cdcwatch-reconcile`'s comparison
(`cdcwatch.reconcile.bucketed.BucketedReconciler` with a PostgreSQL source and a Delta Lake target read by Spark)
over tables of --rows rows each (default 1 million and 10 million), and how its time grows.

In `local[2]` and on a standalone cluster of two workers (one core each, devstack/spark_cluster.py), for each size: a
devstack PostgreSQL holds `items (id bigint PRIMARY KEY, name text, qty int, price numeric(12, 2),
seen timestamptz)`, and Spark writes the same rows into a Delta table, where --drift rows are then deleted, changed
or added. Measured, per pass:

- wall time, and rows per second per core (the rows of both sides over the pass time and the machine's cores);
- rows read on the source by PostgreSQL's own statistics (`idx_tup_read` + `seq_tup_read` of the table; it sends
  one row per bucket, and the differing buckets' rows), and the bytes of the Delta table's live files (Spark reads
  each once);
- the CPU time of the source's backend serving the pass (`/proc/<pid>/stat`) and of Spark's JVMs (the driver, whose
  executor threads do the work in local mode, and on the cluster its executors too), and their peak RSS;
- that every drifted row was found, and that the buckets that differ are exactly the drifted rows' buckets: every
  other bucket's digest is the same on both sides.

The table is written to docs/bench/reconcile-spark.md with the date, the machine and the versions. Starts servers:
run it under the server lock.

    flock /tmp/cdcwatch-servers.lock .venv/bin/python bench/reconcile_spark.py [--rows 1000000 10000000]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.reconcile import _cpu_seconds, source_server_version  # noqa: E402
from cdcwatch import __version__  # noqa: E402
from cdcwatch.config import SparkReconcileConfig  # noqa: E402
from cdcwatch.reconcile.bucketed import BucketedReconciler  # noqa: E402
from cdcwatch.tables import make_side  # noqa: E402
from devstack.postgres import PostgresServer  # noqa: E402
from devstack.procs import exit_on_sigterm, free_port  # noqa: E402
from devstack.spark import spark_jars  # noqa: E402

PAGE = ROOT / "docs" / "bench" / "reconcile-spark.md"
TABLE = ("DROP TABLE IF EXISTS items; CREATE TABLE items (id bigint PRIMARY KEY, name text, qty int, "
         "price numeric(12, 2), seen timestamptz); INSERT INTO items SELECT g, 'item ' || g, g % 100, g * 0.25, "
         "timestamptz '2026-01-01 00:00:00+00' + g * interval '1 s' FROM generate_series(1, {rows}) g")
SPARK_ROWS = ("id", "concat('item ', id) AS name", "CAST(id % 100 AS INT) AS qty",
              "CAST(id * 0.25 AS DECIMAL(12, 2)) AS price",
              "timestamp'2026-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) AS seen")
"""The source's rows in Spark SQL (the session in UTC)."""


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return False


def _source_reads(server: PostgresServer) -> int:
    row = server.sql("SELECT pg_stat_clear_snapshot(); SELECT coalesce(max(t.seq_tup_read), 0) + "
                     "coalesce(sum(i.idx_tup_read), 0) FROM pg_stat_user_tables t LEFT JOIN pg_stat_user_indexes i "
                     "USING (relid) WHERE t.relname = 'items'")
    return int(row.splitlines()[-1])


def _jvm_pid(spark: Any) -> int:
    return int(spark._jvm.java.lang.ProcessHandle.current().pid())


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _drift(spark: Any, path: str, rows: int, third: int) -> list[int]:
    step = rows // (3 * third + 1)
    keys = [step * (i + 1) for i in range(2 * third)]
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id IN ({', '.join(map(str, keys[:third]))})")
    spark.sql(f"UPDATE delta.`{path}` SET qty = -1 WHERE id IN ({', '.join(map(str, keys[third:2 * third]))})")
    spark.range(rows + 1, rows + third + 1).selectExpr("id", "'extra' AS name", "0 AS qty",
                                                       "CAST(0 AS DECIMAL(12, 2)) AS price",
                                                       "timestamp'2026-01-01 00:00:00' AS seen") \
        .write.format("delta").mode("append").save(path)
    return [*keys[:2 * third], *range(rows + 1, rows + third + 1)]


def measure(spark: Any, source: PostgresServer, state: Path, rows: int, chunk: int, drift: int,
            executors: Any = lambda: []) -> dict[str, Any]:
    """One pass over `rows` rows; `executors()` gives the PIDs of the executor JVMs outside the driver (a cluster's)."""
    from spark_listeners.reconcile import DeltaSide

    source.sql(TABLE.format(rows=rows))
    source.sql("VACUUM ANALYZE items")
    path = str(state / f"items-{rows}")
    spark.range(1, rows + 1).selectExpr(*SPARK_ROWS).write.format("delta").mode("overwrite").save(path)
    third = max(drift // 3, 1)
    drifted = _drift(spark, path, rows, third)
    config = SparkReconcileConfig.model_validate({
        "name": "bench", "source": {"engine": "postgres", "port": source.port, "user": "postgres",
                                    "table": "public.items", "rows_per_second": 1e12, "statement_timeout_seconds": 300},
        "target": {"engine": "delta", "uri": path, "rows_per_second": 1e12}, "chunk_rows": chunk,
        "settle_seconds": 3600})
    source_side = make_side("source", config.source, config.source)
    target_side = DeltaSide(spark, "target", config.target)  # type: ignore[arg-type]
    reconciler = BucketedReconciler(config, source_side, target_side, wait=_sleep)
    reconciler.prepare()
    backend = int(source_side._connect().execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[attr-defined]
    jvms = [_jvm_pid(spark), *executors()]
    reads_before = _source_reads(source)
    cpu_before, jvm_before, started = _cpu_seconds(backend), sum(map(_cpu_seconds, jvms)), time.monotonic()
    reconciler.run_pass()
    seconds = time.monotonic() - started
    cpu, jvm_cpu = _cpu_seconds(backend) - cpu_before, sum(map(_cpu_seconds, jvms)) - jvm_before
    executor_rss = max((_peak_rss_mib(pid) for pid in jvms[1:]), default=None)
    time.sleep(2)  # the backend's statistics are flushed once it is idle for a second
    reads = _source_reads(source) - reads_before
    plan = reconciler.plan()
    found = {kind: sum(s.kind == kind for s in reconciler.suspects.values()) for kind in ("missing", "extra", "different")}
    drifted_buckets = {(key - plan.low) // plan.width for key in drifted} if plan.low is not None else set()
    source_digests = source_side.bucket_digests(plan, lambda: None)  # type: ignore[attr-defined]
    target_digests = target_side.bucket_digests(plan, lambda: None)
    differing = {b for b in source_digests.keys() | target_digests.keys() if source_digests.get(b) != target_digests.get(b)}
    source_side.close()
    live = spark.read.format("delta").load(path).inputFiles()  # the table's live files, not the ones rewritten
    delta_bytes = sum(Path(uri.removeprefix("file:")).stat().st_size for uri in live)
    return {"rows": rows, "seconds": seconds, "rows_per_core_second": 2 * rows / seconds / (os.cpu_count() or 1),
            "source_reads": reads, "source_cpu": cpu, "jvm_cpu": jvm_cpu, "jvm_rss": _peak_rss_mib(jvms[0]),
            "executor_rss": executor_rss,
            "delta_bytes": delta_bytes, "buckets": reconciler.chunks_checked, "found": found, "third": third,
            "differing": len(differing), "drifted_buckets": len(drifted_buckets),
            "digests_agree": differing == drifted_buckets}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--chunk", type=int, default=10_000, help="rows per bucket")
    parser.add_argument("--drift", type=int, default=30, help="rows made to differ in the target (a third of each kind)")
    parser.add_argument("--modes", nargs="+", choices=["local", "cluster"], default=["local", "cluster"],
                        help="local[2], and/or a standalone cluster of two workers of one core each")
    args = parser.parse_args()
    from devstack.spark_cluster import SparkCluster
    from spark_listeners.apply import spark_session

    results = []
    with tempfile.TemporaryDirectory(prefix="cdcwatch-bench-reconcile-spark-") as state:
        Path(state).chmod(0o755)
        source = PostgresServer(Path(state) / "source", free_port())
        cluster = SparkCluster(Path(state) / "cluster", workers=2, cores=1, memory="2g")
        try:
            source.start()
            for mode in args.modes:
                if mode == "cluster":
                    cluster.start()
                master = cluster.url if mode == "cluster" else "local[2]"
                spark = spark_session(master, "cdcwatch-bench-reconcile", tuple(spark_jars("delta").split(",")), delta=True)
                spark.conf.set("spark.sql.session.timeZone", "UTC")
                spark_version = spark.version
                try:
                    for rows in args.rows:
                        executors = (lambda: [p for i in range(2) for p in cluster.executor_pids(i)]) \
                            if mode == "cluster" else (lambda: [])
                        results.append({"mode": mode, **measure(spark, source, Path(state), rows, args.chunk, args.drift,
                                                                executors)})
                        print(results[-1], flush=True)
                finally:
                    spark.stop()
        finally:
            source.stop()
            cluster.stop()
    cpu_model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), platform.machine())
    names = [("pass duration", lambda r: f"{r['seconds']:.1f} s"),
             ("rows per second per core (both sides)", lambda r: f"{r['rows_per_core_second']:,.0f}"),
             ("time per million rows", lambda r: f"{r['seconds'] / r['rows'] * 1e6:.1f} s"),
             ("rows read on the source (PostgreSQL's statistics)", lambda r: f"{r['source_reads']:,}"),
             ("CPU of the source backend", lambda r: f"{r['source_cpu']:.1f} s"),
             ("CPU of Spark's JVMs (the driver, and the cluster's executors)", lambda r: f"{r['jvm_cpu']:.1f} s"),
             ("peak RSS of the driver JVM (since it started: one JVM for both modes)", lambda r: f"{r['jvm_rss']:,.0f} MiB"),
             ("peak RSS of an executor JVM", lambda r: "(in the driver)" if r["executor_rss"] is None
              else f"{r['executor_rss']:,.0f} MiB"),
             ("Delta table's live files", lambda r: f"{r['delta_bytes'] / 2**20:,.0f} MiB"),
             ("buckets", lambda r: f"{r['buckets']:,}"),
             ("differing rows found (missing / extra / different)",
              lambda r: f"{r['found']['missing']} / {r['found']['extra']} / {r['found']['different']} of {r['third']} each"),
             ("buckets differing / holding a drifted row", lambda r: f"{r['differing']} / {r['drifted_buckets']}")]
    modes = {"local": "local[2]", "cluster": "cluster"}
    header = "| measure | " + " | ".join(f"{r['rows']:,} rows, {modes[r['mode']]}" for r in results) + " |"
    lines = [header, "|---|" + "---|" * len(results)]
    lines += [f"| {name} | " + " | ".join(show(r) for r in results) + " |" for name, show in names]
    table = "\n".join(lines)
    growth = ""
    for mode in args.modes:
        runs = [r for r in results if r["mode"] == mode]
        if len(runs) >= 2:
            first, last = runs[0], runs[-1]
            ratio = (last["seconds"] / last["rows"]) / (first["seconds"] / first["rows"])
            growth += (f"\n\n{modes[mode]}: from {first['rows']:,} to {last['rows']:,} rows the time per row changed "
                       f"by {(ratio - 1) * 100:+.0f} % (goal: at most +20 %).")
    print(table + growth)
    import psycopg

    PAGE.write_text(
        "# Benchmark: reconciliation as a Spark job\n\n"
        "`bench/reconcile_spark.py`: one whole-table pass of `cdcwatch-reconcile`'s comparison, a PostgreSQL "
        "source against a Delta Lake target read by Spark (`local[2]`, and a standalone cluster of two workers of one "
        f"core and 2 GiB each, on the same machine), {args.chunk:,} rows a bucket, "
        f"{3 * results[0]['third']} rows made to differ in the target. Rows read on the source come from "
        "PostgreSQL's own statistics; CPU from /proc/<pid>/stat of the source's backend and of Spark's JVM.\n\n"
        f"Run {time.strftime('%Y-%m-%d', time.gmtime())} on {cpu_model}, {os.cpu_count()} cores; "
        f"PostgreSQL {source_server_version(ROOT)}, Spark {spark_version}, Delta Lake 4.4.0, Python "
        f"{platform.python_version()}, psycopg {psycopg.__version__}, cdcwatch {__version__}.\n\n{table}{growth}\n",
        encoding="utf-8")
    return 0 if all(r["digests_agree"] and all(v == r["third"] for v in r["found"].values()) for r in results) else 1


if __name__ == "__main__":
    exit_on_sigterm()  # stopped by kill: the servers it started stop too
    sys.exit(main())
