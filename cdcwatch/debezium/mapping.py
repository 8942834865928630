"""Debezium MBean attribute → Prometheus metric mapping, kept as data.

One `Rule` per attribute of the Debezium snapshot, incremental-snapshot, streaming and
schema-history MBeans (the seed attribute tables), plus Debezium 3.6's lag statistics and the
MySQL binlog and Oracle LogMiner extras. `convert` turns one bean's attribute values into samples.

Each rule exports into a metric family declared once as a `MetricSpec` (name, type, help, labels):
inline where one attribute feeds the family, as a shared constant where several do (one label value
each). `DEBEZIUM_BEAN_METRICS` gathers them (a name declared twice is an error) for the reference.
A rule's label names (its fixed labels, its `key_label`, `state`) are checked against its spec when
the rule is made, so the samples need no check; the collector adds the bean's own labels to them.

Conventions: counters end in `_total`; milliseconds become seconds; booleans 0/1; `-1`/null
sentinels give no sample; free-text attributes are never exported (not even as label values).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum

from cdcwatch.families import MetricSpec, metric_specs, referenced_specs
from cdcwatch.jmx import JmxValue

__all__ = [
    "DEBEZIUM_BEAN_METRICS",
    "Conversion",
    "Rule",
    "RULES",
    "SNAPSHOT_STATE_RULE",
    "Sample",
    "convert",
    "requested_attributes",
    "sources",
]

PREFIX = "cdcwatch_debezium_"
MS = 0.001


class Conversion(Enum):
    """How an attribute's value becomes samples."""

    NUMBER = "number"  # a number; negative = "not available" gives no sample
    BOOLEAN = "boolean"  # true/false → 1/0
    COUNT = "count"  # a list → its length
    PER_KEY = "per_key"  # a map → one sample per key, the key as a label
    NUMERIC_TEXT = "numeric_text"  # a number carried as a string or BigInteger (Oracle SCNs)
    FILE_INDEX = "file_index"  # `mysql-bin.000004` → 4
    PRESENT = "present"  # 1 while the value is set, 0 when null/empty
    STATE = "state"  # a string out of `states` → one series per state, 1 on the current
    FREE_TEXT = "free_text"  # never exported


@dataclass(frozen=True)
class Rule:
    """How one MBean attribute is exported: into the family `spec` (None: free text, never exported)."""

    attribute: str
    spec: MetricSpec | None
    conversion: Conversion = Conversion.NUMBER
    scale: float = 1.0
    labels: tuple[tuple[str, str], ...] = ()  # fixed labels of this attribute's series (one value of a shared family)
    key_label: str = ""  # PER_KEY: label name for the map key
    states: tuple[str, ...] = ()  # STATE: the known states
    zero_is_absent: bool = False  # NUMBER: 0 also means "not set"
    why: str = ""  # FREE_TEXT: why it is not exported

    def __post_init__(self) -> None:
        if (self.spec is None) != (self.conversion is Conversion.FREE_TEXT):
            raise ValueError(f"{self.attribute}: free text, and only free text, has no metric")
        if self.spec is not None:
            self.spec.check_labels(self.label_names)
            if set(self.label_names) != set(self.spec.labels):
                raise ValueError(f"{self.attribute}: labels {self.label_names} are not all of {self.spec.name}'s "
                                 f"{self.spec.labels}")

    @property
    def label_names(self) -> tuple[str, ...]:
        """The labels this rule's samples carry (besides the bean's)."""
        names = tuple(name for name, _ in self.labels)
        names += (self.key_label,) if self.conversion is Conversion.PER_KEY else ()
        return names + (("state",) if self.conversion is Conversion.STATE else ())


@dataclass(frozen=True)
class Sample:
    """One value produced by a rule for one bean."""

    spec: MetricSpec
    labels: tuple[tuple[str, str], ...]
    value: float

    @property
    def metric(self) -> str:
        return self.spec.name


def _g(name: str, help: str, *labels: str) -> MetricSpec:
    return MetricSpec(PREFIX + name, "gauge", help, labels)


def _c(name: str, help: str, *labels: str) -> MetricSpec:
    return MetricSpec(PREFIX + name + "_total", "counter", help, labels)


