"""Debezium connectors (JMX): connection, lag, queue, snapshot, schema history, lost events.

Debezium registers its streaming bean with Connected=false and no events while the initial snapshot
runs, and its queue is full by design then: those rules stand down while `snapshot_running` is 1.
"""

# ruff: noqa: E501 (each rule's PromQL is one literal block, its lines as long as in the rule file)

from dataclasses import replace

from cdcwatch.mixin.alerts.examples import BINLOG_SOURCE, DBZ, JVM, SLOT, SOURCE
from cdcwatch.mixin.alerts.model import Alert, Case, Group, Recording, labels_of

__all__ = ["GROUP"]

_STREAMING = f'{DBZ},context="streaming"'
_SNAPSHOT = f'{DBZ},context="snapshot"'
_LAG = "cdcwatch_debezium_lag_behind_source_seconds"
_EVENTS = "cdcwatch_debezium_events_seen_total"
_STATE = "cdcwatch_debezium_snapshot_state"


def _snapshot(state: str) -> dict[str, str]:
    """Snapshot state-set series with `state` current."""
    return {f'{_STATE}{{{_SNAPSHOT},state="{s}"}}': "1x200" if s == state else "0x200"
            for s in ("running", "completed")}


RECORDINGS = (
    Recording("server:cdcwatch_debezium_lag_behind_source_seconds:max",
              'max by (job, instance, target, plugin, server) (cdcwatch_debezium_lag_behind_source_seconds{%(cdcwatch)s, context="streaming"})',
              Case("the larger of two tasks", {f'{_LAG}{{{_STREAMING},task="0"}}': "120x40",
                                               f'{_LAG}{{{_STREAMING},task="1"}}': "30x40"}, labels=labels_of(DBZ), value=120)),
    Recording("server:cdcwatch_debezium_events_seen:rate5m",
              'sum by (job, instance, target, plugin, server) (rate(cdcwatch_debezium_events_seen_total{%(cdcwatch)s, context="streaming"}[5m]))',
              Case("60 events a minute", {f"{_EVENTS}{{{_STREAMING}}}": "0+60x40"}, labels=labels_of(DBZ), value=1)),
    Recording("server:cdcwatch_debezium_snapshot_running:max",
              'max by (job, instance, target, plugin, server) (cdcwatch_debezium_snapshot_state{%(cdcwatch)s, state=~"running|paused"})',
              Case("paused counts as running", {f'{_STATE}{{{_SNAPSHOT},state="paused"}}': "1x40",
                                                f'{_STATE}{{{_SNAPSHOT},state="running"}}': "0x40"},
                   labels=labels_of(DBZ), value=1)),
)

# Snapshot progress and ETA: the rows Debezium scanned per table (RowsScanned, key `schema.table`, MySQL's
# `database.table`) against the source's own row estimate of that table (cdcwatch_postgres_table_rows_estimate or
# cdcwatch_mysql_table_rows_estimate, same `table` and `server`). The estimate's `target` is the database, not the
# connector's JVM: it joins on (job, instance, server, table) and the results keep the connector's labels.
_ROWS_ESTIMATE = "cdcwatch_postgres_table_rows_estimate"
_MYSQL_ROWS_ESTIMATE = "cdcwatch_mysql_table_rows_estimate"
_ROWS_SCANNED = "cdcwatch_debezium_snapshot_rows_scanned_total"
_ESTIMATES = (("postgres", _ROWS_ESTIMATE), ("mysql", _MYSQL_ROWS_ESTIMATE))


