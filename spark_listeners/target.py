"""The reference apply target: PostgreSQL rows guarded by source position, and a ledger of what was applied.

A batch is staged (COPY from the executors, one staging slice per batch id), then merged in one
transaction on the driver. A Kafka record staged twice (a task run again after its first attempt had staged,
e.g. when its executor was lost before reporting) is one record: the merge reads each topic, partition and offset once.
- an event whose table + row key + source position is in the ledger, or repeats within the batch,
  is a **duplicate** (an at-least-once re-delivery) and is not applied again;
- the others are new: their commit times (`CommitSpread`) are what the batch's apply lag is measured on, and
  their latency by stage (`SinkOutcome.stages`) what the stage histograms count, so a replay raises neither;
- every count is kept by source table (`SinkOutcome.tables`);
- of the new ones, the newest per row is upserted with `... DO UPDATE ... WHERE rows.position < excluded.position`,
  so an older event never overwrites newer state; one older than the target's row is **stale**.
Deletes keep the row as `deleted` with its position, so a late re-delivery cannot resurrect it.
The ledger forgets entries after `ledger_retention` (re-deliveries come from the last offset flush,
seconds to minutes back); older copies then count as stale instead of duplicate.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import psycopg

from spark_listeners.latency import (
    MEASURED_STAGES,
    PER_CHANGE_STAGES,
    STAGE_CODES,
    STAGE_LATENCY_FIELDS,
    TIMESTAMP_TYPES,
    stage_codes,
    stage_sum,
)
from spark_listeners.metrics import CommitSpread, Counts, SinkOutcome

__all__ = ["PostgresTarget", "STAGED_COLUMNS", "STAGE_COLUMNS"]

STAGE_COLUMNS = STAGE_LATENCY_FIELDS
"""The fields of a change's `stage_latency`, staged with it."""
STAGED_COLUMNS = ("topic", "partition", "offset", "table_id", "row_key", "op", "position", "after", "commit_time",
                  *STAGE_COLUMNS)

_SCHEMA_SQL = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.rows (
    table_id text NOT NULL, row_key text NOT NULL, row jsonb, position text COLLATE "C" NOT NULL,
    deleted boolean NOT NULL, commit_time timestamptz, applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, row_key));
CREATE TABLE IF NOT EXISTS {s}.applied (
    table_id text NOT NULL, row_key text NOT NULL, position text COLLATE "C" NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (table_id, row_key, position));
CREATE INDEX IF NOT EXISTS applied_at ON {s}.applied (applied_at);
CREATE UNLOGGED TABLE IF NOT EXISTS {s}.staging (
    batch_id bigint NOT NULL, topic text, partition int, kafka_offset bigint, table_id text NOT NULL,
    row_key text NOT NULL, op text NOT NULL, position text COLLATE "C" NOT NULL, row jsonb, commit_time float8);
ALTER TABLE {s}.staging ADD COLUMN IF NOT EXISTS capture_us bigint, ADD COLUMN IF NOT EXISTS produce_us bigint,
    ADD COLUMN IF NOT EXISTS queue_us bigint, ADD COLUMN IF NOT EXISTS capture_code int,
    ADD COLUMN IF NOT EXISTS produce_code int, ADD COLUMN IF NOT EXISTS queue_code int;
