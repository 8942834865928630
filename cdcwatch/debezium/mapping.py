"""Debezium MBean attribute → Prometheus metric mapping, kept as data.

One `Rule` per attribute of the Debezium snapshot, incremental-snapshot, streaming and
schema-history MBeans (the seed attribute tables), plus Debezium 3.6's lag statistics and the
MySQL binlog and Oracle LogMiner extras. `convert` turns one bean's attribute values into samples.

Each rule exports into a metric family declared once as a `MetricSpec` (name, type, help, labels), a
constant spelling out the full metric name (grep finds where it is defined); the rules of a family
several attributes feed share its spec, one label value each. `DEBEZIUM_BEAN_METRICS` gathers them (a
name declared twice is an error) for the reference.
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

from cdcwatch.jmx import JmxValue
from cdcwatch.specs import MetricSpec, metric_specs, referenced_specs

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


def _text(attribute: str, why: str) -> Rule:
    return Rule(attribute, None, Conversion.FREE_TEXT, why=why)


_OP = "operation"
_LAG = "Time between the source change and the connector processing it"

# The families, each declared once under its full name; the rules below refer to them (the attributes feeding one family
# share its spec, each with its own label value).
# common to snapshot and streaming beans
DEBEZIUM_SECONDS_SINCE_LAST_EVENT = MetricSpec("cdcwatch_debezium_seconds_since_last_event", "gauge", "Seconds since the connector read and processed the most recent event.")
DEBEZIUM_EVENTS_SEEN_TOTAL = MetricSpec("cdcwatch_debezium_events_seen_total", "counter", "Events seen since the connector started.")
DEBEZIUM_EVENTS_BY_OPERATION_TOTAL = MetricSpec("cdcwatch_debezium_events_by_operation_total", "counter", "Events seen, by operation, since the connector started.", (_OP,))
DEBEZIUM_EVENTS_FILTERED_TOTAL = MetricSpec("cdcwatch_debezium_events_filtered_total", "counter", "Events filtered out by include/exclude list rules.")
DEBEZIUM_ERRONEOUS_EVENTS_TOTAL = MetricSpec("cdcwatch_debezium_erroneous_events_total", "counter", "Events that could not be processed.")
DEBEZIUM_QUEUE_CAPACITY = MetricSpec("cdcwatch_debezium_queue_capacity", "gauge", "Length of the queue between the change source and the Kafka Connect loop, in events.")
DEBEZIUM_QUEUE_REMAINING_CAPACITY = MetricSpec("cdcwatch_debezium_queue_remaining_capacity", "gauge", "Free capacity of that queue, in events.")
DEBEZIUM_QUEUE_SIZE_BYTES = MetricSpec("cdcwatch_debezium_queue_size_bytes", "gauge", "Current volume of records in the queue, in bytes.")
DEBEZIUM_QUEUE_MAX_SIZE_BYTES = MetricSpec("cdcwatch_debezium_queue_max_size_bytes", "gauge", "Queue limit in bytes (only when max.queue.size.in.bytes is set).")
DEBEZIUM_CAPTURED_TABLES = MetricSpec("cdcwatch_debezium_captured_tables", "gauge", "Number of tables the connector captures.")

# snapshot
DEBEZIUM_SNAPSHOT_TABLES = MetricSpec("cdcwatch_debezium_snapshot_tables", "gauge", "Tables included in the snapshot.")
DEBEZIUM_SNAPSHOT_REMAINING_TABLES = MetricSpec("cdcwatch_debezium_snapshot_remaining_tables", "gauge", "Tables the snapshot has yet to copy; 0 once it completed (Debezium counts its signal table, which it never copies, until it restarts).")
DEBEZIUM_SNAPSHOT_DURATION_SECONDS = MetricSpec("cdcwatch_debezium_snapshot_duration_seconds", "gauge", "Time the snapshot has taken so far, paused time included.")
DEBEZIUM_SNAPSHOT_PAUSED_DURATION_SECONDS = MetricSpec("cdcwatch_debezium_snapshot_paused_duration_seconds", "gauge", "Time the snapshot was paused, added up.")
DEBEZIUM_SNAPSHOT_ROWS_SCANNED_TOTAL = MetricSpec("cdcwatch_debezium_snapshot_rows_scanned_total", "counter", "Rows scanned per table (updated every 10,000 rows and when a table completes).", ("table",))
DEBEZIUM_SNAPSHOT_HOLDING_GLOBAL_LOCK = MetricSpec("cdcwatch_debezium_snapshot_holding_global_lock", "gauge", "1 while the MySQL snapshot holds the global read lock.")
DEBEZIUM_SNAPSHOT_STATE = MetricSpec("cdcwatch_debezium_snapshot_state", "gauge", "Snapshot state, from SnapshotAborted/Paused/Running/Completed/Skipped; 1 on the current one.", ("state",))

# incremental snapshot
DEBEZIUM_INCREMENTAL_SNAPSHOT_CHUNK_ACTIVE = MetricSpec("cdcwatch_debezium_incremental_snapshot_chunk_active", "gauge", "1 while an incremental snapshot chunk is in progress.")
DEBEZIUM_INCREMENTAL_SNAPSHOT_TABLE_CHUNKS = MetricSpec("cdcwatch_debezium_incremental_snapshot_table_chunks", "gauge", "Chunks of each table in the incremental snapshot.", ("table",))
DEBEZIUM_INCREMENTAL_SNAPSHOT_TABLE_CHUNKS_COMPLETED = MetricSpec("cdcwatch_debezium_incremental_snapshot_table_chunks_completed", "gauge", "Chunks of each table already snapshotted.", ("table",))

# streaming
DEBEZIUM_CONNECTED = MetricSpec("cdcwatch_debezium_connected", "gauge", "1 while the connector is connected to the source database.")
DEBEZIUM_LAG_BEHIND_SOURCE_SECONDS = MetricSpec("cdcwatch_debezium_lag_behind_source_seconds", "gauge", _LAG + " (last event).")
DEBEZIUM_LAG_BEHIND_SOURCE_MIN_SECONDS = MetricSpec("cdcwatch_debezium_lag_behind_source_min_seconds", "gauge", _LAG + ", minimum since start.")
DEBEZIUM_LAG_BEHIND_SOURCE_MAX_SECONDS = MetricSpec("cdcwatch_debezium_lag_behind_source_max_seconds", "gauge", _LAG + ", maximum since start.")
DEBEZIUM_LAG_BEHIND_SOURCE_AVERAGE_SECONDS = MetricSpec("cdcwatch_debezium_lag_behind_source_average_seconds", "gauge", _LAG + ", average since start.")
DEBEZIUM_LAG_BEHIND_SOURCE_PERCENTILE_SECONDS = MetricSpec("cdcwatch_debezium_lag_behind_source_percentile_seconds", "gauge", _LAG + ", by percentile (50, 95, 99).", ("percentile",))
DEBEZIUM_COMMITTED_TRANSACTIONS_TOTAL = MetricSpec("cdcwatch_debezium_committed_transactions_total", "counter", "Processed transactions that were committed.")
DEBEZIUM_SOURCE_POSITION = MetricSpec("cdcwatch_debezium_source_position", "gauge", "Numeric coordinates of the last received event (e.g. lsn, scn, binlog position).", ("key",))
DEBEZIUM_UNCHANGED_EVENTS_SKIPPED_TOTAL = MetricSpec("cdcwatch_debezium_unchanged_events_skipped_total", "counter", "Update events skipped because no captured column changed.")
DEBEZIUM_TABLE_EVENTS_TOTAL = MetricSpec("cdcwatch_debezium_table_events_total", "counter", "Events seen per table and operation (needs internal.advanced.metrics.enable=true).", (_OP, "table"))
DEBEZIUM_ROLLED_BACK_TRANSACTIONS_TOTAL = MetricSpec("cdcwatch_debezium_rolled_back_transactions_total", "counter", "Transactions seen that were rolled back (MySQL, Oracle).")

# MySQL / MariaDB binlog
DEBEZIUM_BINLOG_FILE_NUMBER = MetricSpec("cdcwatch_debezium_binlog_file_number", "gauge", "Sequence number of the binlog file being read.")
DEBEZIUM_BINLOG_POSITION_BYTES = MetricSpec("cdcwatch_debezium_binlog_position_bytes", "gauge", "Byte offset read within the current binlog file.")
DEBEZIUM_BINLOG_GTID_MODE_ENABLED = MetricSpec("cdcwatch_debezium_binlog_gtid_mode_enabled", "gauge", "1 when the server runs with GTIDs.")
DEBEZIUM_BINLOG_SKIPPED_EVENTS_TOTAL = MetricSpec("cdcwatch_debezium_binlog_skipped_events_total", "counter", "Binlog events skipped (e.g. unparseable).")
DEBEZIUM_BINLOG_DISCONNECTS_TOTAL = MetricSpec("cdcwatch_debezium_binlog_disconnects_total", "counter", "Disconnects from the binlog client.")
DEBEZIUM_BINLOG_NOT_WELL_FORMED_TRANSACTIONS_TOTAL = MetricSpec("cdcwatch_debezium_binlog_not_well_formed_transactions_total", "counter", "Transactions without BEGIN or COMMIT/ROLLBACK.")
DEBEZIUM_BINLOG_LARGE_TRANSACTIONS_TOTAL = MetricSpec("cdcwatch_debezium_binlog_large_transactions_total", "counter", "Transactions too large for the lookahead buffer.")

# schema history
DEBEZIUM_SCHEMA_HISTORY_STATE = MetricSpec("cdcwatch_debezium_schema_history_state", "gauge", "Schema history state; 1 on the current one.", ("state",))
DEBEZIUM_SCHEMA_HISTORY_RECOVERY_START_TIMESTAMP_SECONDS = MetricSpec("cdcwatch_debezium_schema_history_recovery_start_timestamp_seconds", "gauge", "When schema history recovery started (Unix time).")
DEBEZIUM_SCHEMA_HISTORY_CHANGES_RECOVERED_TOTAL = MetricSpec("cdcwatch_debezium_schema_history_changes_recovered_total", "counter", "Schema changes read during recovery.")
DEBEZIUM_SCHEMA_HISTORY_CHANGES_APPLIED_TOTAL = MetricSpec("cdcwatch_debezium_schema_history_changes_applied_total", "counter", "Schema changes applied during recovery and at run time.")
DEBEZIUM_SCHEMA_HISTORY_SECONDS_SINCE_LAST_RECOVERED_CHANGE = MetricSpec("cdcwatch_debezium_schema_history_seconds_since_last_recovered_change", "gauge", "Seconds since the last change was recovered.")
DEBEZIUM_SCHEMA_HISTORY_SECONDS_SINCE_LAST_APPLIED_CHANGE = MetricSpec("cdcwatch_debezium_schema_history_seconds_since_last_applied_change", "gauge", "Seconds since the last schema change was applied.")

# Oracle LogMiner
DEBEZIUM_LOGMINER_TRANSACTION_RETENTION_SECONDS = MetricSpec("cdcwatch_debezium_logminer_transaction_retention_seconds", "gauge", "How long transactions stay in the buffer before being discarded (0 = until commit/rollback).")
DEBEZIUM_LOGMINER_SLEEP_SECONDS = MetricSpec("cdcwatch_debezium_logminer_sleep_seconds", "gauge", "Pause between LogMiner queries.")
DEBEZIUM_LOGMINER_CURRENT_SCN = MetricSpec("cdcwatch_debezium_logminer_current_scn", "gauge", "Current system change number of the database.")
DEBEZIUM_LOGMINER_OFFSET_SCN = MetricSpec("cdcwatch_debezium_logminer_offset_scn", "gauge", "SCN the connector restarts from (low watermark).")
DEBEZIUM_LOGMINER_COMMITTED_SCN = MetricSpec("cdcwatch_debezium_logminer_committed_scn", "gauge", "SCN of the last observed commit (high watermark).")
DEBEZIUM_LOGMINER_OLDEST_SCN = MetricSpec("cdcwatch_debezium_logminer_oldest_scn", "gauge", "Oldest SCN in the transaction buffer.")
DEBEZIUM_LOGMINER_OLDEST_SCN_AGE_SECONDS = MetricSpec("cdcwatch_debezium_logminer_oldest_scn_age_seconds", "gauge", "Age of the oldest SCN in the transaction buffer.")
DEBEZIUM_LOGMINER_CURRENT_LOG_FILES = MetricSpec("cdcwatch_debezium_logminer_current_log_files", "gauge", "Log files in the current mining session.")
DEBEZIUM_LOGMINER_BATCH_SIZE = MetricSpec("cdcwatch_debezium_logminer_batch_size", "gauge", "SCN range queried from LogMiner at a time.")
DEBEZIUM_LOGMINER_MIN_MINED_LOGS = MetricSpec("cdcwatch_debezium_logminer_min_mined_logs", "gauge", "Fewest logs used by a mining session.")
DEBEZIUM_LOGMINER_MAX_MINED_LOGS = MetricSpec("cdcwatch_debezium_logminer_max_mined_logs", "gauge", "Most logs used by a mining session.")
DEBEZIUM_LOGMINER_LOG_SWITCHES = MetricSpec("cdcwatch_debezium_logminer_log_switches", "gauge", "Redo log switches today.")
DEBEZIUM_LOGMINER_PROCESSED_ROWS_TOTAL = MetricSpec("cdcwatch_debezium_logminer_processed_rows_total", "counter", "Rows processed from LogMiner.")
DEBEZIUM_LOGMINER_ACTIVE_TRANSACTIONS = MetricSpec("cdcwatch_debezium_logminer_active_transactions", "gauge", "Transactions open in the transaction buffer.")
DEBEZIUM_LOGMINER_OVERSIZED_TRANSACTIONS_TOTAL = MetricSpec("cdcwatch_debezium_logminer_oversized_transactions_total", "counter", "Transactions discarded for exceeding the event limit.")
DEBEZIUM_LOGMINER_CHANGES_TOTAL = MetricSpec("cdcwatch_debezium_logminer_changes_total", "counter", "Changes seen by the connector.")
DEBEZIUM_LOGMINER_FETCH_QUERIES_TOTAL = MetricSpec("cdcwatch_debezium_logminer_fetch_queries_total", "counter", "LogMiner queries run.")
DEBEZIUM_LOGMINER_SCN_FREEZES_TOTAL = MetricSpec("cdcwatch_debezium_logminer_scn_freezes_total", "counter", "Consecutive LogMiner queries where the SCN did not move.")
DEBEZIUM_LOGMINER_LAST_FETCH_QUERY_DURATION_SECONDS = MetricSpec("cdcwatch_debezium_logminer_last_fetch_query_duration_seconds", "gauge", "Duration of the last LogMiner query.")
DEBEZIUM_LOGMINER_MAX_FETCH_QUERY_DURATION_SECONDS = MetricSpec("cdcwatch_debezium_logminer_max_fetch_query_duration_seconds", "gauge", "Longest LogMiner query.")
DEBEZIUM_LOGMINER_LAST_BATCH_PROCESSING_DURATION_SECONDS = MetricSpec("cdcwatch_debezium_logminer_last_batch_processing_duration_seconds", "gauge", "Time to process the last query's results.")
DEBEZIUM_LOGMINER_MIN_BATCH_PROCESSING_DURATION_SECONDS = MetricSpec("cdcwatch_debezium_logminer_min_batch_processing_duration_seconds", "gauge", "Shortest result processing.")
DEBEZIUM_LOGMINER_MAX_BATCH_PROCESSING_DURATION_SECONDS = MetricSpec("cdcwatch_debezium_logminer_max_batch_processing_duration_seconds", "gauge", "Longest result processing.")
DEBEZIUM_LOGMINER_BATCH_PROCESSING_SECONDS_TOTAL = MetricSpec("cdcwatch_debezium_logminer_batch_processing_seconds_total", "counter", "Time spent processing LogMiner results.")
DEBEZIUM_LOGMINER_COMMIT_THROUGHPUT = MetricSpec("cdcwatch_debezium_logminer_commit_throughput", "gauge", "Committed transactions per second in the buffer.")
DEBEZIUM_LOGMINER_LAST_BATCH_THROUGHPUT = MetricSpec("cdcwatch_debezium_logminer_last_batch_throughput", "gauge", "Rows per second in the last mining session.")
DEBEZIUM_LOGMINER_MAX_BATCH_THROUGHPUT = MetricSpec("cdcwatch_debezium_logminer_max_batch_throughput", "gauge", "Highest rows per second of a mining session.")
DEBEZIUM_LOGMINER_AVERAGE_BATCH_THROUGHPUT = MetricSpec("cdcwatch_debezium_logminer_average_batch_throughput", "gauge", "Average rows per second over mining sessions.")
DEBEZIUM_LOGMINER_LAST_COMMIT_DURATION_SECONDS = MetricSpec("cdcwatch_debezium_logminer_last_commit_duration_seconds", "gauge", "Time to process the last commit.")
DEBEZIUM_LOGMINER_MAX_COMMIT_DURATION_SECONDS = MetricSpec("cdcwatch_debezium_logminer_max_commit_duration_seconds", "gauge", "Longest commit processing.")
DEBEZIUM_LOGMINER_LAST_SESSION_START_DURATION_SECONDS = MetricSpec("cdcwatch_debezium_logminer_last_session_start_duration_seconds", "gauge", "Start-up time of the last mining session.")
DEBEZIUM_LOGMINER_MAX_SESSION_START_DURATION_SECONDS = MetricSpec("cdcwatch_debezium_logminer_max_session_start_duration_seconds", "gauge", "Longest mining session start-up.")
DEBEZIUM_LOGMINER_SESSION_START_SECONDS_TOTAL = MetricSpec("cdcwatch_debezium_logminer_session_start_seconds_total", "counter", "Time spent starting mining sessions.")
DEBEZIUM_LOGMINER_PARSE_SECONDS_TOTAL = MetricSpec("cdcwatch_debezium_logminer_parse_seconds_total", "counter", "Time spent parsing SQL.")
DEBEZIUM_LOGMINER_RESULT_SET_NEXT_SECONDS_TOTAL = MetricSpec("cdcwatch_debezium_logminer_result_set_next_seconds_total", "counter", "Time spent fetching result rows.")
DEBEZIUM_LOGMINER_LAG_FROM_SOURCE_SECONDS = MetricSpec("cdcwatch_debezium_logminer_lag_from_source_seconds", "gauge", "Time from the database capturing a change to it entering the buffer.")
DEBEZIUM_LOGMINER_MIN_LAG_FROM_SOURCE_SECONDS = MetricSpec("cdcwatch_debezium_logminer_min_lag_from_source_seconds", "gauge", "Minimum of that lag.")
DEBEZIUM_LOGMINER_MAX_LAG_FROM_SOURCE_SECONDS = MetricSpec("cdcwatch_debezium_logminer_max_lag_from_source_seconds", "gauge", "Maximum of that lag.")
DEBEZIUM_LOGMINER_SESSION_UGA_MEMORY_BYTES = MetricSpec("cdcwatch_debezium_logminer_session_uga_memory_bytes", "gauge", "UGA memory of the mining session.")
DEBEZIUM_LOGMINER_SESSION_UGA_MAX_MEMORY_BYTES = MetricSpec("cdcwatch_debezium_logminer_session_uga_max_memory_bytes", "gauge", "Peak UGA memory of the mining session.")
DEBEZIUM_LOGMINER_SESSION_PGA_MEMORY_BYTES = MetricSpec("cdcwatch_debezium_logminer_session_pga_memory_bytes", "gauge", "PGA memory of the mining session.")
DEBEZIUM_LOGMINER_SESSION_PGA_MAX_MEMORY_BYTES = MetricSpec("cdcwatch_debezium_logminer_session_pga_max_memory_bytes", "gauge", "Peak PGA memory of the mining session.")
DEBEZIUM_LOGMINER_ABANDONED_TRANSACTIONS_TOTAL = MetricSpec("cdcwatch_debezium_logminer_abandoned_transactions_total", "counter", "Transactions abandoned from the buffer.")
DEBEZIUM_LOGMINER_PARTIAL_ROLLBACKS_TOTAL = MetricSpec("cdcwatch_debezium_logminer_partial_rollbacks_total", "counter", "Events partially rolled back in committed transactions.")

RULES: tuple[Rule, ...] = (
    # --- common to snapshot and streaming beans -------------------------------------------
    _text("LastEvent", "free text (last event, with key values)"),
    Rule("MilliSecondsSinceLastEvent", DEBEZIUM_SECONDS_SINCE_LAST_EVENT, scale=MS),
    Rule("TotalNumberOfEventsSeen", DEBEZIUM_EVENTS_SEEN_TOTAL),
    Rule("TotalNumberOfCreateEventsSeen", DEBEZIUM_EVENTS_BY_OPERATION_TOTAL, labels=((_OP, "create"),)),
    Rule("TotalNumberOfUpdateEventsSeen", DEBEZIUM_EVENTS_BY_OPERATION_TOTAL, labels=((_OP, "update"),)),
    Rule("TotalNumberOfDeleteEventsSeen", DEBEZIUM_EVENTS_BY_OPERATION_TOTAL, labels=((_OP, "delete"),)),
    Rule("NumberOfEventsFiltered", DEBEZIUM_EVENTS_FILTERED_TOTAL),
    Rule("NumberOfErroneousEvents", DEBEZIUM_ERRONEOUS_EVENTS_TOTAL),
    Rule("QueueTotalCapacity", DEBEZIUM_QUEUE_CAPACITY),
    Rule("QueueRemainingCapacity", DEBEZIUM_QUEUE_REMAINING_CAPACITY),
    Rule("CurrentQueueSizeInBytes", DEBEZIUM_QUEUE_SIZE_BYTES),
    Rule("MaxQueueSizeInBytes", DEBEZIUM_QUEUE_MAX_SIZE_BYTES, zero_is_absent=True),
    Rule("CapturedTables", DEBEZIUM_CAPTURED_TABLES, Conversion.COUNT),
    _text("MonitoredTables", "deprecated duplicate of CapturedTables"),
    # --- snapshot ---------------------------------------------------------------------------
    Rule("TotalTableCount", DEBEZIUM_SNAPSHOT_TABLES),
    Rule("RemainingTableCount", DEBEZIUM_SNAPSHOT_REMAINING_TABLES),
    Rule("SnapshotDurationInSeconds", DEBEZIUM_SNAPSHOT_DURATION_SECONDS),
    Rule("SnapshotPausedDurationInSeconds", DEBEZIUM_SNAPSHOT_PAUSED_DURATION_SECONDS),
    Rule("RowsScanned", DEBEZIUM_SNAPSHOT_ROWS_SCANNED_TOTAL, Conversion.PER_KEY, key_label="table"),
    Rule("HoldingGlobalLock", DEBEZIUM_SNAPSHOT_HOLDING_GLOBAL_LOCK, Conversion.BOOLEAN),
    # incremental snapshot
    Rule("ChunkId", DEBEZIUM_INCREMENTAL_SNAPSHOT_CHUNK_ACTIVE, Conversion.PRESENT),
    _text("ChunkFrom", "primary-key values (unbounded)"),
    _text("ChunkTo", "primary-key values (unbounded)"),
    _text("TableFrom", "primary-key values (unbounded)"),
    _text("TableTo", "primary-key values (unbounded)"),
    Rule("TableChunkCounts", DEBEZIUM_INCREMENTAL_SNAPSHOT_TABLE_CHUNKS, Conversion.PER_KEY, key_label="table"),
    Rule("TableChunksCompletedCounts", DEBEZIUM_INCREMENTAL_SNAPSHOT_TABLE_CHUNKS_COMPLETED, Conversion.PER_KEY, key_label="table"),
    # --- streaming --------------------------------------------------------------------------
    Rule("Connected", DEBEZIUM_CONNECTED, Conversion.BOOLEAN),
    Rule("MilliSecondsBehindSource", DEBEZIUM_LAG_BEHIND_SOURCE_SECONDS, scale=MS),
    Rule("MilliSecondsBehindSourceMinValue", DEBEZIUM_LAG_BEHIND_SOURCE_MIN_SECONDS, scale=MS),
    Rule("MilliSecondsBehindSourceMaxValue", DEBEZIUM_LAG_BEHIND_SOURCE_MAX_SECONDS, scale=MS),
    Rule("MilliSecondsBehindSourceAverageValue", DEBEZIUM_LAG_BEHIND_SOURCE_AVERAGE_SECONDS, scale=MS),
    Rule("MilliSecondsBehindSourceP50", DEBEZIUM_LAG_BEHIND_SOURCE_PERCENTILE_SECONDS, scale=MS, labels=(("percentile", "50"),)),
    Rule("MilliSecondsBehindSourceP95", DEBEZIUM_LAG_BEHIND_SOURCE_PERCENTILE_SECONDS, scale=MS, labels=(("percentile", "95"),)),
    Rule("MilliSecondsBehindSourceP99", DEBEZIUM_LAG_BEHIND_SOURCE_PERCENTILE_SECONDS, scale=MS, labels=(("percentile", "99"),)),
    Rule("NumberOfCommittedTransactions", DEBEZIUM_COMMITTED_TRANSACTIONS_TOTAL),
    Rule("SourceEventPosition", DEBEZIUM_SOURCE_POSITION, Conversion.PER_KEY, key_label="key"),
    _text("LastTransactionId", "free text (transaction id)"),
    Rule("NumberOfUnchangedEventsSkipped", DEBEZIUM_UNCHANGED_EVENTS_SKIPPED_TOTAL),
    Rule("NumberOfCreateEventsSeen", DEBEZIUM_TABLE_EVENTS_TOTAL, Conversion.PER_KEY, key_label="table", labels=((_OP, "create"),)),
    Rule("NumberOfUpdateEventsSeen", DEBEZIUM_TABLE_EVENTS_TOTAL, Conversion.PER_KEY, key_label="table", labels=((_OP, "update"),)),
    Rule("NumberOfDeleteEventsSeen", DEBEZIUM_TABLE_EVENTS_TOTAL, Conversion.PER_KEY, key_label="table", labels=((_OP, "delete"),)),
    Rule("NumberOfTruncateEventsSeen", DEBEZIUM_TABLE_EVENTS_TOTAL, Conversion.PER_KEY, key_label="table", labels=((_OP, "truncate"),)),
    Rule("NumberOfRolledBackTransactions", DEBEZIUM_ROLLED_BACK_TRANSACTIONS_TOTAL),
    # --- MySQL / MariaDB binlog -------------------------------------------------------------
    Rule("BinlogFilename", DEBEZIUM_BINLOG_FILE_NUMBER, Conversion.FILE_INDEX),
    Rule("BinlogPosition", DEBEZIUM_BINLOG_POSITION_BYTES),
    Rule("IsGtidModeEnabled", DEBEZIUM_BINLOG_GTID_MODE_ENABLED, Conversion.BOOLEAN),
    _text("GtidSet", "free text (GTID set)"),
    Rule("NumberOfSkippedEvents", DEBEZIUM_BINLOG_SKIPPED_EVENTS_TOTAL),
    Rule("NumberOfDisconnects", DEBEZIUM_BINLOG_DISCONNECTS_TOTAL),
    Rule("NumberOfNotWellFormedTransactions", DEBEZIUM_BINLOG_NOT_WELL_FORMED_TRANSACTIONS_TOTAL),
    Rule("NumberOfLargeTransactions", DEBEZIUM_BINLOG_LARGE_TRANSACTIONS_TOTAL),
    # --- schema history ---------------------------------------------------------------------
    Rule("Status", DEBEZIUM_SCHEMA_HISTORY_STATE, Conversion.STATE,
         states=("STOPPED", "RECOVERING", "RUNNING")),
    Rule("RecoveryStartTime", DEBEZIUM_SCHEMA_HISTORY_RECOVERY_START_TIMESTAMP_SECONDS),
    Rule("ChangesRecovered", DEBEZIUM_SCHEMA_HISTORY_CHANGES_RECOVERED_TOTAL),
    Rule("ChangesApplied", DEBEZIUM_SCHEMA_HISTORY_CHANGES_APPLIED_TOTAL),
    Rule("MilliSecondsSinceLastRecoveredChange", DEBEZIUM_SCHEMA_HISTORY_SECONDS_SINCE_LAST_RECOVERED_CHANGE, scale=MS),
    Rule("MilliSecondsSinceLastAppliedChange", DEBEZIUM_SCHEMA_HISTORY_SECONDS_SINCE_LAST_APPLIED_CHANGE, scale=MS),
    _text("LastRecoveredChange", "free text (DDL)"),
    _text("LastAppliedChange", "free text (DDL)"),
    # --- Oracle LogMiner --------------------------------------------------------------------
    Rule("MillisecondsToKeepTransactionsInBuffer", DEBEZIUM_LOGMINER_TRANSACTION_RETENTION_SECONDS, scale=MS),
    Rule("SleepTimeInMilliseconds", DEBEZIUM_LOGMINER_SLEEP_SECONDS, scale=MS),
    Rule("CurrentScn", DEBEZIUM_LOGMINER_CURRENT_SCN, Conversion.NUMERIC_TEXT),
    Rule("OffsetScn", DEBEZIUM_LOGMINER_OFFSET_SCN, Conversion.NUMERIC_TEXT),
    Rule("CommittedScn", DEBEZIUM_LOGMINER_COMMITTED_SCN, Conversion.NUMERIC_TEXT),
    Rule("OldestScn", DEBEZIUM_LOGMINER_OLDEST_SCN, Conversion.NUMERIC_TEXT),
    Rule("OldestScnAgeInMilliseconds", DEBEZIUM_LOGMINER_OLDEST_SCN_AGE_SECONDS, scale=MS),
    Rule("CurrentLogFileNames", DEBEZIUM_LOGMINER_CURRENT_LOG_FILES, Conversion.COUNT),
    Rule("BatchSize", DEBEZIUM_LOGMINER_BATCH_SIZE),
    Rule("MinimumMinedLogCount", DEBEZIUM_LOGMINER_MIN_MINED_LOGS),
    Rule("MaximumMinedLogCount", DEBEZIUM_LOGMINER_MAX_MINED_LOGS),
    _text("RedoLogStatuses", "free text (redo log file names and states)"),
    Rule("LogSwitchCount", DEBEZIUM_LOGMINER_LOG_SWITCHES),
    Rule("TotalProcessedRows", DEBEZIUM_LOGMINER_PROCESSED_ROWS_TOTAL),
    Rule("NumberOfActiveTransactions", DEBEZIUM_LOGMINER_ACTIVE_TRANSACTIONS),
    Rule("NumberOfOversizedTransactions", DEBEZIUM_LOGMINER_OVERSIZED_TRANSACTIONS_TOTAL),
    Rule("TotalChangesCount", DEBEZIUM_LOGMINER_CHANGES_TOTAL),
    Rule("FetchQueryCount", DEBEZIUM_LOGMINER_FETCH_QUERIES_TOTAL),
    Rule("ScnFreezeCount", DEBEZIUM_LOGMINER_SCN_FREEZES_TOTAL),
    Rule("LastDurationOfFetchQueryInMilliseconds", DEBEZIUM_LOGMINER_LAST_FETCH_QUERY_DURATION_SECONDS, scale=MS),
    Rule("MaxDurationOfFetchQueryInMilliseconds", DEBEZIUM_LOGMINER_MAX_FETCH_QUERY_DURATION_SECONDS, scale=MS),
    Rule("LastBatchProcessingTimeInMilliseconds", DEBEZIUM_LOGMINER_LAST_BATCH_PROCESSING_DURATION_SECONDS, scale=MS),
    Rule("MinBatchProcessingTimeInMilliseconds", DEBEZIUM_LOGMINER_MIN_BATCH_PROCESSING_DURATION_SECONDS, scale=MS),
    Rule("MaxBatchProcessingTimeInMilliseconds", DEBEZIUM_LOGMINER_MAX_BATCH_PROCESSING_DURATION_SECONDS, scale=MS),
    Rule("TotalBatchProcessingTimeInMilliseconds", DEBEZIUM_LOGMINER_BATCH_PROCESSING_SECONDS_TOTAL, scale=MS),
    Rule("CommitThroughput", DEBEZIUM_LOGMINER_COMMIT_THROUGHPUT),
    Rule("LastBatchProcessingThroughput", DEBEZIUM_LOGMINER_LAST_BATCH_THROUGHPUT),
    Rule("MaxBatchProcessingThroughput", DEBEZIUM_LOGMINER_MAX_BATCH_THROUGHPUT),
    Rule("AverageBatchProcessingThroughput", DEBEZIUM_LOGMINER_AVERAGE_BATCH_THROUGHPUT),
    Rule("LastCommitDurationInMilliseconds", DEBEZIUM_LOGMINER_LAST_COMMIT_DURATION_SECONDS, scale=MS),
    Rule("MaxCommitDurationInMilliseconds", DEBEZIUM_LOGMINER_MAX_COMMIT_DURATION_SECONDS, scale=MS),
    Rule("LastMiningSessionStartTimeInMilliseconds", DEBEZIUM_LOGMINER_LAST_SESSION_START_DURATION_SECONDS, scale=MS),
    Rule("MaxMiningSessionStartTimeInMilliseconds", DEBEZIUM_LOGMINER_MAX_SESSION_START_DURATION_SECONDS, scale=MS),
    Rule("TotalMiningSessionStartTimeInMilliseconds", DEBEZIUM_LOGMINER_SESSION_START_SECONDS_TOTAL, scale=MS),
    Rule("TotalParseTimeInMilliseconds", DEBEZIUM_LOGMINER_PARSE_SECONDS_TOTAL, scale=MS),
    Rule("TotalResultSetNextTimeInMilliseconds", DEBEZIUM_LOGMINER_RESULT_SET_NEXT_SECONDS_TOTAL, scale=MS),
    Rule("LagFromSourceInMilliseconds", DEBEZIUM_LOGMINER_LAG_FROM_SOURCE_SECONDS, scale=MS),
    Rule("MinLagFromSourceInMilliseconds", DEBEZIUM_LOGMINER_MIN_LAG_FROM_SOURCE_SECONDS, scale=MS),
    Rule("MaxLagFromSourceInMilliseconds", DEBEZIUM_LOGMINER_MAX_LAG_FROM_SOURCE_SECONDS, scale=MS),
    Rule("MiningSessionUserGlobalAreaMemoryInBytes", DEBEZIUM_LOGMINER_SESSION_UGA_MEMORY_BYTES),
    Rule("MiningSessionUserGlobalAreaMaxMemoryInBytes", DEBEZIUM_LOGMINER_SESSION_UGA_MAX_MEMORY_BYTES),
    Rule("MiningSessionProcessGlobalAreaMemoryInBytes", DEBEZIUM_LOGMINER_SESSION_PGA_MEMORY_BYTES),
    Rule("MiningSessionProcessGlobalAreaMaxMemoryInBytes", DEBEZIUM_LOGMINER_SESSION_PGA_MAX_MEMORY_BYTES),
    _text("AbandonedTransactionIds", "free text (transaction ids)"),
    Rule("AbandonedTransactionCount", DEBEZIUM_LOGMINER_ABANDONED_TRANSACTIONS_TOTAL),
    Rule("NumberOfPartialRollbackCount", DEBEZIUM_LOGMINER_PARTIAL_ROLLBACKS_TOTAL),
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
    DEBEZIUM_SNAPSHOT_STATE,
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