def _text(attribute: str, why: str) -> Rule:
    return Rule(attribute, None, Conversion.FREE_TEXT, why=why)


_OP = "operation"
_LAG = "Time between the source change and the connector processing it"
# families fed by several attributes, one label value each
_EVENTS_BY_OPERATION = _c("events_by_operation", "Events seen, by operation, since the connector started.", _OP)
_LAG_PERCENTILE = _g("lag_behind_source_percentile_seconds", _LAG + ", by percentile (50, 95, 99).", "percentile")
_TABLE_EVENTS = _c("table_events", "Events seen per table and operation (needs internal.advanced.metrics.enable=true).",
                   _OP, "table")

RULES: tuple[Rule, ...] = (
    # --- common to snapshot and streaming beans -------------------------------------------
    _text("LastEvent", "free text (last event, with key values)"),
    Rule("MilliSecondsSinceLastEvent", _g("seconds_since_last_event", "Seconds since the connector read and processed the most recent event."), scale=MS),
    Rule("TotalNumberOfEventsSeen", _c("events_seen", "Events seen since the connector started.")),
    Rule("TotalNumberOfCreateEventsSeen", _EVENTS_BY_OPERATION, labels=((_OP, "create"),)),
    Rule("TotalNumberOfUpdateEventsSeen", _EVENTS_BY_OPERATION, labels=((_OP, "update"),)),
    Rule("TotalNumberOfDeleteEventsSeen", _EVENTS_BY_OPERATION, labels=((_OP, "delete"),)),
    Rule("NumberOfEventsFiltered", _c("events_filtered", "Events filtered out by include/exclude list rules.")),
    Rule("NumberOfErroneousEvents", _c("erroneous_events", "Events that could not be processed.")),
    Rule("QueueTotalCapacity", _g("queue_capacity", "Length of the queue between the change source and the Kafka Connect loop, in events.")),
    Rule("QueueRemainingCapacity", _g("queue_remaining_capacity", "Free capacity of that queue, in events.")),
    Rule("CurrentQueueSizeInBytes", _g("queue_size_bytes", "Current volume of records in the queue, in bytes.")),
    Rule("MaxQueueSizeInBytes", _g("queue_max_size_bytes", "Queue limit in bytes (only when max.queue.size.in.bytes is set)."), zero_is_absent=True),
    Rule("CapturedTables", _g("captured_tables", "Number of tables the connector captures."), Conversion.COUNT),
    _text("MonitoredTables", "deprecated duplicate of CapturedTables"),
    # --- snapshot ---------------------------------------------------------------------------
    Rule("TotalTableCount", _g("snapshot_tables", "Tables included in the snapshot.")),
    Rule("RemainingTableCount", _g("snapshot_remaining_tables", (
        "Tables the snapshot has yet to copy; 0 once it completed (Debezium counts its signal table, which it never "
        "copies, until it restarts)."))),
    Rule("SnapshotDurationInSeconds", _g("snapshot_duration_seconds", "Time the snapshot has taken so far, paused time included.")),
    Rule("SnapshotPausedDurationInSeconds", _g("snapshot_paused_duration_seconds", "Time the snapshot was paused, added up.")),
    Rule("RowsScanned", _c("snapshot_rows_scanned", "Rows scanned per table (updated every 10,000 rows and when a table completes).", "table"), Conversion.PER_KEY, key_label="table"),
    Rule("HoldingGlobalLock", _g("snapshot_holding_global_lock", "1 while the MySQL snapshot holds the global read lock."), Conversion.BOOLEAN),
    # incremental snapshot
    Rule("ChunkId", _g("incremental_snapshot_chunk_active", "1 while an incremental snapshot chunk is in progress."), Conversion.PRESENT),
    _text("ChunkFrom", "primary-key values (unbounded)"),
    _text("ChunkTo", "primary-key values (unbounded)"),
    _text("TableFrom", "primary-key values (unbounded)"),
    _text("TableTo", "primary-key values (unbounded)"),
    Rule("TableChunkCounts", _g("incremental_snapshot_table_chunks", "Chunks of each table in the incremental snapshot.", "table"), Conversion.PER_KEY, key_label="table"),
    Rule("TableChunksCompletedCounts", _g("incremental_snapshot_table_chunks_completed", "Chunks of each table already snapshotted.", "table"), Conversion.PER_KEY, key_label="table"),
    # --- streaming --------------------------------------------------------------------------
    Rule("Connected", _g("connected", "1 while the connector is connected to the source database."), Conversion.BOOLEAN),
    Rule("MilliSecondsBehindSource", _g("lag_behind_source_seconds", _LAG + " (last event)."), scale=MS),
    Rule("MilliSecondsBehindSourceMinValue", _g("lag_behind_source_min_seconds", _LAG + ", minimum since start."), scale=MS),
    Rule("MilliSecondsBehindSourceMaxValue", _g("lag_behind_source_max_seconds", _LAG + ", maximum since start."), scale=MS),
    Rule("MilliSecondsBehindSourceAverageValue", _g("lag_behind_source_average_seconds", _LAG + ", average since start."), scale=MS),
    Rule("MilliSecondsBehindSourceP50", _LAG_PERCENTILE, scale=MS, labels=(("percentile", "50"),)),
    Rule("MilliSecondsBehindSourceP95", _LAG_PERCENTILE, scale=MS, labels=(("percentile", "95"),)),
    Rule("MilliSecondsBehindSourceP99", _LAG_PERCENTILE, scale=MS, labels=(("percentile", "99"),)),
    Rule("NumberOfCommittedTransactions", _c("committed_transactions", "Processed transactions that were committed.")),
    Rule("SourceEventPosition", _g("source_position", "Numeric coordinates of the last received event (e.g. lsn, scn, binlog position).", "key"), Conversion.PER_KEY, key_label="key"),
    _text("LastTransactionId", "free text (transaction id)"),
    Rule("NumberOfUnchangedEventsSkipped", _c("unchanged_events_skipped", "Update events skipped because no captured column changed.")),
    Rule("NumberOfCreateEventsSeen", _TABLE_EVENTS, Conversion.PER_KEY, key_label="table", labels=((_OP, "create"),)),
    Rule("NumberOfUpdateEventsSeen", _TABLE_EVENTS, Conversion.PER_KEY, key_label="table", labels=((_OP, "update"),)),
    Rule("NumberOfDeleteEventsSeen", _TABLE_EVENTS, Conversion.PER_KEY, key_label="table", labels=((_OP, "delete"),)),
    Rule("NumberOfTruncateEventsSeen", _TABLE_EVENTS, Conversion.PER_KEY, key_label="table", labels=((_OP, "truncate"),)),
    Rule("NumberOfRolledBackTransactions", _c("rolled_back_transactions", "Transactions seen that were rolled back (MySQL, Oracle).")),
    # --- MySQL / MariaDB binlog -------------------------------------------------------------
    Rule("BinlogFilename", _g("binlog_file_number", "Sequence number of the binlog file being read."), Conversion.FILE_INDEX),
    Rule("BinlogPosition", _g("binlog_position_bytes", "Byte offset read within the current binlog file.")),
    Rule("IsGtidModeEnabled", _g("binlog_gtid_mode_enabled", "1 when the server runs with GTIDs."), Conversion.BOOLEAN),
    _text("GtidSet", "free text (GTID set)"),
    Rule("NumberOfSkippedEvents", _c("binlog_skipped_events", "Binlog events skipped (e.g. unparseable).")),
    Rule("NumberOfDisconnects", _c("binlog_disconnects", "Disconnects from the binlog client.")),
    Rule("NumberOfNotWellFormedTransactions", _c("binlog_not_well_formed_transactions", "Transactions without BEGIN or COMMIT/ROLLBACK.")),
    Rule("NumberOfLargeTransactions", _c("binlog_large_transactions", "Transactions too large for the lookahead buffer.")),
    # --- schema history ---------------------------------------------------------------------
    Rule("Status", _g("schema_history_state", "Schema history state; 1 on the current one.", "state"), Conversion.STATE,
         states=("STOPPED", "RECOVERING", "RUNNING")),
    Rule("RecoveryStartTime", _g("schema_history_recovery_start_timestamp_seconds", "When schema history recovery started (Unix time).")),
    Rule("ChangesRecovered", _c("schema_history_changes_recovered", "Schema changes read during recovery.")),
    Rule("ChangesApplied", _c("schema_history_changes_applied", "Schema changes applied during recovery and at run time.")),
    Rule("MilliSecondsSinceLastRecoveredChange", _g("schema_history_seconds_since_last_recovered_change", "Seconds since the last change was recovered."), scale=MS),
    Rule("MilliSecondsSinceLastAppliedChange", _g("schema_history_seconds_since_last_applied_change", "Seconds since the last schema change was applied."), scale=MS),
    _text("LastRecoveredChange", "free text (DDL)"),
    _text("LastAppliedChange", "free text (DDL)"),
    # --- Oracle LogMiner --------------------------------------------------------------------
    Rule("MillisecondsToKeepTransactionsInBuffer", _g("logminer_transaction_retention_seconds", "How long transactions stay in the buffer before being discarded (0 = until commit/rollback)."), scale=MS),
    Rule("SleepTimeInMilliseconds", _g("logminer_sleep_seconds", "Pause between LogMiner queries."), scale=MS),
    Rule("CurrentScn", _g("logminer_current_scn", "Current system change number of the database."), Conversion.NUMERIC_TEXT),
    Rule("OffsetScn", _g("logminer_offset_scn", "SCN the connector restarts from (low watermark)."), Conversion.NUMERIC_TEXT),
    Rule("CommittedScn", _g("logminer_committed_scn", "SCN of the last observed commit (high watermark)."), Conversion.NUMERIC_TEXT),
    Rule("OldestScn", _g("logminer_oldest_scn", "Oldest SCN in the transaction buffer."), Conversion.NUMERIC_TEXT),
    Rule("OldestScnAgeInMilliseconds", _g("logminer_oldest_scn_age_seconds", "Age of the oldest SCN in the transaction buffer."), scale=MS),
    Rule("CurrentLogFileNames", _g("logminer_current_log_files", "Log files in the current mining session."), Conversion.COUNT),
    Rule("BatchSize", _g("logminer_batch_size", "SCN range queried from LogMiner at a time.")),
    Rule("MinimumMinedLogCount", _g("logminer_min_mined_logs", "Fewest logs used by a mining session.")),
    Rule("MaximumMinedLogCount", _g("logminer_max_mined_logs", "Most logs used by a mining session.")),
    _text("RedoLogStatuses", "free text (redo log file names and states)"),
    Rule("LogSwitchCount", _g("logminer_log_switches", "Redo log switches today.")),
    Rule("TotalProcessedRows", _c("logminer_processed_rows", "Rows processed from LogMiner.")),
    Rule("NumberOfActiveTransactions", _g("logminer_active_transactions", "Transactions open in the transaction buffer.")),
    Rule("NumberOfOversizedTransactions", _c("logminer_oversized_transactions", "Transactions discarded for exceeding the event limit.")),
    Rule("TotalChangesCount", _c("logminer_changes", "Changes seen by the connector.")),
    Rule("FetchQueryCount", _c("logminer_fetch_queries", "LogMiner queries run.")),
    Rule("ScnFreezeCount", _c("logminer_scn_freezes", "Consecutive LogMiner queries where the SCN did not move.")),
    Rule("LastDurationOfFetchQueryInMilliseconds", _g("logminer_last_fetch_query_duration_seconds", "Duration of the last LogMiner query."), scale=MS),
    Rule("MaxDurationOfFetchQueryInMilliseconds", _g("logminer_max_fetch_query_duration_seconds", "Longest LogMiner query."), scale=MS),
    Rule("LastBatchProcessingTimeInMilliseconds", _g("logminer_last_batch_processing_duration_seconds", "Time to process the last query's results."), scale=MS),
    Rule("MinBatchProcessingTimeInMilliseconds", _g("logminer_min_batch_processing_duration_seconds", "Shortest result processing."), scale=MS),
    Rule("MaxBatchProcessingTimeInMilliseconds", _g("logminer_max_batch_processing_duration_seconds", "Longest result processing."), scale=MS),
    Rule("TotalBatchProcessingTimeInMilliseconds", _c("logminer_batch_processing_seconds", "Time spent processing LogMiner results."), scale=MS),
    Rule("CommitThroughput", _g("logminer_commit_throughput", "Committed transactions per second in the buffer.")),
    Rule("LastBatchProcessingThroughput", _g("logminer_last_batch_throughput", "Rows per second in the last mining session.")),
    Rule("MaxBatchProcessingThroughput", _g("logminer_max_batch_throughput", "Highest rows per second of a mining session.")),
    Rule("AverageBatchProcessingThroughput", _g("logminer_average_batch_throughput", "Average rows per second over mining sessions.")),
    Rule("LastCommitDurationInMilliseconds", _g("logminer_last_commit_duration_seconds", "Time to process the last commit."), scale=MS),
    Rule("MaxCommitDurationInMilliseconds", _g("logminer_max_commit_duration_seconds", "Longest commit processing."), scale=MS),
    Rule("LastMiningSessionStartTimeInMilliseconds", _g("logminer_last_session_start_duration_seconds", "Start-up time of the last mining session."), scale=MS),
    Rule("MaxMiningSessionStartTimeInMilliseconds", _g("logminer_max_session_start_duration_seconds", "Longest mining session start-up."), scale=MS),
    Rule("TotalMiningSessionStartTimeInMilliseconds", _c("logminer_session_start_seconds", "Time spent starting mining sessions."), scale=MS),
    Rule("TotalParseTimeInMilliseconds", _c("logminer_parse_seconds", "Time spent parsing SQL."), scale=MS),
    Rule("TotalResultSetNextTimeInMilliseconds", _c("logminer_result_set_next_seconds", "Time spent fetching result rows."), scale=MS),
    Rule("LagFromSourceInMilliseconds", _g("logminer_lag_from_source_seconds", "Time from the database capturing a change to it entering the buffer."), scale=MS),
    Rule("MinLagFromSourceInMilliseconds", _g("logminer_min_lag_from_source_seconds", "Minimum of that lag."), scale=MS),
    Rule("MaxLagFromSourceInMilliseconds", _g("logminer_max_lag_from_source_seconds", "Maximum of that lag."), scale=MS),
    Rule("MiningSessionUserGlobalAreaMemoryInBytes", _g("logminer_session_uga_memory_bytes", "UGA memory of the mining session.")),
    Rule("MiningSessionUserGlobalAreaMaxMemoryInBytes", _g("logminer_session_uga_max_memory_bytes", "Peak UGA memory of the mining session.")),
    Rule("MiningSessionProcessGlobalAreaMemoryInBytes", _g("logminer_session_pga_memory_bytes", "PGA memory of the mining session.")),
    Rule("MiningSessionProcessGlobalAreaMaxMemoryInBytes", _g("logminer_session_pga_max_memory_bytes", "Peak PGA memory of the mining session.")),
    _text("AbandonedTransactionIds", "free text (transaction ids)"),
    Rule("AbandonedTransactionCount", _c("logminer_abandoned_transactions", "Transactions abandoned from the buffer.")),
    Rule("NumberOfPartialRollbackCount", _c("logminer_partial_rollbacks", "Events partially rolled back in committed transactions.")),
    _text("RolledBackTransactionIds", "free text (transaction ids)"),
)


