"""The reference CDC apply job: Debezium topics in Kafka → Spark Structured Streaming → PostgreSQL or Delta Lake.

Reads the topics with Spark's own Kafka source (spark-sql-kafka, from `--jars` or the cluster's
classpath), decodes every record with the cdcwatch event model, and merges
each micro-batch into the target guarded by source position (`target.PostgresTarget`, or with
`--target delta:ROOT` one typed Delta table per source table, `delta_target.DeltaTarget`). The cdcwatch
listener is attached: apply lag, freshness, duplicates, stale and malformed events on /metrics.
Run as `cdcwatch-apply` (or `python -m spark_listeners.apply`); bad flags exit 2 before Spark starts.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from psycopg.conninfo import conninfo_to_dict

from cdcwatch.spark import DEFAULT_METRICS_ADDRESS, DEFAULT_METRICS_PORT
from spark_listeners.delta_target import DeltaMissing

__all__ = ["ApplySettings", "KafkaSourceMissing", "build_query", "require_kafka_source", "main", "run_apply", "spark_session"]

log = logging.getLogger("cdcwatch.apply")

_EXIT_CONFIG = 2
DELTA_PREFIX = "delta:"
"""`--target delta:ROOT`: Delta Lake tables under ROOT (a path, or a URL of a filesystem Spark reads)."""


@dataclass
class ApplySettings:
    bootstrap_servers: str
    subscribe_pattern: str
    target_dsn: str
    checkpoint: str
    master: str = "local[*]"
    query_name: str = "cdc_apply"
    target_schema: str = "cdcwatch_apply"
    trigger_seconds: float = 1.0
    metrics_address: str = DEFAULT_METRICS_ADDRESS
    metrics_port: int | None = DEFAULT_METRICS_PORT
    pushgateway: str | None = None
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    jars: tuple[str, ...] = ()
    """Jars for the driver and executors (spark-sql-kafka and its dependencies, when Spark lacks them)."""
    commit_group: str | None = None
    """Also commit each finished batch's end offsets under this consumer group (for lag monitoring)."""
    linger_after_failure_seconds: float = 0.0
    """Keep serving /metrics this long after the query failed, so Prometheus records the failure."""
    kafka_options: dict[str, str] = field(default_factory=dict)

    @property
    def delta_root(self) -> str | None:
        """Where the Delta tables live, when the target is Delta Lake."""
        return self.target_dsn[len(DELTA_PREFIX):] if self.target_dsn.startswith(DELTA_PREFIX) else None


def spark_session(master: str, app_name: str = "cdcwatch-apply", jars: tuple[str, ...] = (), delta: bool = False) -> Any:
    """A session on `master` with `jars` (and Delta Lake's SQL extension and catalog when `delta`); local runs bind
    to loopback and keep shuffles small."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need this interpreter's packages
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.streaming.metricsEnabled", "true"))
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    if delta:
        builder = (builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
                   .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"))
    if master.startswith("local"):
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        if delta:  # a table's log is replayed in this many tasks (50 by default: meant for a cluster)
            builder = builder.config("spark.databricks.delta.snapshotPartitions", "2")
    return builder.getOrCreate()


class KafkaSourceMissing(RuntimeError):
    """Spark has no Kafka source: spark-sql-kafka is not on its classpath."""


def require_kafka_source(spark: Any) -> None:
    """Fail early, naming the fix, when `format("kafka")` would not load."""
    try:
        spark._jvm.java.lang.Class.forName("org.apache.spark.sql.kafka010.KafkaSourceProvider", True,
                                           spark._jvm.Thread.currentThread().getContextClassLoader())
    except Exception:
        raise KafkaSourceMissing(
            f"Spark's Kafka source is not on the classpath: pass --jars with spark-sql-kafka-0-10_2.13-{spark.version}.jar"
            " and its dependencies (kafka-clients, spark-token-provider-kafka-0-10, commons-pool2), or run under"
            f" spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:{spark.version}") from None


def build_query(spark: Any, settings: ApplySettings, listener: Any) -> Any:
    """Start the streaming query; `listener.metrics` receives each batch's sink outcome."""
    from pyspark.sql import functions as F

    from spark_listeners import decode_events, instrument
    from spark_listeners.decode import ROW_CHANGES
    from spark_listeners.delta_target import DeltaTarget
    from spark_listeners.target import STAGED_COLUMNS, PostgresTarget

    require_kafka_source(spark)
    delta = DeltaTarget(settings.delta_root, settings.query_name) if settings.delta_root is not None else None
    target = PostgresTarget(settings.target_dsn, settings.target_schema) if delta is None else None
    if delta is not None:
        delta.create(spark)
    elif target is not None:
        target.create()
    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", settings.bootstrap_servers)
              .option("subscribePattern", settings.subscribe_pattern)
              .option("startingOffsets", "earliest")
              .option("failOnDataLoss", str(settings.fail_on_data_loss).lower()))
    if settings.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(settings.max_offsets_per_trigger))
    for name, value in settings.kafka_options.items():
        reader = reader.option(f"kafka.{name}", value)
    events = instrument(decode_events(reader.load()))
    changes = ((F.col("kind") == "data") & F.col("op").isin(*ROW_CHANGES)
               & F.col("position").isNotNull() & F.col("row_key").isNotNull())
    query_name = settings.query_name

    def apply_batch(batch: Any, batch_id: int) -> None:
        if delta is not None:
            outcome = delta.apply(batch, batch_id, changes)
        else:
            assert target is not None
            target.clear_batch(batch_id)
            staged = batch.where(changes).select("*", "stage_latency.*").select(*STAGED_COLUMNS)
            staged.foreachPartition(lambda rows: target.stage(batch_id, rows))
            outcome = target.merge(batch_id)
        listener.metrics.sink(query_name, outcome, batch_id)
        if outcome.duplicates or outcome.stale:
            log.info("batch %d: %d applied, %d duplicates, %d stale", batch_id, outcome.applied, outcome.duplicates,
                     outcome.stale)

    return (events.writeStream.queryName(query_name)
            .option("checkpointLocation", settings.checkpoint)
            .trigger(processingTime=f"{settings.trigger_seconds:g} seconds")
            .foreachBatch(apply_batch)
            .start())


