"""Debezium connectors: snapshot progress, streaming, queue and schema history."""

# ruff: noqa: E501 (each panel's PromQL is one literal block, its lines as long as on the dashboard)

from cdcwatch.mixin.dashboards.model import (
    CONNECTED,
    SCHEMA_HISTORY_STATES,
    SNAPSHOT_STATES,
    DashboardSpec,
    PanelSpec,
    Query,
    Threshold,
    Variable,
)

__all__ = ["DEBEZIUM"]

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
                      (Query("""
                                 max by (server) (
                                   cdcwatch_debezium_snapshot_state{%(cdcwatch_board)s, target=~"$target", server=~"$server", state="completed"} * 1
                                   or cdcwatch_debezium_snapshot_state{%(cdcwatch_board)s, target=~"$target", server=~"$server", state="skipped"} * 2
                                   or cdcwatch_debezium_snapshot_state{%(cdcwatch_board)s, target=~"$target", server=~"$server", state="not_started"} * 3
                                   or cdcwatch_debezium_snapshot_state{%(cdcwatch_board)s, target=~"$target", server=~"$server", state="running"} * 4
                                   or cdcwatch_debezium_snapshot_state{%(cdcwatch_board)s, target=~"$target", server=~"$server", state="paused"} * 5
                                   or cdcwatch_debezium_snapshot_state{%(cdcwatch_board)s, target=~"$target", server=~"$server", state="aborted"} * 6
                                 )
                                 """, "{{server}}"),),
                      kind="state", mappings=SNAPSHOT_STATES, alerts=("CdcDebeziumSnapshotAborted",)),
            PanelSpec("Tables remaining of total", "Tables the snapshot has yet to copy, and all it includes.", "short",
                      (Query('max by (server) (cdcwatch_debezium_snapshot_remaining_tables{%(cdcwatch_board)s, target=~"$target", server=~"$server"})', "{{server}} remaining"),
                       Query('max by (server) (cdcwatch_debezium_snapshot_tables{%(cdcwatch_board)s, target=~"$target", server=~"$server"})', "{{server}} total"))),
            PanelSpec("Rows scanned per table", "Rows the snapshot has read from each table so far (updated every 10,000 "
                      "rows and when a table completes).", "short",
                      (Query('max by (server, table) (cdcwatch_debezium_snapshot_rows_scanned_total{%(cdcwatch_board)s, target=~"$target", server=~"$server"})',
                             "{{server}} {{table}}"),), kind="bargauge"),
            PanelSpec("Snapshot progress per table (estimate)", "Rows scanned against the source's own row estimate "
                      "of each table (pg_class.reltuples), at most 1: a table that grew since its last ANALYZE reads 1 "
                      "before it is done.", "percentunit",
                      (Query('max by (server, table) (table:cdcwatch_debezium_snapshot_progress:ratio{%(scope)s, target=~"$target", server=~"$server"})',
                             "{{server}} {{table}}", when=_ESTIMATED),), kind="bargauge"),
            PanelSpec("Snapshot progress per connector", "Rows scanned of the estimated rows of every captured table, "
                      "and tables copied of the tables the snapshot includes.", "percentunit",
                      (Query('max by (server) (server:cdcwatch_debezium_snapshot_progress:ratio{%(scope)s, target=~"$target", server=~"$server"})',
                             "{{server}} rows (estimate)", when=_ESTIMATED),
                       Query('max by (server) (server:cdcwatch_debezium_snapshot_tables_progress:ratio{%(scope)s, target=~"$target", server=~"$server"})',
                             "{{server}} tables", when="a snapshot ran since the connector started"))),
            PanelSpec("Estimated time left", "An estimate: the rows the source's estimate says are left, at the scan "
                      "rate of the last 5 minutes; per connector, tables not started count whole.", "s",
                      (Query('max by (server) (server:cdcwatch_debezium_snapshot_remaining_seconds:estimate{%(scope)s, target=~"$target", server=~"$server"})',
                             "{{server}}", when=_SCANNING),
                       Query('max by (server, table) (table:cdcwatch_debezium_snapshot_remaining_seconds:estimate{%(scope)s, target=~"$target", server=~"$server"})',
                             "{{server}} {{table}}", when=_SCANNING))),
            PanelSpec("Rows scanned per second", "Snapshot scan rate per table over 5 minutes.", "cps",
                      (Query('max by (server, table) (table:cdcwatch_debezium_snapshot_rows_scanned:rate5m{%(scope)s, target=~"$target", server=~"$server"} > 0)',
                             "{{server}} {{table}}", when=_SCANNING),)),
            PanelSpec("Snapshot chunks", "Chunks of each table a chunked initial snapshot (snapshot.max.threads."
                      "multiplier) has copied, of its chunks (Debezium counts no chunks of an incremental snapshot).",
                      "percentunit",
                      (Query('max by (server, table) (table:cdcwatch_debezium_snapshot_chunks_progress:ratio{%(scope)s, target=~"$target", server=~"$server"})', "{{server}} {{table}}", when="a chunked initial snapshot ran"),)),
            PanelSpec("Snapshot duration", "Time the snapshot has taken so far, paused time included.", "s",
                      (Query('max by (server) (cdcwatch_debezium_snapshot_duration_seconds{%(cdcwatch_board)s, target=~"$target", server=~"$server"})', "{{server}}"),),
                      threshold=Threshold("snapshot_max_seconds")),
        )),
        ("Streaming", (
            PanelSpec("Connected", "Whether the streaming reader is connected; Debezium reports it disconnected while "
                      "the initial snapshot runs.", "none",
                      (Query('max by (server) (cdcwatch_debezium_connected{%(cdcwatch_board)s, target=~"$target", server=~"$server", context="streaming"})', "{{server}}"),),
                      kind="state", mappings=CONNECTED, alerts=("CdcDebeziumConnectorDisconnected",)),
            PanelSpec("Lag behind the source", "Time between a change's commit and Debezium processing it (last event; "
                      "frozen while the source is idle).", "s",
                      (Query('server:cdcwatch_debezium_lag_behind_source_seconds:max{%(scope)s, target=~"$target", server=~"$server"}', "{{server}}"),), threshold=Threshold("debezium_lag_seconds")),
            PanelSpec("Events by operation", "Change events the streaming reader sees per second, by operation.", "ops",
                      (Query('sum by (server, operation) (rate(cdcwatch_debezium_events_by_operation_total{%(cdcwatch_board)s, target=~"$target", server=~"$server", context="streaming"}[$__rate_interval]))', "{{server}} {{operation}}"),),
                      alerts=("CdcDebeziumNoEventsWhileSourceBusy",)),
            PanelSpec("Seconds since the last event", "Time since the reader processed its most recent event.", "s",
                      (Query('max by (server) (cdcwatch_debezium_seconds_since_last_event{%(cdcwatch_board)s, target=~"$target", server=~"$server", context="streaming"})',
                             "{{server}}"),)),
        )),
        ("Queue", (
            PanelSpec("Queue free", "Free share of the queue between the reader and Kafka Connect (full during a "
                      "snapshot by design).", "percentunit",
                      (Query('min by (server, context) (cdcwatch_debezium_queue_remaining_capacity{%(cdcwatch_board)s, target=~"$target", server=~"$server"} / cdcwatch_debezium_queue_capacity{%(cdcwatch_board)s, target=~"$target", server=~"$server"})', "{{server}} {{context}}"),),
                      threshold=Threshold("debezium_queue_free_ratio", below=True)),
            PanelSpec("Erroneous and discarded events", "Events the connector could not process, skipped binlog events "
                      "and abandoned transactions, per interval.", "short",
                      (Query('sum by (server) (increase(cdcwatch_debezium_erroneous_events_total{%(cdcwatch_board)s, target=~"$target", server=~"$server"}[$__rate_interval]))',
                             "{{server}} erroneous"),
                       Query('sum by (server) (increase(cdcwatch_debezium_binlog_skipped_events_total{%(cdcwatch_board)s, target=~"$target", server=~"$server"}[$__rate_interval]))',
                             "{{server}} binlog skipped", when="a MySQL connector runs"),
                       Query('sum by (server) (increase(cdcwatch_debezium_logminer_abandoned_transactions_total{%(cdcwatch_board)s, target=~"$target", server=~"$server"}[$__rate_interval]))', "{{server}} abandoned", when="an Oracle connector runs")),
                      alerts=("CdcDebeziumErroneousEvents", "CdcDebeziumEventsDiscarded")),
        )),
        ("Schema history", (
            PanelSpec("Schema history state", "The current state of the schema history (MySQL, SQL Server, Oracle, Db2).",
                      "none", (Query("""
                                         max by (server) (
                                           cdcwatch_debezium_schema_history_state{%(cdcwatch_board)s, target=~"$target", server=~"$server", state="running"} * 1
                                           or cdcwatch_debezium_schema_history_state{%(cdcwatch_board)s, target=~"$target", server=~"$server", state="recovering"} * 2
                                           or cdcwatch_debezium_schema_history_state{%(cdcwatch_board)s, target=~"$target", server=~"$server", state="stopped"} * 3
                                         )
                                         """,
                                     "{{server}}"),),
                      kind="state", mappings=SCHEMA_HISTORY_STATES, alerts=("CdcDebeziumSchemaHistoryNotRunning",)),
            PanelSpec("Schema changes applied", "Schema changes applied per interval, during recovery and at run time.", "short",
                      (Query('sum by (server) (increase(cdcwatch_debezium_schema_history_changes_applied_total{%(cdcwatch_board)s, target=~"$target", server=~"$server"}[$__rate_interval]))', "{{server}}"),)),
        )),
    ), stage="debezium")