@dataclass(frozen=True)
class DerivedStateRule:
    """A state set computed from several boolean attributes: the first true one wins."""

    spec: MetricSpec
    sources: tuple[tuple[str, str], ...]  # (state, boolean attribute), by precedence
    otherwise: str

    def __post_init__(self) -> None:
        self.spec.check_labels(("state",))


SNAPSHOT_STATE_RULE = DerivedStateRule(
    _g("snapshot_state", "Snapshot state, from SnapshotAborted/Paused/Running/Completed/Skipped; 1 on the current one.",
       "state"),
    (("aborted", "SnapshotAborted"), ("paused", "SnapshotPaused"), ("running", "SnapshotRunning"),
     ("completed", "SnapshotCompleted"), ("skipped", "SnapshotSkipped")),
    "not_started",
)

DEBEZIUM_BEAN_METRICS = metric_specs(*referenced_specs(r.spec for r in RULES if r.spec is not None),
                                     SNAPSHOT_STATE_RULE.spec)
"""Every family the connector beans give, declared once: a spec shared by several rules is one object, and
two specs of one name (even equal ones) are an error. Labels besides the bean's (target, plugin, server, …)."""


def sources(spec: MetricSpec) -> tuple[str, ...]:
    """The MBean attributes `spec`'s samples are read from, in table order (for the reference)."""
    if spec is SNAPSHOT_STATE_RULE.spec:
        return tuple(attribute for _, attribute in SNAPSHOT_STATE_RULE.sources)
    return tuple(r.attribute for r in RULES if r.spec is spec)

