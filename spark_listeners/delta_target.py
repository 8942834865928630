"""The Delta Lake apply target: one typed Delta table per source table, merged once per table and micro-batch.

Under the target's root (a path or a URL Spark's Hadoop filesystems read):
- `<database.schema.table>/`: the source table's columns (`spark_listeners.columns`), plus `_cdc_position` and
  `_cdc_commit_time` (the source position and commit time of the row's last change). A delete removes the row.
- `_cdcwatch/applied`: the ledger of applied changes (table, row key, source position; deletes included). A change
  found there, or twice in a batch, is a **duplicate** (an at-least-once re-delivery); one older than its row's
  newest entry is **stale** and never applied, so a late re-delivery can neither overwrite newer state nor bring a
  deleted row back. Each batch adds its changes and one row of counts per table, in one commit, after its tables.

Every write carries Delta's idempotent-write identity (`txnAppId` the query, `txnVersion` the batch id). A batch
Spark runs again (the job died between its writes and its checkpoint) skips each table it had committed, so nothing
is applied twice, and reports the counts its first run wrote. Entries older than the retention are pruned, except
each row's newest. A table is created from the first change's schema; a column the source adds later is not added
(schema drift, reported by the exporter).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from spark_listeners.columns import Column, columns_of, converted, sql_name
from spark_listeners.latency import MEASURED_STAGES, PER_CHANGE_STAGES, STAGE_CODES, TIMESTAMP_TYPES, stage_codes, stage_sum
from spark_listeners.metrics import CommitSpread, Counts, SinkOutcome

__all__ = ["COMMIT_TIME_COLUMN", "POSITION_COLUMN", "DeltaMissing", "DeltaTarget", "require_delta"]

log = logging.getLogger("cdcwatch.apply")

POSITION_COLUMN = "_cdc_position"
COMMIT_TIME_COLUMN = "_cdc_commit_time"
"""The source commit time of a row's last change: the `commit_time_column` the delta collector reads."""
_LEDGER = "_cdcwatch/applied"
_LEDGER_COLUMNS = ("table_id STRING, row_key STRING, position STRING, batch_id BIGINT, applied_at TIMESTAMP, "
                   "applied BIGINT, duplicates BIGINT, stale BIGINT")
"""A change: table, key, position; a batch's counts of one table: the table, null key and position, and its
applied, duplicates and stale."""
_TXN_APP = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
_PRUNE_EVERY = 50


class DeltaMissing(RuntimeError):
    """Spark has no Delta Lake: delta-spark is not on its classpath or its SQL extension is not configured."""


def require_delta(spark: Any) -> None:
    """Fail early, naming the fix, when Spark lacks Delta Lake."""
    try:
        spark._jvm.java.lang.Class.forName("io.delta.sql.DeltaSparkSessionExtension", True,
                                           spark._jvm.Thread.currentThread().getContextClassLoader())
    except Exception:
        raise DeltaMissing("Delta Lake is not on Spark's classpath: pass --jars with delta-spark_2.13 and "
                           "delta-storage (e.g. 4.4.0), or run under spark-submit --packages "
                           "io.delta:delta-spark_2.13:4.4.0") from None