CREATE INDEX IF NOT EXISTS staging_batch ON {s}.staging (batch_id);
"""


def _stages_sql() -> str:
    """The new changes' latency by stage as one JSON object, keyed as `merge_summaries` returns a batch: per stage the
    (code, changes) pairs, per (stage, timestamp type) the sum of the latencies in µs, negative ones as 0."""
    parts = ["'changes', (SELECT count(*) FROM fresh)"]
    for stage in PER_CHANGE_STAGES:
        parts.append(f"'{stage_codes(stage)}', (SELECT coalesce(jsonb_agg(jsonb_build_array(code, n)), '[]') FROM "
                     f"(SELECT {stage}_code AS code, count(*) AS n FROM fresh WHERE {stage}_code IS NOT NULL GROUP BY 1) c)")
    for stage, timestamp_type in MEASURED_STAGES:
        kind = f" AND {stage}_code / {STAGE_CODES} = {TIMESTAMP_TYPES.index(timestamp_type)}" if timestamp_type else ""
        parts.append(f"'{stage_sum(stage, timestamp_type)}', "
                     f"(SELECT sum({stage}_us) FROM fresh WHERE {stage}_us > 0{kind})")
    return "jsonb_build_object(\n    " + ",\n    ".join(parts) + ")"


_MERGE_SQL = """
WITH staged AS (
    SELECT *, row_number() OVER (PARTITION BY topic, partition, kafka_offset ORDER BY ctid) AS attempt
    FROM {s}.staging WHERE batch_id = %(batch)s
), batch AS (
    SELECT *, row_number() OVER (PARTITION BY table_id, row_key, position ORDER BY topic, partition, kafka_offset) AS copy
    FROM staged WHERE attempt = 1 OR kafka_offset IS NULL
), fresh AS (
    SELECT b.* FROM batch b
    WHERE b.copy = 1 AND NOT EXISTS (SELECT 1 FROM {s}.applied a
                                     WHERE (a.table_id, a.row_key, a.position) = (b.table_id, b.row_key, b.position))
), ledger AS (
    INSERT INTO {s}.applied (table_id, row_key, position) SELECT table_id, row_key, position FROM fresh
    ON CONFLICT DO NOTHING RETURNING 1
), newest AS (
    SELECT DISTINCT ON (table_id, row_key) * FROM fresh ORDER BY table_id, row_key, position DESC
), upsert AS (
    INSERT INTO {s}.rows AS r (table_id, row_key, row, position, deleted, commit_time, applied_at)
    SELECT table_id, row_key, CASE WHEN op = 'd' THEN NULL ELSE row END, position, op = 'd', to_timestamp(commit_time), now()
    FROM newest
    ON CONFLICT (table_id, row_key) DO UPDATE
        SET row = excluded.row, position = excluded.position, deleted = excluded.deleted,
            commit_time = excluded.commit_time, applied_at = excluded.applied_at
        WHERE r.position < excluded.position
    RETURNING 1
)
SELECT (SELECT coalesce(jsonb_object_agg(table_id, counts), '{{}}') FROM (
           SELECT b.table_id, jsonb_build_array(
               count(*),
               (SELECT count(*) FROM fresh f WHERE f.table_id = b.table_id),
               (SELECT count(*) FROM fresh f JOIN {s}.rows r USING (table_id, row_key)
                WHERE f.table_id = b.table_id AND r.position > f.position)) AS counts
           FROM batch b GROUP BY b.table_id) per_table),
       (SELECT count(*) FROM upsert),
       (SELECT count(*) FROM ledger),
       (SELECT ARRAY[count(commit_time), min(commit_time), percentile_disc(0.01) WITHIN GROUP (ORDER BY commit_time),
                     percentile_disc(0.5) WITHIN GROUP (ORDER BY commit_time), max(commit_time)] FROM fresh),
       {stages}
"""


_STAGES_SQL = _stages_sql()


@dataclass
class PostgresTarget:
    """`dsn`: a libpq connection string; tables live in `schema`."""

    dsn: str
    schema: str = "cdcwatch_apply"
    ledger_retention_seconds: int = 86400

    def create(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as connection:
            connection.execute(_SCHEMA_SQL.format(s=self.schema))

    def stage(self, batch_id: int, rows: Iterable[Any]) -> None:
        """COPY one partition of a batch's row changes (executor side)."""
        with psycopg.connect(self.dsn) as connection, connection.cursor() as cursor:
            with cursor.copy(f"COPY {self.schema}.staging (batch_id, topic, partition, kafka_offset, table_id, row_key, "
                             f"op, position, row, commit_time, {', '.join(STAGE_COLUMNS)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row((batch_id, *(row[c] for c in STAGED_COLUMNS)))

    def merge(self, batch_id: int) -> SinkOutcome:
        """Apply the staged batch in one transaction; say what happened to its events."""
        with psycopg.connect(self.dsn) as connection:
            counts = connection.execute(_MERGE_SQL.format(s=self.schema, stages=_STAGES_SQL),
                                        {"batch": batch_id}).fetchone()
            if counts is None:
                raise RuntimeError(f"merging batch {batch_id} returned no counts")
            per_table, _, _, spread, stages = counts
            connection.execute(f"DELETE FROM {self.schema}.staging WHERE batch_id <= %s", (batch_id,))
            if batch_id % 50 == 0:
                connection.execute(f"DELETE FROM {self.schema}.applied WHERE applied_at < now() - %s * interval '1 second'",
                                   (self.ledger_retention_seconds,))
        changes, oldest, p01, p50, newest = spread
        commits = CommitSpread(int(changes), oldest, p01, p50, newest) if changes else CommitSpread()
        return SinkOutcome.of_tables({table: Counts(fresh - stale, total - fresh, stale)
                                      for table, (total, fresh, stale) in per_table.items()}, commits, stages)

    def clear_batch(self, batch_id: int) -> None:
        """Drop what an earlier, failed attempt of this batch staged."""
        with psycopg.connect(self.dsn, autocommit=True) as connection:
            connection.execute(f"DELETE FROM {self.schema}.staging WHERE batch_id >= %s", (batch_id,))
