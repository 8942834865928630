"""The `delta` collector: a Delta Lake table a pipeline applies changes to, watched from its transaction log alone.

Each configured table is one target (`cdcwatch_up{collector="delta", target=<name>}`): a path that is no Delta
table, a column the table lacks or a log the reader cannot read fails that table only, with a line that names the
table, what is wrong and the fix. The reader (`cdcwatch.delta.log`) keeps the table's live files between scrapes and
reads only the commits written since the last one, so a scrape costs a few small reads whatever the table's size;
no data file is read, and no JVM or Spark runs in the exporter.

What it tells: whether the writer still commits (the version and the newest commit's time: a Spark query that
reports progress while its MERGE fails on every batch commits nothing), what the commits did (rows inserted,
updated, deleted and copied by operation, from each commit's operationMetrics), whether compaction keeps up (small
files, the newest OPTIMIZE) and, with `commit_time_column`, the newest source commit time the table holds, read
from the files' column statistics: how fresh the table is.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from cdcwatch.collection import Collection
from cdcwatch.config import DELTA_URI_DESCRIPTION, StrictModel, check_labels, check_name, check_table_uri
from cdcwatch.delta.log import DEFAULT_SMALL_FILE_BYTES, ROW_KINDS, DeltaLog, TableState
from cdcwatch.families import FamilyBuilder
from cdcwatch.specs import MetricSpec, metric_specs

__all__ = ["DELTA_METRICS", "DeltaCollector", "DeltaTableConfig"]


class DeltaTableConfig(StrictModel):
    """One `delta:` entry: a Delta Lake table, read from its transaction log."""

    name: str = Field(description="Unique table name; the `target` label of its series.")
    uri: str = Field(description=DELTA_URI_DESCRIPTION)
    commit_time_column: str | None = Field(None, description=(
        "The column holding each row's source commit time (a timestamp, or a long of milliseconds since 1970): its "
        "newest value over the table's files, from their statistics, is how fresh the table is. Without it the "
        "freshness series are absent."))
    small_file_bytes: int = Field(DEFAULT_SMALL_FILE_BYTES, ge=1, description=(
        "Files smaller than this count as small (`cdcwatch_delta_small_files`): files any compaction would merge."))
    timeout_seconds: float = Field(10.0, gt=0, le=120, description="Deadline of one collection from this table.")
    labels: dict[str, str] = Field(default_factory=dict, description="Static labels added to every series of this table.")

    _name = field_validator("name")(check_name)
    _labels = field_validator("labels")(check_labels)
    _uri = field_validator("uri")(check_table_uri)


DELTA_TABLE_VERSION = MetricSpec("cdcwatch_delta_table_version", "gauge", (
    "The table's newest version (its newest commit in _delta_log/)."))
DELTA_LAST_COMMIT_TIMESTAMP_SECONDS = MetricSpec("cdcwatch_delta_last_commit_timestamp_seconds", "gauge", (
    "When the newest commit was written (its commitInfo's time, else its log file's): a writer that stopped "
    "committing shows here while its Spark query may still report progress."))
DELTA_COMMITS_TOTAL = MetricSpec("cdcwatch_delta_commits_total", "counter", (
    "Commits read, by commitInfo.operation (MERGE, WRITE, DELETE, OPTIMIZE, ...; UNKNOWN without one), counted from "
    "the commits after the checkpoint the reader started from."), ("operation",))
DELTA_ROWS_TOTAL = MetricSpec("cdcwatch_delta_rows_total", "counter", (
    "Rows the commits wrote, by operation and kind (inserted, updated, deleted, copied: rewritten unchanged), from "
    "each commit's operationMetrics: a MERGE that matches nothing writes no rows while it still commits."),
    ("operation", "kind"))
DELTA_FILES = MetricSpec("cdcwatch_delta_files", "gauge", "Live data files (added and not removed).")
DELTA_SIZE_BYTES = MetricSpec("cdcwatch_delta_size_bytes", "gauge", "Bytes of the live data files.")
DELTA_SMALL_FILES = MetricSpec("cdcwatch_delta_small_files", "gauge", (
    "Live data files smaller than small_file_bytes: a count that keeps growing says compaction does not keep up "
    "with the micro-batches."))
DELTA_LAST_COMPACTION_TIMESTAMP_SECONDS = MetricSpec("cdcwatch_delta_last_compaction_timestamp_seconds", "gauge", (
    "When the newest OPTIMIZE (compaction) committed; absent when none is within the reader's look-back."))
DELTA_NEWEST_APPLIED_CHANGE_TIMESTAMP_SECONDS = MetricSpec(
    "cdcwatch_delta_newest_applied_change_timestamp_seconds", "gauge", (
        "The newest commit_time_column value over the live files, from their statistics: the source commit time of "
        "the newest change the table holds. Absent without commit_time_column or before a file has it."))
DELTA_FILES_WITHOUT_STATS = MetricSpec("cdcwatch_delta_files_without_stats", "gauge", (
    "Live files whose statistics do not cover commit_time_column (written before statistics were collected for "
    "it): a newer change could hide in them."))
DELTA_LOG_FILES_READ_TOTAL = MetricSpec("cdcwatch_delta_log_files_read_total", "counter", (
    "Log files the reader opened (commits, checkpoint parts, hints): what watching the table costs its storage."))
DELTA_METRICS = metric_specs(
    DELTA_TABLE_VERSION,
    DELTA_LAST_COMMIT_TIMESTAMP_SECONDS,
    DELTA_COMMITS_TOTAL,
    DELTA_ROWS_TOTAL,
    DELTA_FILES,
    DELTA_SIZE_BYTES,
    DELTA_SMALL_FILES,
    DELTA_LAST_COMPACTION_TIMESTAMP_SECONDS,
    DELTA_NEWEST_APPLIED_CHANGE_TIMESTAMP_SECONDS,
    DELTA_FILES_WITHOUT_STATS,
    DELTA_LOG_FILES_READ_TOTAL,
)


class DeltaCollector:
    """Collects one Delta table; raises DeltaLogError (up 0) when its log cannot be read as configured."""

    kind = "delta"

    def __init__(self, config: DeltaTableConfig) -> None:
        self.config = config
        self.target = config.name
        self.address = config.uri
        self.log: DeltaLog | None = None
        """The table's reader, made at the first collection (pyarrow, the `delta` extra, is imported then)."""

    def inherit(self, previous: object) -> None:
        """Keep the reader of the collector this one replaces (a configuration reload) when it reads the same table
        the same way: its live files and totals carry on, and counters never reset while cdcwatch runs."""
        if isinstance(previous, DeltaCollector) and (previous.config.uri, previous.config.commit_time_column,
                                                      previous.config.small_file_bytes) == (
                self.config.uri, self.config.commit_time_column, self.config.small_file_bytes):
            self.log = previous.log

    def collect(self) -> Collection:
        if self.log is None:
            try:
                self.log = DeltaLog(self.config.uri, self.config.commit_time_column,
                                    small_file_bytes=self.config.small_file_bytes)
            except ModuleNotFoundError as exc:
                raise RuntimeError(f"the delta collector needs {exc.name}: pip install 'cdcwatch[delta]'") from None
        state = self.log.read()
        builder = FamilyBuilder()
        common = {"target": self.target, **self.config.labels}
        self._families(builder, state, common, self.log.log_files_read)
        return Collection(builder.families(), f"version {state.version}, {state.files} files")

    def _families(self, builder: FamilyBuilder, state: TableState, common: dict[str, str], files_read: int) -> None:
        builder.add_spec(DELTA_TABLE_VERSION, state.version, common)
        builder.add_spec(DELTA_LAST_COMMIT_TIMESTAMP_SECONDS, state.last_commit_timestamp, common)
        for operation, commits in sorted(state.commits.items()):
            builder.add_spec(DELTA_COMMITS_TOTAL, commits, common, operation=operation)
        for operation in sorted({operation for operation, _ in state.rows}):
            for kind in ROW_KINDS:
                builder.add_spec(DELTA_ROWS_TOTAL, state.rows.get((operation, kind), 0), common, operation=operation,
                                 kind=kind)
        builder.add_spec(DELTA_FILES, state.files, common)
        builder.add_spec(DELTA_SIZE_BYTES, state.bytes, common)
        builder.add_spec(DELTA_SMALL_FILES, state.small_files, common)
        if state.last_compaction_timestamp is not None:
            builder.add_spec(DELTA_LAST_COMPACTION_TIMESTAMP_SECONDS, state.last_compaction_timestamp, common)
        if self.config.commit_time_column is not None:
            if state.newest_commit_time is not None:
                builder.add_spec(DELTA_NEWEST_APPLIED_CHANGE_TIMESTAMP_SECONDS, state.newest_commit_time, common)
            builder.add_spec(DELTA_FILES_WITHOUT_STATS, state.files_without_stats, common)
        builder.add_spec(DELTA_LOG_FILES_READ_TOTAL, files_read, common)

    def close(self) -> None:
        pass