_ORDERS = f'{DBZ},context="snapshot",table="public.orders"'
_ORDERS_LABELS = labels_of(DBZ, 'table="public.orders"')
_ORDERS_ESTIMATE = f'{_ROWS_ESTIMATE}{{{SOURCE},database="inventory",table="public.orders",server="inventory"}}'
_CUSTOMERS_ESTIMATE = f'{_ROWS_ESTIMATE}{{{SOURCE},database="inventory",table="public.customers",server="inventory"}}'
_SCANNING = {_ORDERS_ESTIMATE: "480000x40", f"{_ROWS_SCANNED}{{{_ORDERS}}}": "0+6000x40"}
"""A snapshot a quarter through public.orders at 20m: 120,000 of an estimated 480,000 rows, 100 rows a second."""
_MYSQL = f'{JVM},plugin="mysql",server="orders"'
_ITEMS = f'{_MYSQL},context="snapshot",table="shop.items"'
_ITEMS_LABELS = labels_of(_MYSQL, 'table="shop.items"')
_ITEMS_ESTIMATE = f'{_MYSQL_ROWS_ESTIMATE}{{{BINLOG_SOURCE},database="shop",table="shop.items"}}'
_MYSQL_SCANNING = {_ITEMS_ESTIMATE: "96000x40", f"{_ROWS_SCANNED}{{{_ITEMS}}}": "0+1200x40"}
"""The same on MySQL: 24,000 of shop.items' estimated 96,000 rows at 20m, 20 rows a second."""
_EMPTY = {_ORDERS_ESTIMATE: "0x40", f"{_ROWS_SCANNED}{{{_ORDERS}}}": "0x40"}
"""A table the source estimates empty (never analyzed, or analyzed empty): no ratio, no ETA."""