def run_apply(settings: ApplySettings) -> int:
    """Run until the query stops; 0 when stopped cleanly (SIGTERM), 1 when it failed."""
    from spark_listeners import CdcMetricsListener

    logging.getLogger("py4j").setLevel(logging.WARNING)  # one INFO line per callback otherwise
    spark = spark_session(settings.master, jars=settings.jars, delta=settings.delta_root is not None)
    spark.sparkContext.setLogLevel("WARN")
    listener = CdcMetricsListener.attach(spark, settings.metrics_port, settings.metrics_address, settings.pushgateway)
    if settings.commit_group:
        from spark_listeners.commit import OffsetCommitter

        spark.streams.addListener(OffsetCommitter(settings.bootstrap_servers, settings.commit_group,
                                                  settings.query_name, settings.kafka_options, listener.metrics))
    query = build_query(spark, settings, listener)
    log.info("query %s running on %s; metrics on http://%s:%s/metrics", settings.query_name, settings.master,
             settings.metrics_address, settings.metrics_port)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    failed = False
    try:
        while not stopping.is_set() and not query.awaitTermination(0.5):
            pass
        if query.isActive:
            query.stop()
    except Exception as exc:  # StreamingQueryException: the listener has recorded it as failed
        failed = True
        log.error("query %s failed: %s", settings.query_name, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    if failed and settings.metrics_port is not None:
        stopping.wait(settings.linger_after_failure_seconds)  # let Prometheus scrape the failed state
    spark.stop()
    return 1 if failed else 0


def parser() -> argparse.ArgumentParser:
    """The flags of `cdcwatch-apply`."""
    apply = argparse.ArgumentParser(prog="cdcwatch-apply", description=(
        "The reference Spark CDC apply job (Kafka → PostgreSQL or Delta Lake), the cdcwatch listener attached."))
    apply.add_argument("--bootstrap-servers", required=True, help="Kafka bootstrap servers")
    apply.add_argument("--subscribe-pattern", required=True,
                       help=r"regex of the topics to read, e.g. 'inventory\..*|__debezium-heartbeat\.inventory'")
    apply.add_argument("--target", required=True, help="PostgreSQL connection string of the target, or delta:ROOT for "
                       "one typed Delta Lake table per source table under ROOT (a path or a filesystem URL)")
    apply.add_argument("--target-schema", default="cdcwatch_apply", help="schema of the PostgreSQL target's tables")
    apply.add_argument("--checkpoint", required=True, help="Spark checkpoint directory (offsets live here)")
    apply.add_argument("--master", default="local[*]", help="Spark master URL")
    apply.add_argument("--query-name", default="cdc_apply", help="the `query` label")
    apply.add_argument("--trigger-seconds", type=float, default=1.0, help="micro-batch interval")
    apply.add_argument("--metrics-address", default=DEFAULT_METRICS_ADDRESS,
                       help=f"address the listener's /metrics binds to (default {DEFAULT_METRICS_ADDRESS}: every "
                       "interface; 127.0.0.1 or the driver's own address restricts it)")
    apply.add_argument("--metrics-port", type=int, default=DEFAULT_METRICS_PORT,
                       help=f"port of the listener's /metrics (default {DEFAULT_METRICS_PORT}; 0: none)")
    apply.add_argument("--pushgateway", help="also push the metrics to this Pushgateway after every batch")
    apply.add_argument("--jars", default="", help="comma-separated jars for Spark (spark-sql-kafka-0-10 and its "
                       "dependencies; delta-spark and delta-storage for a Delta target), when Spark's classpath lacks them")
    apply.add_argument("--commit-group", help="also commit finished offsets under this Kafka consumer group, so lag "
                       "monitors (cdcwatch's kafka collector, kafka-consumer-groups) see the job")
    apply.add_argument("--max-offsets-per-trigger", type=int, help="cap on records per micro-batch")
    apply.add_argument("--no-fail-on-data-loss", dest="fail_on_data_loss", action="store_false",
                       help="skip offsets gone from the broker and count them instead of failing")
    apply.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                       help="a librdkafka / Kafka client setting (repeatable)")
    apply.add_argument("--linger-after-failure", type=float, default=0.0, metavar="SECONDS",
                       help="keep /metrics up this long after the query failed")
    return apply


