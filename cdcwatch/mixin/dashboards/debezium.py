"""Debezium connectors: snapshot progress, streaming, queue and schema history."""

from cdcwatch.mixin.dashboards.model import (
    CONNECTED,
    SCHEMA_HISTORY_STATES,
    SNAPSHOT_STATES,
    DashboardSpec,
    PanelSpec,
    Query,
    Threshold,
    Variable,
    state_code,
)

__all__ = ["DEBEZIUM"]

_SEL = '%(cdcwatch_board)s, target=~"$target", server=~"$server"'
_REC = '%(scope)s, target=~"$target", server=~"$server"'
_ESTIMATED = "a snapshot ran and the postgres collector reports the captured tables' row estimates"
_SCANNING = "a snapshot scanned rows in the last 5 minutes (and row estimates are reported)"

DEBEZIUM = DashboardSpec(
    "cdcwatch-debezium", "CDC: Debezium connectors",
    "Snapshot progress, streaming lag, queue and schema history per connector (JMX through cdcwatch).",
    "cdcwatch_debezium_mbeans{%(cdcwatch)s",
    (Variable("target", 'label_values(cdcwatch_debezium_mbeans{%(cdcwatch_board)s}, target)'),
     Variable("server", 'label_values(cdcwatch_debezium_connected{%(cdcwatch_board)s, target=~"$target"}, server)')),
    (
        ("Snapshot", (
            PanelSpec("Snapshot state", "The current state of each connector's snapshot.", "none",
                      (Query(state_code("cdcwatch_debezium_snapshot_state", _SEL, "server", SNAPSHOT_STATES), "{{server}}"),),
                      kind="state", mappings=SNAPSHOT_STATES, alerts=("CdcDebeziumSnapshotAborted",)),
            PanelSpec("Tables remaining of total", "Tables the snapshot has yet to copy, and all it includes.", "short",
                      (Query(f"max by (server) (cdcwatch_debezium_snapshot_remaining_tables{{{_SEL}}})", "{{server}} remaining"),
                       Query(f"max by (server) (cdcwatch_debezium_snapshot_tables{{{_SEL}}})", "{{server}} total"))),
            PanelSpec("Rows scanned per table", "Rows the snapshot has read from each table so far (updated every 10,000 "
                      "rows and when a table completes).", "short",
                      (Query(f"max by (server, table) (cdcwatch_debezium_snapshot_rows_scanned_total{{{_SEL}}})",
                             "{{server}} {{table}}"),), kind="bargauge"),
            PanelSpec("Snapshot progress per table (estimate)", "Rows scanned against the source's own row estimate "
                      "of each table (pg_class.reltuples), at most 1: a table that grew since its last ANALYZE reads 1 "
                      "before it is done.", "percentunit",
                      (Query(f"max by (server, table) (table:cdcwatch_debezium_snapshot_progress:ratio{{{_REC}}})",
                             "{{server}} {{table}}", when=_ESTIMATED),), kind="bargauge"),
            PanelSpec("Snapshot progress per connector", "Rows scanned of the estimated rows of every captured table, "
                      "and tables copied of the tables the snapshot includes.", "percentunit",
                      (Query(f"max by (server) (server:cdcwatch_debezium_snapshot_progress:ratio{{{_REC}}})",
                             "{{server}} rows (estimate)", when=_ESTIMATED),
                       Query(f"max by (server) (server:cdcwatch_debezium_snapshot_tables_progress:ratio{{{_REC}}})",
                             "{{server}} tables", when="a snapshot ran since the connector started"))),
            PanelSpec("Estimated time left", "An estimate: the rows the source's estimate says are left, at the scan "
                      "rate of the last 5 minutes; per connector, tables not started count whole.", "s",
                      (Query(f"max by (server) (server:cdcwatch_debezium_snapshot_remaining_seconds:estimate{{{_REC}}})",
                             "{{server}}", when=_SCANNING),
                       Query(f"max by (server, table) (table:cdcwatch_debezium_snapshot_remaining_seconds:estimate{{{_REC}}})",
                             "{{server}} {{table}}", when=_SCANNING))),
            PanelSpec("Rows scanned per second", "Snapshot scan rate per table over 5 minutes.", "cps",
                      (Query(f"max by (server, table) (table:cdcwatch_debezium_snapshot_rows_scanned:rate5m{{{_REC}}} > 0)",
                             "{{server}} {{table}}", when=_SCANNING),)),
            PanelSpec("Snapshot chunks", "Chunks of each table a chunked initial snapshot (snapshot.max.threads."
                      "multiplier) has copied, of its chunks (Debezium counts no chunks of an incremental snapshot).",
                      "percentunit",
                      (Query("max by (server, table) (table:cdcwatch_debezium_snapshot_chunks_progress:ratio"
                             f"{{{_REC}}})", "{{server}} {{table}}", when="a chunked initial snapshot ran"),)),
            PanelSpec("Snapshot duration", "Time the snapshot has taken so far, paused time included.", "s",
                      (Query(f"max by (server) (cdcwatch_debezium_snapshot_duration_seconds{{{_SEL}}})", "{{server}}"),),
                      threshold=Threshold("snapshot_max_seconds")),
        )),
        ("Streaming", (
            PanelSpec("Connected", "Whether the streaming reader is connected; Debezium reports it disconnected while "
                      "the initial snapshot runs.", "none",
                      (Query(f'max by (server) (cdcwatch_debezium_connected{{{_SEL}, context="streaming"}})', "{{server}}"),),
                      kind="state", mappings=CONNECTED, alerts=("CdcDebeziumConnectorDisconnected",)),
            PanelSpec("Lag behind the source", "Time between a change's commit and Debezium processing it (last event; "
                      "frozen while the source is idle).", "s",
                      (Query('server:cdcwatch_debezium_lag_behind_source_seconds:max{%(scope)s, target=~"$target", '
                             'server=~"$server"}', "{{server}}"),), threshold=Threshold("debezium_lag_seconds")),
            PanelSpec("Events by operation", "Change events the streaming reader sees per second, by operation.", "ops",
                      (Query(f'sum by (server, operation) (rate(cdcwatch_debezium_events_by_operation_total{{{_SEL}, '
                             f'context="streaming"}}[$__rate_interval]))', "{{server}} {{operation}}"),),
                      alerts=("CdcDebeziumNoEventsWhileSourceBusy",)),
            PanelSpec("Seconds since the last event", "Time since the reader processed its most recent event.", "s",
                      (Query(f'max by (server) (cdcwatch_debezium_seconds_since_last_event{{{_SEL}, context="streaming"}})',
                             "{{server}}"),)),
        )),
        ("Queue", (
            PanelSpec("Queue free", "Free share of the queue between the reader and Kafka Connect (full during a "
                      "snapshot by design).", "percentunit",
                      (Query(f'min by (server, context) (cdcwatch_debezium_queue_remaining_capacity{{{_SEL}}} '
                             f'/ cdcwatch_debezium_queue_capacity{{{_SEL}}})', "{{server}} {{context}}"),),
                      threshold=Threshold("debezium_queue_free_ratio", below=True)),
            PanelSpec("Erroneous and discarded events", "Events the connector could not process, skipped binlog events "
                      "and abandoned transactions, per interval.", "short",
                      (Query(f"sum by (server) (increase(cdcwatch_debezium_erroneous_events_total{{{_SEL}}}[$__rate_interval]))",
                             "{{server}} erroneous"),
                       Query(f"sum by (server) (increase(cdcwatch_debezium_binlog_skipped_events_total{{{_SEL}}}[$__rate_interval]))",
                             "{{server}} binlog skipped", when="a MySQL connector runs"),
                       Query("sum by (server) (increase(cdcwatch_debezium_logminer_abandoned_transactions_total"
                             f"{{{_SEL}}}[$__rate_interval]))", "{{server}} abandoned", when="an Oracle connector runs")),
                      alerts=("CdcDebeziumErroneousEvents", "CdcDebeziumEventsDiscarded")),
        )),
        ("Schema history", (
            PanelSpec("Schema history state", "The current state of the schema history (MySQL, SQL Server, Oracle, Db2).",
                      "none", (Query(state_code("cdcwatch_debezium_schema_history_state", _SEL, "server", SCHEMA_HISTORY_STATES),
                                     "{{server}}"),),
                      kind="state", mappings=SCHEMA_HISTORY_STATES, alerts=("CdcDebeziumSchemaHistoryNotRunning",)),
            PanelSpec("Schema changes applied", "Schema changes applied per interval, during recovery and at run time.", "short",
                      (Query("sum by (server) (increase(cdcwatch_debezium_schema_history_changes_applied_total"
                             f"{{{_SEL}}}[$__rate_interval]))", "{{server}}"),)),
        )),
    ), stage="debezium")