SNAPSHOT_PROGRESS = (
    # the source's estimate of each table, one rule per source database (each deployed with its stage): the rules
    # below read it, whichever databases the deployment has
    Recording("table:cdcwatch_source_table_rows:estimate",
              "max by (job, instance, target, server, table) (cdcwatch_postgres_table_rows_estimate{%(cdcwatch)s})",
              Case("PostgreSQL's estimate of public.orders", _SCANNING,
                   labels=labels_of(SOURCE, 'server="inventory",table="public.orders"'), value=480000)),
    Recording("table:cdcwatch_source_table_rows:estimate",
              "max by (job, instance, target, server, table) (cdcwatch_mysql_table_rows_estimate{%(cdcwatch)s})",
              Case("MySQL's estimate of shop.items", _MYSQL_SCANNING,
                   labels=labels_of(BINLOG_SOURCE, 'table="shop.items"'), value=96000)),
    Recording("table:cdcwatch_debezium_snapshot_rows_scanned:rate5m",
              'sum by (job, instance, target, plugin, server, table) (rate(cdcwatch_debezium_snapshot_rows_scanned_total{%(cdcwatch)s, context="snapshot"}[5m]))',
              Case("6,000 rows a minute", _SCANNING, labels=_ORDERS_LABELS, value=100)),
    # scanned / estimate, at most 1: a table that grew since its last ANALYZE scans past its estimate
    Recording("table:cdcwatch_debezium_snapshot_progress:ratio",
              """
              clamp_max(
                max by (job, instance, target, plugin, server, table) (cdcwatch_debezium_snapshot_rows_scanned_total{%(cdcwatch)s, context="snapshot"})
                / on (job, instance, server, table) group_left ()
                (max by (job, instance, server, table) (table:cdcwatch_source_table_rows:estimate) > 0),
              1)
              """,
              Case("a quarter through", _SCANNING, labels=_ORDERS_LABELS, value=0.25),
              more=(Case("a quarter through, by the MySQL estimate", _MYSQL_SCANNING, labels=_ITEMS_LABELS, value=0.25),
                    Case("a table estimated empty: no ratio", _EMPTY),
                    Case("no estimate of the table: no ratio", {f"{_ROWS_SCANNED}{{{_ITEMS}}}": "0+1200x40"}))),
    # an estimate: rows the source's estimate says are left to scan (0 once the table is done)
    Recording("table:cdcwatch_debezium_snapshot_rows_remaining:estimate",
              """
              clamp_min(
                max by (job, instance, server, table) (table:cdcwatch_source_table_rows:estimate)
                - on (job, instance, server, table) group_right ()
                max by (job, instance, target, plugin, server, table) (cdcwatch_debezium_snapshot_rows_scanned_total{%(cdcwatch)s, context="snapshot"}),
              0)
              """,
              Case("360,000 rows left", _SCANNING, labels=_ORDERS_LABELS, value=360000),
              more=(Case("72,000 rows left, by the MySQL estimate", _MYSQL_SCANNING, labels=_ITEMS_LABELS, value=72000),
                    Case("no estimate of the table: nothing left to say",
                         {f"{_ROWS_SCANNED}{{{_ITEMS}}}": "0+1200x40"}))),
    # an estimate: those rows at the table's scan rate of the last 5 minutes
    Recording("table:cdcwatch_debezium_snapshot_remaining_seconds:estimate",
              """
              table:cdcwatch_debezium_snapshot_rows_remaining:estimate
              / on (job, instance, target, plugin, server, table)
                (table:cdcwatch_debezium_snapshot_rows_scanned:rate5m > 0)
              """,
              Case("360,000 rows left at 100 a second", _SCANNING, labels=_ORDERS_LABELS, value=3600),
              more=(Case("72,000 rows left at 20 a second, by the MySQL estimate", _MYSQL_SCANNING,
                         labels=_ITEMS_LABELS, value=3600),
                    Case("a table that no longer scans: no ETA", {
                        _ITEMS_ESTIMATE: "96000x40", f"{_ROWS_SCANNED}{{{_ITEMS}}}": "24000x40"}))),
    # Debezium 3.6 counts chunks (TableChunkCounts) for a chunked initial snapshot (snapshot.max.threads.multiplier),
    # not for an incremental one, whose beans name only the chunk in progress
    Recording("table:cdcwatch_debezium_snapshot_chunks_progress:ratio",
              """
              max by (job, instance, target, plugin, server, table) (cdcwatch_debezium_incremental_snapshot_table_chunks_completed{%(cdcwatch)s})
              / on (job, instance, target, plugin, server, table)
                (max by (job, instance, target, plugin, server, table) (cdcwatch_debezium_incremental_snapshot_table_chunks{%(cdcwatch)s}) > 0)
              """,
              Case("10 of 40 chunks", {f"cdcwatch_debezium_incremental_snapshot_table_chunks{{{_ORDERS}}}": "40x40",
                                       f"cdcwatch_debezium_incremental_snapshot_table_chunks_completed{{{_ORDERS}}}": "10x40"},
                   labels=_ORDERS_LABELS, value=0.25)),
    Recording("server:cdcwatch_debezium_snapshot_progress:ratio",
              """
              clamp_max(
                sum by (job, instance, target, plugin, server) (max by (job, instance, target, plugin, server, table) (cdcwatch_debezium_snapshot_rows_scanned_total{%(cdcwatch)s, context="snapshot"}))
                / on (job, instance, server) group_left ()
                (sum by (job, instance, server) (max by (job, instance, server, table) (table:cdcwatch_source_table_rows:estimate)) > 0),
              1)
              """,
              Case("120,000 of an estimated 600,000 rows", {**_SCANNING, _CUSTOMERS_ESTIMATE: "120000x40"},
                   labels=labels_of(DBZ), value=0.2),
              more=(Case("24,000 of an estimated 120,000 rows, by the MySQL estimates", {
                  **_MYSQL_SCANNING,
                  f'{_MYSQL_ROWS_ESTIMATE}{{{BINLOG_SOURCE},database="shop",table="shop.tags"}}': "24000x40"},
                  labels=labels_of(_MYSQL), value=0.2),)),
    Recording("server:cdcwatch_debezium_snapshot_tables_progress:ratio",
              """
              1 - max by (job, instance, target, plugin, server) (cdcwatch_debezium_snapshot_remaining_tables{%(cdcwatch)s})
              / on (job, instance, target, plugin, server)
                (max by (job, instance, target, plugin, server) (cdcwatch_debezium_snapshot_tables{%(cdcwatch)s}) > 0)
              """,
              Case("1 of 4 tables copied", {f'cdcwatch_debezium_snapshot_remaining_tables{{{_SNAPSHOT}}}': "3x40",
                                            f'cdcwatch_debezium_snapshot_tables{{{_SNAPSHOT}}}': "4x40"},
                   labels=labels_of(DBZ), value=0.25)),
    Recording("server:cdcwatch_debezium_snapshot_rows_scanned:rate5m",
              "sum by (job, instance, target, plugin, server) (table:cdcwatch_debezium_snapshot_rows_scanned:rate5m)",
              Case("one table at 100 rows a second", _SCANNING, labels=labels_of(DBZ), value=100)),
    # an estimate, while the connector's snapshot runs: the rows left of the tables it scanned, plus every captured
    # table it has not started (counted whole), at the connector's rate of the last 5 minutes
    Recording("server:cdcwatch_debezium_snapshot_remaining_seconds:estimate",
              """
              (
                sum by (job, instance, server) (table:cdcwatch_debezium_snapshot_rows_remaining:estimate)
                + on (job, instance, server)
                sum by (job, instance, server) (max by (job, instance, server, table) (table:cdcwatch_source_table_rows:estimate) unless on (job, instance, server, table) cdcwatch_debezium_snapshot_rows_scanned_total{%(cdcwatch)s})
                or
                sum by (job, instance, server) (table:cdcwatch_debezium_snapshot_rows_remaining:estimate)
              )
              / on (job, instance, server) group_right ()
                (server:cdcwatch_debezium_snapshot_rows_scanned:rate5m > 0)
              and on (job, instance, target, plugin, server)
                (server:cdcwatch_debezium_snapshot_running:max == 1)
              """,
              Case("360,000 rows left of orders and 60,000 of customers, not started, at 100 a second",
                   {**_SCANNING, _CUSTOMERS_ESTIMATE: "60000x40", **_snapshot("running")},
                   labels=labels_of(DBZ), value=4200),
              more=(Case("72,000 rows left of shop.items and 12,000 of shop.tags, not started, at 20 a second", {
                  **_MYSQL_SCANNING,
                  f'{_MYSQL_ROWS_ESTIMATE}{{{BINLOG_SOURCE},database="shop",table="shop.tags"}}': "12000x40",
                  **{f'{_STATE}{{{_MYSQL},context="snapshot",state="{s}"}}': "1x200" if s == "running" else "0x200"
                     for s in ("running", "completed")}},
                  labels=labels_of(_MYSQL), value=4200),
                    Case("the snapshot is done: no ETA", {**_SCANNING, **_snapshot("completed")}))),
)


