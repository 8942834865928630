"""Debezium MBean attribute → Prometheus metric mapping, kept as data.

One `Rule` per attribute of the Debezium snapshot, incremental-snapshot, streaming and
schema-history MBeans (the seed attribute tables), plus Debezium 3.6's lag statistics and the
MySQL binlog and Oracle LogMiner extras. `convert` turns one bean's attribute values into samples.

Conventions: counters end in `_total`; milliseconds become seconds; booleans 0/1; `-1`/null
sentinels give no sample; free-text attributes are never exported (not even as label values).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum

from cdcwatch.jmx import JmxValue

__all__ = [
    "Conversion",
    "Rule",
    "RULES",
    "SNAPSHOT_STATE_RULE",
    "Sample",
    "convert",
    "requested_attributes",
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
    """How one MBean attribute is exported."""

    attribute: str
    metric: str  # full name; "" for free text
    type: str  # "gauge" | "counter" | ""
    help: str
    conversion: Conversion = Conversion.NUMBER
    scale: float = 1.0
    labels: tuple[tuple[str, str], ...] = ()
    key_label: str = ""  # PER_KEY: label name for the map key
    states: tuple[str, ...] = ()  # STATE: the known states
    zero_is_absent: bool = False  # NUMBER: 0 also means "not set"


@dataclass(frozen=True)
class Sample:
    """One value produced by a rule for one bean."""

    metric: str
    type: str
    help: str
    labels: tuple[tuple[str, str], ...]
    value: float


def _g(attribute: str, name: str, help: str, **kw: object) -> Rule:
    return Rule(attribute, PREFIX + name, "gauge", help, **kw)  # type: ignore[arg-type]


def _c(attribute: str, name: str, help: str, **kw: object) -> Rule:
    return Rule(attribute, PREFIX + name + "_total", "counter", help, **kw)  # type: ignore[arg-type]


def _text(attribute: str, why: str) -> Rule:
    return Rule(attribute, "", "", why, Conversion.FREE_TEXT)


_OP = "operation"
_BY_OP = "Events seen, by operation, since the connector started."
_BY_TABLE_OP = "Events seen per table and operation (needs internal.advanced.metrics.enable=true)."
_LAG = "Time between the source change and the connector processing it"

RULES: tuple[Rule, ...] = (
    # --- common to snapshot and streaming beans -------------------------------------------
    _text("LastEvent", "free text (last event, with key values)"),
    _g("MilliSecondsSinceLastEvent", "seconds_since_last_event", "Seconds since the connector read and processed the most recent event.", scale=MS),
    _c("TotalNumberOfEventsSeen", "events_seen", "Events seen since the connector started."),
    _c("TotalNumberOfCreateEventsSeen", "events_by_operation", _BY_OP, labels=((_OP, "create"),)),
    _c("TotalNumberOfUpdateEventsSeen", "events_by_operation", _BY_OP, labels=((_OP, "update"),)),
    _c("TotalNumberOfDeleteEventsSeen", "events_by_operation", _BY_OP, labels=((_OP, "delete"),)),
    _c("NumberOfEventsFiltered", "events_filtered", "Events filtered out by include/exclude list rules."),
    _c("NumberOfErroneousEvents", "erroneous_events", "Events that could not be processed."),
    _g("QueueTotalCapacity", "queue_capacity", "Length of the queue between the change source and the Kafka Connect loop, in events."),
    _g("QueueRemainingCapacity", "queue_remaining_capacity", "Free capacity of that queue, in events."),
    _g("CurrentQueueSizeInBytes", "queue_size_bytes", "Current volume of records in the queue, in bytes."),
    _g("MaxQueueSizeInBytes", "queue_max_size_bytes", "Queue limit in bytes (only when max.queue.size.in.bytes is set).", zero_is_absent=True),
    _g("CapturedTables", "captured_tables", "Number of tables the connector captures.", conversion=Conversion.COUNT),
    _text("MonitoredTables", "deprecated duplicate of CapturedTables"),
    # --- snapshot ---------------------------------------------------------------------------
    _g("TotalTableCount", "snapshot_tables", "Tables included in the snapshot."),
    _g("RemainingTableCount", "snapshot_remaining_tables", "Tables the snapshot has yet to copy."),
    _g("SnapshotDurationInSeconds", "snapshot_duration_seconds", "Time the snapshot has taken so far, paused time included."),
    _g("SnapshotPausedDurationInSeconds", "snapshot_paused_duration_seconds", "Time the snapshot was paused, added up."),
    _c("RowsScanned", "snapshot_rows_scanned", "Rows scanned per table (updated every 10,000 rows and when a table completes).",
       conversion=Conversion.PER_KEY, key_label="table"),
    _g("HoldingGlobalLock", "snapshot_holding_global_lock", "1 while the MySQL snapshot holds the global read lock.", conversion=Conversion.BOOLEAN),
    # incremental snapshot
    _g("ChunkId", "incremental_snapshot_chunk_active", "1 while an incremental snapshot chunk is in progress.", conversion=Conversion.PRESENT),
    _text("ChunkFrom", "primary-key values (unbounded)"),
    _text("ChunkTo", "primary-key values (unbounded)"),
    _text("TableFrom", "primary-key values (unbounded)"),
    _text("TableTo", "primary-key values (unbounded)"),
    _g("TableChunkCounts", "incremental_snapshot_table_chunks", "Chunks of each table in the incremental snapshot.",
       conversion=Conversion.PER_KEY, key_label="table"),
    _g("TableChunksCompletedCounts", "incremental_snapshot_table_chunks_completed", "Chunks of each table already snapshotted.",
       conversion=Conversion.PER_KEY, key_label="table"),
    # --- streaming --------------------------------------------------------------------------
    _g("Connected", "connected", "1 while the connector is connected to the source database.", conversion=Conversion.BOOLEAN),
    _g("MilliSecondsBehindSource", "lag_behind_source_seconds", _LAG + " (last event).", scale=MS),
    _g("MilliSecondsBehindSourceMinValue", "lag_behind_source_min_seconds", _LAG + ", minimum since start.", scale=MS),
    _g("MilliSecondsBehindSourceMaxValue", "lag_behind_source_max_seconds", _LAG + ", maximum since start.", scale=MS),
    _g("MilliSecondsBehindSourceAverageValue", "lag_behind_source_average_seconds", _LAG + ", average since start.", scale=MS),
    _g("MilliSecondsBehindSourceP50", "lag_behind_source_percentile_seconds", _LAG + ", by percentile (50, 95, 99).", scale=MS, labels=(("percentile", "50"),)),
    _g("MilliSecondsBehindSourceP95", "lag_behind_source_percentile_seconds", _LAG + ", by percentile (50, 95, 99).", scale=MS, labels=(("percentile", "95"),)),
    _g("MilliSecondsBehindSourceP99", "lag_behind_source_percentile_seconds", _LAG + ", by percentile (50, 95, 99).", scale=MS, labels=(("percentile", "99"),)),
    _c("NumberOfCommittedTransactions", "committed_transactions", "Processed transactions that were committed."),
    _g("SourceEventPosition", "source_position", "Numeric coordinates of the last received event (e.g. lsn, scn, binlog position).",
       conversion=Conversion.PER_KEY, key_label="key"),
    _text("LastTransactionId", "free text (transaction id)"),
    _c("NumberOfUnchangedEventsSkipped", "unchanged_events_skipped", "Update events skipped because no captured column changed."),
    _c("NumberOfCreateEventsSeen", "table_events", _BY_TABLE_OP, conversion=Conversion.PER_KEY, key_label="table", labels=((_OP, "create"),)),
    _c("NumberOfUpdateEventsSeen", "table_events", _BY_TABLE_OP, conversion=Conversion.PER_KEY, key_label="table", labels=((_OP, "update"),)),
    _c("NumberOfDeleteEventsSeen", "table_events", _BY_TABLE_OP, conversion=Conversion.PER_KEY, key_label="table", labels=((_OP, "delete"),)),
    _c("NumberOfTruncateEventsSeen", "table_events", _BY_TABLE_OP, conversion=Conversion.PER_KEY, key_label="table", labels=((_OP, "truncate"),)),
    _c("NumberOfRolledBackTransactions", "rolled_back_transactions", "Transactions seen that were rolled back (MySQL, Oracle)."),
    # --- MySQL / MariaDB binlog -------------------------------------------------------------
    _g("BinlogFilename", "binlog_file_number", "Sequence number of the binlog file being read.", conversion=Conversion.FILE_INDEX),
    _g("BinlogPosition", "binlog_position_bytes", "Byte offset read within the current binlog file."),
    _g("IsGtidModeEnabled", "binlog_gtid_mode_enabled", "1 when the server runs with GTIDs.", conversion=Conversion.BOOLEAN),
    _text("GtidSet", "free text (GTID set)"),
    _c("NumberOfSkippedEvents", "binlog_skipped_events", "Binlog events skipped (e.g. unparseable)."),
    _c("NumberOfDisconnects", "binlog_disconnects", "Disconnects from the binlog client."),
    _c("NumberOfNotWellFormedTransactions", "binlog_not_well_formed_transactions", "Transactions without BEGIN or COMMIT/ROLLBACK."),
    _c("NumberOfLargeTransactions", "binlog_large_transactions", "Transactions too large for the lookahead buffer."),
    # --- schema history ---------------------------------------------------------------------
    Rule("Status", PREFIX + "schema_history_state", "gauge", "Schema history state; 1 on the current one.",
         Conversion.STATE, states=("STOPPED", "RECOVERING", "RUNNING")),
    _g("RecoveryStartTime", "schema_history_recovery_start_timestamp_seconds", "When schema history recovery started (Unix time)."),
    _c("ChangesRecovered", "schema_history_changes_recovered", "Schema changes read during recovery."),
    _c("ChangesApplied", "schema_history_changes_applied", "Schema changes applied during recovery and at run time."),
    _g("MilliSecondsSinceLastRecoveredChange", "schema_history_seconds_since_last_recovered_change", "Seconds since the last change was recovered.", scale=MS),
    _g("MilliSecondsSinceLastAppliedChange", "schema_history_seconds_since_last_applied_change", "Seconds since the last schema change was applied.", scale=MS),
    _text("LastRecoveredChange", "free text (DDL)"),
    _text("LastAppliedChange", "free text (DDL)"),
    # --- Oracle LogMiner --------------------------------------------------------------------
    _g("MillisecondsToKeepTransactionsInBuffer", "logminer_transaction_retention_seconds", "How long transactions stay in the buffer before being discarded (0 = until commit/rollback).", scale=MS),
    _g("SleepTimeInMilliseconds", "logminer_sleep_seconds", "Pause between LogMiner queries.", scale=MS),
    _g("CurrentScn", "logminer_current_scn", "Current system change number of the database.", conversion=Conversion.NUMERIC_TEXT),
    _g("OffsetScn", "logminer_offset_scn", "SCN the connector restarts from (low watermark).", conversion=Conversion.NUMERIC_TEXT),
    _g("CommittedScn", "logminer_committed_scn", "SCN of the last observed commit (high watermark).", conversion=Conversion.NUMERIC_TEXT),
    _g("OldestScn", "logminer_oldest_scn", "Oldest SCN in the transaction buffer.", conversion=Conversion.NUMERIC_TEXT),
    _g("OldestScnAgeInMilliseconds", "logminer_oldest_scn_age_seconds", "Age of the oldest SCN in the transaction buffer.", scale=MS),
    _g("CurrentLogFileNames", "logminer_current_log_files", "Log files in the current mining session.", conversion=Conversion.COUNT),
    _g("BatchSize", "logminer_batch_size", "SCN range queried from LogMiner at a time."),
    _g("MinimumMinedLogCount", "logminer_min_mined_logs", "Fewest logs used by a mining session."),
    _g("MaximumMinedLogCount", "logminer_max_mined_logs", "Most logs used by a mining session."),
    _text("RedoLogStatuses", "free text (redo log file names and states)"),
    _g("LogSwitchCount", "logminer_log_switches", "Redo log switches today."),
    _c("TotalProcessedRows", "logminer_processed_rows", "Rows processed from LogMiner."),
    _g("NumberOfActiveTransactions", "logminer_active_transactions", "Transactions open in the transaction buffer."),
    _c("NumberOfOversizedTransactions", "logminer_oversized_transactions", "Transactions discarded for exceeding the event limit."),
    _c("TotalChangesCount", "logminer_changes", "Changes seen by the connector."),
    _c("FetchQueryCount", "logminer_fetch_queries", "LogMiner queries run."),
    _c("ScnFreezeCount", "logminer_scn_freezes", "Consecutive LogMiner queries where the SCN did not move."),
    _g("LastDurationOfFetchQueryInMilliseconds", "logminer_last_fetch_query_duration_seconds", "Duration of the last LogMiner query.", scale=MS),
    _g("MaxDurationOfFetchQueryInMilliseconds", "logminer_max_fetch_query_duration_seconds", "Longest LogMiner query.", scale=MS),
    _g("LastBatchProcessingTimeInMilliseconds", "logminer_last_batch_processing_duration_seconds", "Time to process the last query's results.", scale=MS),
    _g("MinBatchProcessingTimeInMilliseconds", "logminer_min_batch_processing_duration_seconds", "Shortest result processing.", scale=MS),
    _g("MaxBatchProcessingTimeInMilliseconds", "logminer_max_batch_processing_duration_seconds", "Longest result processing.", scale=MS),
    _c("TotalBatchProcessingTimeInMilliseconds", "logminer_batch_processing_seconds", "Time spent processing LogMiner results.", scale=MS),
    _g("CommitThroughput", "logminer_commit_throughput", "Committed transactions per second in the buffer."),
    _g("LastBatchProcessingThroughput", "logminer_last_batch_throughput", "Rows per second in the last mining session."),
    _g("MaxBatchProcessingThroughput", "logminer_max_batch_throughput", "Highest rows per second of a mining session."),
    _g("AverageBatchProcessingThroughput", "logminer_average_batch_throughput", "Average rows per second over mining sessions."),
    _g("LastCommitDurationInMilliseconds", "logminer_last_commit_duration_seconds", "Time to process the last commit.", scale=MS),
    _g("MaxCommitDurationInMilliseconds", "logminer_max_commit_duration_seconds", "Longest commit processing.", scale=MS),
    _g("LastMiningSessionStartTimeInMilliseconds", "logminer_last_session_start_duration_seconds", "Start-up time of the last mining session.", scale=MS),
    _g("MaxMiningSessionStartTimeInMilliseconds", "logminer_max_session_start_duration_seconds", "Longest mining session start-up.", scale=MS),
    _c("TotalMiningSessionStartTimeInMilliseconds", "logminer_session_start_seconds", "Time spent starting mining sessions.", scale=MS),
    _c("TotalParseTimeInMilliseconds", "logminer_parse_seconds", "Time spent parsing SQL.", scale=MS),
    _c("TotalResultSetNextTimeInMilliseconds", "logminer_result_set_next_seconds", "Time spent fetching result rows.", scale=MS),
    _g("LagFromSourceInMilliseconds", "logminer_lag_from_source_seconds", "Time from the database capturing a change to it entering the buffer.", scale=MS),
    _g("MinLagFromSourceInMilliseconds", "logminer_min_lag_from_source_seconds", "Minimum of that lag.", scale=MS),
    _g("MaxLagFromSourceInMilliseconds", "logminer_max_lag_from_source_seconds", "Maximum of that lag.", scale=MS),
    _g("MiningSessionUserGlobalAreaMemoryInBytes", "logminer_session_uga_memory_bytes", "UGA memory of the mining session."),
    _g("MiningSessionUserGlobalAreaMaxMemoryInBytes", "logminer_session_uga_max_memory_bytes", "Peak UGA memory of the mining session."),
    _g("MiningSessionProcessGlobalAreaMemoryInBytes", "logminer_session_pga_memory_bytes", "PGA memory of the mining session."),
    _g("MiningSessionProcessGlobalAreaMaxMemoryInBytes", "logminer_session_pga_max_memory_bytes", "Peak PGA memory of the mining session."),
    _text("AbandonedTransactionIds", "free text (transaction ids)"),
    _c("AbandonedTransactionCount", "logminer_abandoned_transactions", "Transactions abandoned from the buffer."),
    _c("NumberOfPartialRollbackCount", "logminer_partial_rollbacks", "Events partially rolled back in committed transactions."),
    _text("RolledBackTransactionIds", "free text (transaction ids)"),
)


@dataclass(frozen=True)
class DerivedStateRule:
    """A state set computed from several boolean attributes: the first true one wins."""

    metric: str
    help: str
    sources: tuple[tuple[str, str], ...]  # (state, boolean attribute), by precedence
    otherwise: str


SNAPSHOT_STATE_RULE = DerivedStateRule(
    PREFIX + "snapshot_state",
    "Snapshot state, from SnapshotAborted/Paused/Running/Completed/Skipped; 1 on the current one.",
    (("aborted", "SnapshotAborted"), ("paused", "SnapshotPaused"), ("running", "SnapshotRunning"),
     ("completed", "SnapshotCompleted"), ("skipped", "SnapshotSkipped")),
    "not_started",
)

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
    """Every sample the mapping table gives for one bean's attribute values."""
    for name, value in attributes.items():
        rule = _RULES_BY_ATTRIBUTE.get(name)
        if rule is None or rule.conversion is Conversion.FREE_TEXT:
            continue
        for labels, number in _rule_samples(rule, value):
            yield Sample(rule.metric, rule.type, rule.help, labels, number)
    flags = [(state, attributes.get(attribute)) for state, attribute in SNAPSHOT_STATE_RULE.sources]
    if any(isinstance(flag, bool) for _, flag in flags):
        current = next((state for state, flag in flags if flag is True), SNAPSHOT_STATE_RULE.otherwise)
        for state in [s for s, _ in SNAPSHOT_STATE_RULE.sources] + [SNAPSHOT_STATE_RULE.otherwise]:
            yield Sample(SNAPSHOT_STATE_RULE.metric, "gauge", SNAPSHOT_STATE_RULE.help,
                         (("state", state),), 1.0 if state == current else 0.0)