def _validated_run(args: argparse.Namespace) -> int:
    try:
        re.compile(args.subscribe_pattern)
    except re.error as exc:
        print(f"cdcwatch-apply: --subscribe-pattern is not a regular expression: {exc}", file=sys.stderr)
        return _EXIT_CONFIG
    if args.target.startswith(DELTA_PREFIX):
        root = args.target[len(DELTA_PREFIX):].strip()
        if not root:
            print("cdcwatch-apply: --target delta: needs the tables' root, e.g. delta:/data/cdc or delta:s3a://bucket/cdc",
                  file=sys.stderr)
            return _EXIT_CONFIG
        if ":" not in root:  # a local path: Spark's executors need it whole
            args.target = DELTA_PREFIX + os.path.abspath(root)
    else:
        try:
            conninfo_to_dict(args.target)
        except Exception as exc:  # psycopg.ProgrammingError: the libpq parser's message
            print(f"cdcwatch-apply: --target is neither delta:ROOT nor a PostgreSQL connection string: "
                  f"{str(exc).splitlines()[0]}", file=sys.stderr)
            return _EXIT_CONFIG
    options = {}
    for option in args.kafka_option:
        name, equals, value = option.partition("=")
        if not equals or not name:
            print(f"cdcwatch-apply: --kafka-option {option!r}: expected KEY=VALUE", file=sys.stderr)
            return _EXIT_CONFIG
        options[name] = value
    jars = tuple(j for j in args.jars.split(",") if j)
    missing = [jar for jar in jars if not Path(jar).is_file()]
    if missing:
        print(f"cdcwatch-apply: --jars: no such file: {', '.join(missing)}", file=sys.stderr)
        return _EXIT_CONFIG
    try:
        return _run_apply(args, options, jars)
    except (KafkaSourceMissing, DeltaMissing) as exc:
        print(f"cdcwatch-apply: {exc}", file=sys.stderr)
        return _EXIT_CONFIG


def _run_apply(args: argparse.Namespace, options: dict[str, str], jars: tuple[str, ...]) -> int:
    return run_apply(ApplySettings(
        bootstrap_servers=args.bootstrap_servers, subscribe_pattern=args.subscribe_pattern, target_dsn=args.target,
        checkpoint=args.checkpoint, master=args.master, query_name=args.query_name, target_schema=args.target_schema,
        trigger_seconds=args.trigger_seconds, metrics_address=args.metrics_address,
        metrics_port=args.metrics_port or None, pushgateway=args.pushgateway, fail_on_data_loss=args.fail_on_data_loss,
        max_offsets_per_trigger=args.max_offsets_per_trigger, jars=jars,
        commit_group=args.commit_group, kafka_options=options,
        linger_after_failure_seconds=args.linger_after_failure))


def main(argv: Sequence[str] | None = None) -> int:
    """The `cdcwatch-apply` command: its exit code (callable in-process, e.g. by tests)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return _validated_run(parser().parse_args(argv))


def console_main() -> None:
    sys.exit(main())


if __name__ == "__main__":
    console_main()