_FILE_INDEX = re.compile(r"(\d+)$")


def requested_attributes() -> tuple[str, ...]:
    """Attributes worth reading: every exported one (free text is never fetched)."""
    names = [r.attribute for r in RULES if r.conversion is not Conversion.FREE_TEXT]
    names += [attribute for _, attribute in SNAPSHOT_STATE_RULE.sources]
    return tuple(dict.fromkeys(names))


def _number(value: JmxValue) -> float | None:
    """A finite number (a Java double may be NaN or infinite: no value to export)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _numeric_text(value: JmxValue) -> float | None:
    if isinstance(value, (int, float)):
        return _number(value)
    if isinstance(value, str) and value.strip().isdigit():
        return float(int(value.strip()))
    return None


def _rule_samples(rule: Rule, value: JmxValue) -> Iterator[tuple[tuple[tuple[str, str], ...], float]]:
    """(extra labels, value) pairs for one attribute value; nothing for sentinels or odd types."""
    kind = rule.conversion
    if kind is Conversion.NUMBER:
        number = _number(value)
        if number is None or number < 0 or (rule.zero_is_absent and number == 0):
            return
        yield rule.labels, number * rule.scale
    elif kind is Conversion.BOOLEAN:
        if isinstance(value, bool):
            yield rule.labels, 1.0 if value else 0.0
    elif kind is Conversion.COUNT:
        if isinstance(value, list):
            yield rule.labels, float(len(value))
    elif kind is Conversion.PER_KEY:
        if isinstance(value, dict):
            for key in sorted(value):
                number = _numeric_text(value[key])
                if number is not None and number >= 0 and key:
                    yield (*rule.labels, (rule.key_label, key)), number * rule.scale
    elif kind is Conversion.NUMERIC_TEXT:
        number = _numeric_text(value)
        if number is not None and number >= 0:
            yield rule.labels, number
    elif kind is Conversion.FILE_INDEX:
        match = _FILE_INDEX.search(value) if isinstance(value, str) else None
        if match:
            yield rule.labels, float(int(match.group(1)))
    elif kind is Conversion.PRESENT:
        if value is None or isinstance(value, str):
            yield rule.labels, 0.0 if value in (None, "", "null") else 1.0
    elif kind is Conversion.STATE:
        if isinstance(value, str):
            current = value.strip().upper()
            for state in rule.states:
                yield (*rule.labels, ("state", state.lower())), 1.0 if state == current else 0.0


_RULES_BY_ATTRIBUTE: dict[str, Rule] = {r.attribute: r for r in RULES}


def convert(attributes: Mapping[str, JmxValue]) -> Iterator[Sample]:
    """Every sample the mapping table gives for one bean's attribute values.

    A completed snapshot has no table left to copy: Debezium keeps the tables it includes but never copies (its
    own signal table, `signal.data.collection`) in RemainingTableCount after completing, which would hold the
    snapshot's progress by tables below 100 % (2 of 3 tables, 67 %, with a signal table) for good.
    """
    if attributes.get("SnapshotCompleted") is True and attributes.get("RemainingTableCount"):
        attributes = {**attributes, "RemainingTableCount": 0}
    for name, value in attributes.items():
        rule = _RULES_BY_ATTRIBUTE.get(name)
        if rule is None or rule.spec is None:
            continue
        for labels, number in _rule_samples(rule, value):
            yield Sample(rule.spec, labels, number)
    flags = [(state, attributes.get(attribute)) for state, attribute in SNAPSHOT_STATE_RULE.sources]
    if any(isinstance(flag, bool) for _, flag in flags):
        current = next((state for state, flag in flags if flag is True), SNAPSHOT_STATE_RULE.otherwise)
        for state in [s for s, _ in SNAPSHOT_STATE_RULE.sources] + [SNAPSHOT_STATE_RULE.otherwise]:
            yield Sample(SNAPSHOT_STATE_RULE.spec, (("state", state),), 1.0 if state == current else 0.0)