@dataclass
class DeltaTarget:
    """Delta tables under `root`; `app_id` (the query's name) identifies the job's writes to Delta."""

    root: str
    app_id: str
    ledger_retention_seconds: int = 86400
    _columns: dict[str, list[Column]] = field(default_factory=dict)
    _applied_before: bool = False

    def path(self, name: str) -> str:
        return f"{self.root.rstrip('/')}/{name}"

    def _table(self, name: str) -> str:
        return f"delta.{sql_name(self.path(name))}"

    def create(self, spark: Any) -> None:
        """The bookkeeping tables, if missing; fails early, naming the fix, when Spark lacks Delta Lake."""
        require_delta(spark)
        spark.sql(f"CREATE TABLE IF NOT EXISTS {self._table(_LEDGER)} ({_LEDGER_COLUMNS}) USING delta")

    def apply(self, batch: Any, batch_id: int, changes: Any) -> SinkOutcome:
        """Merge a micro-batch's row changes (`changes`: the filter that selects them); say what happened to them."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        spark = batch.sparkSession
        first, self._applied_before = not self._applied_before, True
        recorded = self._recorded(spark, batch_id) if first else None  # Spark runs a batch again only at its start
        staged = (batch.where(changes)
                  .select("topic", "partition", "offset", "table_id", "row_key", "op", "position", "after", "commit_time",
                          "after_fields", "stage_latency.*")
                  .dropDuplicates(["topic", "partition", "offset"])  # a task run twice
                  .persist())
        seen = (spark.read.format("delta").load(self.path(_LEDGER)).where("row_key IS NOT NULL")
                .join(staged.select("table_id", "row_key").distinct(), ["table_id", "row_key"], "left_semi")
                .select("table_id", "row_key", "position").distinct())
        held = seen.groupBy("table_id", "row_key").agg(F.max("position").alias("held"))
        marked = (staged.withColumn("copy", F.row_number().over(
                      Window.partitionBy("table_id", "row_key", "position").orderBy("topic", "partition", "offset")))
                  .join(seen.withColumn("in_ledger", F.lit(True)), ["table_id", "row_key", "position"], "left")
                  .join(held, ["table_id", "row_key"], "left")
                  .withColumn("fresh", (F.col("copy") == 1) & F.col("in_ledger").isNull())
                  .persist())
        try:
            counted, outcome = _outcome(marked, F)
            if counted is None:
                return outcome
            fresh = marked.where("fresh")
            newest = (fresh.withColumn("rank", F.row_number().over(
                Window.partitionBy("table_id", "row_key").orderBy(F.col("position").desc())))
                .where("rank = 1 AND (held IS NULL OR held < position)").persist())
            try:
                for table_id, sample_key in sorted((r.table_id, r.sample_key) for r in newest.groupBy("table_id").agg(
                        F.first("row_key").alias("sample_key")).collect()):
                    self._merge_table(spark, batch_id, table_id, [name for name, _ in json.loads(sample_key)],
                                      newest.where(F.col("table_id") == table_id), marked, F)
            finally:
                newest.unpersist()
            if recorded is not None:
                return recorded
            now = F.current_timestamp()
            entries = fresh.select("table_id", "row_key", "position", F.lit(batch_id).cast("bigint").alias("batch_id"),
                                   now.alias("applied_at"))
            counts = spark.createDataFrame([(table, batch_id, *each) for table, each in sorted(counted.items())],
                                           "table_id STRING, batch_id BIGINT, applied BIGINT, duplicates BIGINT, "
                                           "stale BIGINT")
            self._idempotent(spark, batch_id)
            try:
                entries.unionByName(counts.withColumn("applied_at", now), allowMissingColumns=True).write.format(
                    "delta").mode("append").save(self.path(_LEDGER))
            finally:
                self._idempotent(spark, None)
            if batch_id % _PRUNE_EVERY == 0:
                self._prune(spark)
            return outcome
        finally:
            marked.unpersist()
            staged.unpersist()

    def _recorded(self, spark: Any, batch_id: int) -> SinkOutcome | None:
        """The counts a first run of this batch wrote, when Spark runs it again."""
        found = (spark.read.format("delta").load(self.path(_LEDGER))
                 .where(f"row_key IS NULL AND batch_id = {int(batch_id)}").collect())
        if not found:
            return None
        log.info("batch %d ran before: its writes are skipped and its counts reported as first written", batch_id)
        return SinkOutcome.of_tables({r.table_id: Counts(r.applied, r.duplicates, r.stale) for r in found})

    def _prune(self, spark: Any) -> None:
        """Forget entries older than the retention, except each row's newest (what keeps a deleted row deleted), and
        the batches' counts older than it (a batch runs again only right after a restart)."""
        spark.sql(f"DELETE FROM {self._table(_LEDGER)} WHERE row_key IS NULL "
                  f"AND applied_at < current_timestamp() - INTERVAL {int(self.ledger_retention_seconds)} SECONDS")
        spark.sql(f"""
            MERGE INTO {self._table(_LEDGER)} t USING (
                SELECT table_id, row_key, position FROM (
                    SELECT *, row_number() OVER (PARTITION BY table_id, row_key ORDER BY position DESC) AS rank
                    FROM {self._table(_LEDGER)} WHERE row_key IS NOT NULL)
                WHERE rank > 1 AND applied_at < current_timestamp() - INTERVAL {int(self.ledger_retention_seconds)} SECONDS
            ) s ON t.table_id = s.table_id AND t.row_key = s.row_key AND t.position = s.position
            WHEN MATCHED THEN DELETE""")

    def _idempotent(self, spark: Any, batch_id: int | None) -> None:
        """The next write is this batch's (None: no batch's)."""
        if batch_id is None:
            spark.conf.unset(_TXN_APP)
            spark.conf.unset(_TXN_VERSION)
        else:
            spark.conf.set(_TXN_APP, self.app_id)
            spark.conf.set(_TXN_VERSION, str(batch_id))

    def _columns_for(self, spark: Any, table_id: str, staged: Any, F: Any) -> list[Column]:
        """The table's typed columns, from the batch's schema of the table (every Debezium record carries it, deletes
        too); a new table is created from it."""
        if table_id in self._columns:
            return self._columns[table_id]
        path = self.path(table_id)
        found = (staged.where((F.col("table_id") == table_id) & F.col("after_fields").isNotNull())
                 .select("after_fields").limit(1).collect())
        if not found:
            raise ValueError(f"{table_id}: its change records carry no Kafka Connect schema, so the Delta target "
                             "cannot type its columns: set value.converter.schemas.enable=true on the connector")
        from_source = {c.name: c for c in columns_of(json.loads(found[0].after_fields))}
        if not _exists(spark, path):
            ddl = ", ".join([c.ddl for c in from_source.values()] + [f"{POSITION_COLUMN} STRING",
                                                                    f"{COMMIT_TIME_COLUMN} TIMESTAMP"])
            spark.sql(f"CREATE TABLE IF NOT EXISTS {self._table(table_id)} ({ddl}) USING delta")
            log.info("created Delta table %s for %s", path, table_id)
        held = [f for f in spark.read.format("delta").load(path).schema.fields
                if f.name not in (POSITION_COLUMN, COMMIT_TIME_COLUMN)]
        # a column the source no longer sends stays, null in new rows; one it added is not applied (schema drift)
        self._columns[table_id] = [from_source.get(f.name) or Column(f.name, f.dataType.simpleString(), lambda v: v)
                                   for f in held]
        return self._columns[table_id]

    def _merge_table(self, spark: Any, batch_id: int, table_id: str, keys: list[str], winners: Any, staged: Any,
                     F: Any) -> None:
        columns = self._columns_for(spark, table_id, staged, F)
        from pyspark.sql.types import _parse_datatype_string

        schema = _parse_datatype_string(_typed_schema(columns))
        typed = winners.select("row_key", "op", "position", "after", "commit_time").mapInArrow(
            _typed_rows(columns, schema), schema)
        view = f"cdc_batch_{batch_id}_{abs(hash(table_id))}"
        typed.createOrReplaceTempView(view)
        names = [c.name for c in columns] + [POSITION_COLUMN, COMMIT_TIME_COLUMN]
        on = " AND ".join(f"t.{sql_name(k)} <=> s.{sql_name(k)}" for k in keys)
        assign = ", ".join(f"t.{sql_name(n)} = s.{sql_name(n)}" for n in names)
        self._idempotent(spark, batch_id)
        try:
            spark.sql(f"""
                MERGE INTO {self._table(table_id)} t USING {view} s ON {on}
                WHEN MATCHED AND s._cdc_op = 'd' AND t.{POSITION_COLUMN} < s.{POSITION_COLUMN} THEN DELETE
                WHEN MATCHED AND s._cdc_op <> 'd' AND t.{POSITION_COLUMN} < s.{POSITION_COLUMN} THEN UPDATE SET {assign}
                WHEN NOT MATCHED AND s._cdc_op <> 'd' THEN
                    INSERT ({', '.join(sql_name(n) for n in names)}) VALUES ({', '.join('s.' + sql_name(n) for n in names)})
            """)
        finally:
            self._idempotent(spark, None)
            spark.catalog.dropTempView(view)


