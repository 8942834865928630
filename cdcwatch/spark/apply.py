"""The reference CDC apply job: Debezium topics in Kafka → Spark Structured Streaming → PostgreSQL.

Reads the topics with Spark's own Kafka source (spark-sql-kafka, from `--jars` or the cluster's
classpath), decodes every record with the cdcwatch event model, and merges
each micro-batch into the target guarded by source position (`target.PostgresTarget`). The cdcwatch
listener is attached: apply lag, freshness, duplicates, stale and malformed events on /metrics.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from cdcwatch.spark import DEFAULT_METRICS_ADDRESS, DEFAULT_METRICS_PORT

__all__ = ["ApplySettings", "KafkaSourceMissing", "build_query", "require_kafka_source", "run_apply", "spark_session"]

log = logging.getLogger("cdcwatch.apply")


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


def spark_session(master: str, app_name: str = "cdcwatch-apply", jars: tuple[str, ...] = ()) -> Any:
    """A session on `master` with `jars`; local runs bind to loopback and keep shuffles small."""
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
    if master.startswith("local"):
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
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

    from cdcwatch.spark.target import STAGED_COLUMNS, PostgresTarget
    from spark_listeners import decode_events, instrument
    from spark_listeners.decode import ROW_CHANGES

    require_kafka_source(spark)
    target = PostgresTarget(settings.target_dsn, settings.target_schema)
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
    spark = spark_session(settings.master, jars=settings.jars)
    spark.sparkContext.setLogLevel("WARN")
    listener = CdcMetricsListener.attach(spark, settings.metrics_port, settings.metrics_address, settings.pushgateway)
    if settings.commit_group:
        from cdcwatch.spark.commit import OffsetCommitter

        spark.streams.addListener(OffsetCommitter(settings.bootstrap_servers, settings.commit_group,
                                                  settings.query_name, settings.kafka_options))
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