def _by_source(case: Case) -> Case:
    """A snapshot case tested only in deployments with the source database whose estimate it feeds."""
    fed = {stage for stage, estimate in _ESTIMATES if any(s.startswith(estimate + "{") for s in case.series)}
    return replace(case, needs=frozenset(fed))


_BY_ESTIMATE: set[str] = set()
"""The recordings that read a source database's estimate, themselves or through another."""
for _rule in SNAPSHOT_PROGRESS:
    if _rule.record == "table:cdcwatch_source_table_rows:estimate" or any(name in _rule.expr for name in _BY_ESTIMATE):
        _BY_ESTIMATE.add(_rule.record)

SNAPSHOT_PROGRESS_BY_SOURCE: tuple[Recording, ...] = tuple(
    replace(r, example=_by_source(r.example), more=tuple(map(_by_source, r.more)))
    if r.record in _BY_ESTIMATE else r
    for r in SNAPSHOT_PROGRESS)
"""The snapshot progress rules, each case of a rule reading an estimate tested where its source database is."""


ALERTS = (
    Alert(
        "CdcDebeziumConnectorDisconnected",
        """
        cdcwatch_debezium_connected{%(cdcwatch)s, context="streaming"} == 0
        unless on (job, instance, target, plugin, server)
          (server:cdcwatch_debezium_snapshot_running:max == 1)
        """,
        "critical", "critical",
        "Debezium connector {{ $labels.server }} is disconnected from its database",
        "The {{ $labels.plugin }} connector {{ $labels.server }} on {{ $labels.target }} has not been connected "
        "to its source database for %(for)s outside a snapshot: no change is captured.",
        fires=Case("streaming, not connected", {f"cdcwatch_debezium_connected{{{_STREAMING}}}": "0x200",
                                                **_snapshot("completed")}, labels=labels_of(_STREAMING)),
        quiet=Case("streaming, connected", {f"cdcwatch_debezium_connected{{{_STREAMING}}}": "1x200",
                                            **_snapshot("completed")}),
        more=(Case("the initial snapshot runs: Connected=false is how Debezium registers the streaming bean",
                   {f"cdcwatch_debezium_connected{{{_STREAMING}}}": "0x200", **_snapshot("running")}),),
    ),
    Alert(
        "CdcDebeziumSourceLagHigh",
        """
        server:cdcwatch_debezium_lag_behind_source_seconds:max > %(debezium_lag_seconds)s
        and on (job, instance, target, plugin, server)
          server:cdcwatch_debezium_events_seen:rate5m > 0
        """,
        "warning", "warning",
        "Debezium connector {{ $labels.server }} lags behind its source",
        "The connector {{ $labels.server }} on {{ $labels.target }} processes changes "
        "{{ $value | humanizeDuration }} after they were committed (threshold %(debezium_lag_seconds)ss).",
        fires=Case("events flow, each 2 minutes late", {f"{_LAG}{{{_STREAMING}}}": "120x40",
                                                        f"{_EVENTS}{{{_STREAMING}}}": "0+10x40"},
                   labels=labels_of(DBZ), value=120),
        quiet=Case("an idle source: the last event's lag reading stays frozen",
                   {f"{_LAG}{{{_STREAMING}}}": "120x40", f"{_EVENTS}{{{_STREAMING}}}": "500x40"}),
        since="1m",
        more=(Case("events flow on time", {f"{_LAG}{{{_STREAMING}}}": "5x40", f"{_EVENTS}{{{_STREAMING}}}": "0+10x40"}),),
    ),
    Alert(
        "CdcDebeziumNoEventsWhileSourceBusy",
        """
        server:cdcwatch_debezium_events_seen:rate5m == 0
        and on (server)
          max by (server) (deriv(cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes{%(cdcwatch)s}[10m])) > 0
        unless on (job, instance, target, plugin, server)
          (server:cdcwatch_debezium_snapshot_running:max == 1)
        """,
        "critical", "warning",
        "Debezium connector {{ $labels.server }} emits nothing while its source writes",
        "The connector {{ $labels.server }} has seen no change for %(for)s while the WAL its replication slot has "
        "not confirmed keeps growing: the connector is stuck (its lag reading is frozen), not idle.",
        fires=Case("no event while the slot's unconfirmed WAL grows",
                   {f"{_EVENTS}{{{_STREAMING}}}": "500x40",
                    f"cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes{{{SLOT}}}": "0+4096x40",
                    **_snapshot("completed")}, labels=labels_of(DBZ)),
        quiet=Case("events flow", {f"{_EVENTS}{{{_STREAMING}}}": "500+20x40",
                                   f"cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes{{{SLOT}}}": "0+4096x40",
                                   **_snapshot("completed")}),
        since="1m",
        more=(Case("the initial snapshot runs: streaming has seen nothing yet while the WAL grows",
                   {f"{_EVENTS}{{{_STREAMING}}}": "0x40",
                    f"cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes{{{SLOT}}}": "0+4096x40",
                    **_snapshot("running")}),
              Case("an idle source: no event and no WAL", {
                  f"{_EVENTS}{{{_STREAMING}}}": "500x40",
                  f"cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes{{{SLOT}}}": "0x40",
                  **_snapshot("completed")})),
    ),
    Alert(
        "CdcDebeziumQueueSaturated",
        """
        cdcwatch_debezium_queue_remaining_capacity{%(cdcwatch)s, context="streaming"}
          / cdcwatch_debezium_queue_capacity{%(cdcwatch)s, context="streaming"}
        < %(debezium_queue_free_ratio)s
        unless on (job, instance, target, plugin, server)
          (server:cdcwatch_debezium_snapshot_running:max == 1)
        """,
        "warning", "warning",
        "Debezium connector {{ $labels.server }}: its change queue is nearly full",
        "Only {{ $value | humanizePercentage }} of the queue between the reader of {{ $labels.server }} and Kafka "
        "is free (threshold %(debezium_queue_free_ratio)s): the connector reads faster than Kafka Connect ships.",
        fires=Case("streaming, 1 % free", {f"cdcwatch_debezium_queue_remaining_capacity{{{_STREAMING}}}": "82x40",
                                            f"cdcwatch_debezium_queue_capacity{{{_STREAMING}}}": "8192x40",
                                            **_snapshot("completed")},
                   labels=labels_of(_STREAMING), value=82 / 8192),
        quiet=Case("streaming, nearly empty", {f"cdcwatch_debezium_queue_remaining_capacity{{{_STREAMING}}}": "8000x40",
                                               f"cdcwatch_debezium_queue_capacity{{{_STREAMING}}}": "8192x40",
                                               **_snapshot("completed")}),
        more=(Case("the snapshot fills the queue by design", {
            f"cdcwatch_debezium_queue_remaining_capacity{{{_STREAMING}}}": "0x40",
            f"cdcwatch_debezium_queue_capacity{{{_STREAMING}}}": "8192x40", **_snapshot("running")}),),
    ),
    Alert(
        "CdcDebeziumSnapshotAborted",
        'cdcwatch_debezium_snapshot_state{%(cdcwatch)s, state="aborted"} == 1',
        "critical", "instant",
        "Debezium connector {{ $labels.server }}: its snapshot was aborted",
        "The snapshot of {{ $labels.server }} on {{ $labels.target }} was aborted; the target misses the rows "
        "it had not copied until the snapshot is run again.",
        fires=Case("aborted", {f'{_STATE}{{{_SNAPSHOT},state="aborted"}}': "1x40"},
                   labels=labels_of(_SNAPSHOT, 'state="aborted"'), value=1),
        quiet=Case("not aborted", {f'{_STATE}{{{_SNAPSHOT},state="aborted"}}': "0x40"}),
    ),
    Alert(
        "CdcDebeziumSnapshotTooLong",
        """
        cdcwatch_debezium_snapshot_duration_seconds{%(cdcwatch)s} > %(snapshot_max_seconds)s
        and on (job, instance, target, plugin, server)
          cdcwatch_debezium_snapshot_state{%(cdcwatch)s, state="running"} == 1
        """,
        "warning", "warning",
        "Debezium connector {{ $labels.server }}: the snapshot runs too long",
        "The snapshot of {{ $labels.server }} has run for {{ $value | humanizeDuration }} "
        "(threshold %(snapshot_max_seconds)ss); streaming starts only after it.",
        fires=Case("running for 8 hours", {f"cdcwatch_debezium_snapshot_duration_seconds{{{_SNAPSHOT}}}": "30000+60x40",
                                           f'{_STATE}{{{_SNAPSHOT},state="running"}}': "1x40"},
                   labels=labels_of(_SNAPSHOT), value=30000 + 60 * 20),
        quiet=Case("finished", {f"cdcwatch_debezium_snapshot_duration_seconds{{{_SNAPSHOT}}}": "30000+60x40",
                                f'{_STATE}{{{_SNAPSHOT},state="running"}}': "0x40"}),
        boundary_value=30000 + 60 * 10,
    ),
    Alert(
        "CdcDebeziumSchemaHistoryNotRunning",
        'max by (job, instance, target, plugin, server) (cdcwatch_debezium_schema_history_state{%(cdcwatch)s, state=~"stopped|recovering"}) == 1',
        "critical", "critical",
        "Debezium connector {{ $labels.server }}: schema history is not running",
        "The schema history of {{ $labels.server }} has not been RUNNING for %(for)s: the connector cannot read "
        "the log with the right table schemas.",
        fires=Case("stopped", {f'cdcwatch_debezium_schema_history_state{{{DBZ},context="schema-history",state="stopped"}}': "1x40"},
                   labels=labels_of(DBZ), value=1),
        quiet=Case("not stopped", {f'cdcwatch_debezium_schema_history_state{{{DBZ},context="schema-history",state="stopped"}}': "0x40"}),
    ),
    Alert(
        "CdcDebeziumErroneousEvents",
        "sum by (job, instance, target, plugin, server) (increase(cdcwatch_debezium_erroneous_events_total{%(cdcwatch)s}[%(loss_window)s])) > 0",
        "warning", "instant",
        "Debezium connector {{ $labels.server }} hits erroneous events",
        "The connector {{ $labels.server }} on {{ $labels.target }} counted events it could not process in the "
        "last %(loss_window)s; its log names the failing records.",
        fires=Case("one more every minute", {f"cdcwatch_debezium_erroneous_events_total{{{_STREAMING}}}": "0+1x40"},
                   labels=labels_of(DBZ), value=10),
        quiet=Case("a constant count", {f"cdcwatch_debezium_erroneous_events_total{{{_STREAMING}}}": "3x40"}),
        since="1m", boundary_value=2,
    ),
    Alert(
        "CdcDebeziumEventsDiscarded",
        """
        sum by (job, instance, target, plugin, server) (increase(cdcwatch_debezium_binlog_skipped_events_total{%(cdcwatch)s}[%(loss_window)s])) > 0
        or sum by (job, instance, target, plugin, server) (increase(cdcwatch_debezium_logminer_abandoned_transactions_total{%(cdcwatch)s}[%(loss_window)s])) > 0
        or sum by (job, instance, target, plugin, server) (increase(cdcwatch_debezium_logminer_oversized_transactions_total{%(cdcwatch)s}[%(loss_window)s])) > 0
        """,
        "critical", "instant",
        "Debezium connector {{ $labels.server }} discards changes",
        "The connector {{ $labels.server }} on {{ $labels.target }} skipped binlog events or abandoned or discarded "
        "transactions in the last %(loss_window)s: those changes never reach Kafka.",
        fires=Case("an abandoned transaction", {
            f"cdcwatch_debezium_binlog_skipped_events_total{{{_STREAMING}}}": "0x40",
            f"cdcwatch_debezium_logminer_abandoned_transactions_total{{{_STREAMING}}}": "0x10 1x30",
            f"cdcwatch_debezium_logminer_oversized_transactions_total{{{_STREAMING}}}": "0x40"},
            at="15m", labels=labels_of(DBZ), value=1),
        quiet=Case("nothing discarded", {
            f"cdcwatch_debezium_binlog_skipped_events_total{{{_STREAMING}}}": "2x40",
            f"cdcwatch_debezium_logminer_abandoned_transactions_total{{{_STREAMING}}}": "0x40",
            f"cdcwatch_debezium_logminer_oversized_transactions_total{{{_STREAMING}}}": "1x40"}),
        since="11m",
    ),
    Alert(
        "CdcDebeziumMetricsVanished",
        # not while the same exporter cannot reach a source database: the connectors' tasks restart then, their beans
        # vanish, and the source's page (CdcPostgresSourceUnreachable, CdcMysqlSourceUnreachable) says why; its
        # `up 0` comes a scrape before the beans go, so this alert never starts to count its `for` against that page
        """
        cdcwatch_debezium_mbeans{%(cdcwatch)s} == 0
        unless on (job, instance) cdcwatch_up{%(cdcwatch)s, collector=~"postgres|mysql"} == 0
        """,
        "critical", "critical",
        "Debezium beans vanished from {{ $labels.target }}",
        "The JVM of {{ $labels.target }} answers but registers no Debezium connector bean: the connector or its "
        "task stopped, or failed at start (see Kafka Connect's task state).",
        fires=Case("the beans are gone", {f'cdcwatch_debezium_mbeans{{{JVM}}}': "3 3 3 0x200"},
                   labels=labels_of(JVM)),
        quiet=Case("beans registered", {f'cdcwatch_debezium_mbeans{{{JVM}}}': "3x40",
                                        f'cdcwatch_up{{{SOURCE},collector="postgres"}}': "1x40"}),
        since="3m",
        more=(Case("still gone two hours later: the alert holds",
                   {f'cdcwatch_debezium_mbeans{{{JVM}}}': "3 3 3 0x200"}, at="150m",
                   labels=labels_of(JVM)),
              Case("gone while the exporter cannot reach a source database: the source's page says why",
                   {f'cdcwatch_debezium_mbeans{{{JVM}}}': "3 3 3 0x200",
                    f'cdcwatch_up{{{SOURCE},collector="postgres"}}': "1 1 0x200"})),
    ),
)

GROUP = Group("cdcwatch-debezium", RECORDINGS + SNAPSHOT_PROGRESS_BY_SOURCE, ALERTS, stage="debezium")