def _exists(spark: Any, path: str) -> bool:
    jvm = spark._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path + "/_delta_log")
    return bool(hadoop_path.getFileSystem(spark._jsc.hadoopConfiguration()).exists(hadoop_path))


def _typed_schema(columns: list[Column]) -> str:
    return ", ".join([c.ddl for c in columns] + [f"{POSITION_COLUMN} STRING", f"{COMMIT_TIME_COLUMN} TIMESTAMP",
                                                  "_cdc_op STRING"])


def _typed_rows(columns: list[Column], schema: Any) -> Any:
    """mapInArrow body: winners (row key, op, position, row image JSON, commit time) → typed rows of `schema`."""

    def convert(batches: Iterator[Any]) -> Iterator[Any]:
        import datetime as dt

        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        arrow = to_arrow_schema(schema, timezone="UTC")
        for batch in batches:
            rows = []
            for change in batch.to_pylist():
                image = json.loads(change["after"]) if change["after"] else dict(json.loads(change["row_key"]))
                commit = change["commit_time"]
                rows.append([*converted(columns, image), change["position"],
                             None if commit is None else dt.datetime.fromtimestamp(commit, dt.UTC), change["op"]])
            yield pa.RecordBatch.from_arrays([pa.array(list(values), type=field.type) for values, field in
                                              zip(zip(*rows, strict=True), arrow, strict=True)] if rows else
                                             [pa.array([], type=field.type) for field in arrow], schema=arrow)

    return convert


def _outcome(marked: Any, F: Any) -> tuple[dict[str, Counts] | None, SinkOutcome]:
    """A batch's marked changes: its counts by table (None when it has no row change) and, with them, the new
    changes' commit-time spread and latency by stage, keyed as `merge_summaries` returns a batch."""
    fresh = F.col("fresh")
    sums = []
    for stage, timestamp_type in MEASURED_STAGES:
        counted = fresh & (F.col(f"{stage}_us") > 0)
        if timestamp_type:
            counted &= (F.col(f"{stage}_code") / STAGE_CODES).cast("int") == TIMESTAMP_TYPES.index(timestamp_type)
        sums.append(F.sum(F.when(counted, F.col(f"{stage}_us"))).alias(stage_sum(stage, timestamp_type)))
    codes = {stage: STAGE_CODES * (1 if stage == "capture" else len(TIMESTAMP_TYPES)) for stage in PER_CHANGE_STAGES}
    counts = [F.count_if(fresh & (F.col(f"{stage}_code") == code)).alias(f"{stage}_{code}")
              for stage, size in codes.items() for code in range(size)]
    committed = F.when(fresh, F.col("commit_time"))
    row = marked.agg(
        F.count(F.lit(1)).alias("total"), F.count_if(fresh).alias("new"),
        F.count(committed).alias("n"), F.min(committed).alias("oldest"),
        F.expr("percentile_disc(0.01) WITHIN GROUP (ORDER BY CASE WHEN fresh THEN commit_time END)").alias("p01"),
        F.expr("percentile_disc(0.5) WITHIN GROUP (ORDER BY CASE WHEN fresh THEN commit_time END)").alias("p50"),
        F.max(committed).alias("newest"), *sums, *counts).first()
    if not row.total:
        return None, SinkOutcome(commits=CommitSpread(), stages={"changes": 0})
    stages: dict[str, Any] = {"changes": row.new}
    for stage, timestamp_type in MEASURED_STAGES:
        stages[stage_sum(stage, timestamp_type)] = row[stage_sum(stage, timestamp_type)]
    for stage, size in codes.items():
        stages[stage_codes(stage)] = [[code, row[f"{stage}_{code}"]] for code in range(size) if row[f"{stage}_{code}"]]
    spread = CommitSpread(int(row.n), row.oldest, row.p01, row.p50, row.newest) if row.n else CommitSpread()
    tables = {r.table_id: Counts(r.new - r.stale, r.total - r.new, r.stale) for r in marked.groupBy("table_id").agg(
        F.count(F.lit(1)).alias("total"), F.count_if(fresh).alias("new"),
        F.count_if(fresh & (F.col("held") > F.col("position"))).alias("stale")).collect()}
    return tables, SinkOutcome.of_tables(tables, spread, stages)
