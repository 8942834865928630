"""The `postgres` collector: per replication slot, whether it is active, how much WAL it retains,
how far its consumer's confirmed flush lags, and since when it has not advanced; per source, the
current WAL position (its slope is the WAL rate the slots' runway is measured against) and the size
of the WAL directory; per table a publication holds (the tables a pgoutput connector captures), the
planner's row estimate, which snapshot progress is measured against.

Four read-only statements per scrape on a fresh connection under the source's deadline; a source
that is down or slow gives `cdcwatch_up{collector="postgres"} 0`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cdcwatch.collection import Collection
from cdcwatch.config import PostgresSourceConfig
from cdcwatch.families import FamilyBuilder
from cdcwatch.specs import MetricSpec, metric_specs

if TYPE_CHECKING:
    import psycopg

__all__ = ["POSITION_QUERY", "SLOT_METRICS", "SLOTS_QUERY", "TABLES_QUERY", "WAL_DIRECTORY_QUERY", "WAL_STATUSES",
           "ReplicationSlotCollector"]

log = logging.getLogger("cdcwatch.postgres")

SLOTS_QUERY = """
SELECT slot_name, coalesce(plugin, ''), slot_type, coalesce(database, ''), active, coalesce(wal_status, ''),
       safe_wal_size,
       pg_wal_lsn_diff(current.lsn, restart_lsn)::bigint,
       pg_wal_lsn_diff(current.lsn, confirmed_flush_lsn)::bigint,
       confirmed_flush_lsn::text
FROM pg_replication_slots,
     (SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END AS lsn) current
"""
"""Read-only: pg_replication_slots and the current WAL position (the replay position on a standby)."""

POSITION_QUERY = """
SELECT pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END,
                       '0/0')::bigint
"""
"""The current WAL position as a byte number (the position safe_wal_size is measured from)."""

TABLES_QUERY = """
SELECT p.pubname, current_database(), p.schemaname, p.tablename, c.reltuples::float8, s.n_live_tup
FROM pg_publication_tables p
JOIN pg_namespace n ON n.nspname = p.schemaname
JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename
LEFT JOIN pg_stat_all_tables s ON s.relid = c.oid
ORDER BY 1, 3, 4
"""
"""Read-only: the tables of the connected database's publications with pg_class.reltuples (-1 from PostgreSQL 14
on while the table was never vacuumed or analyzed) and the cumulative statistics' live-row count."""

WAL_DIRECTORY_QUERY = "SELECT coalesce(sum(size), 0)::bigint FROM pg_ls_waldir()"
"""The WAL directory's size; pg_ls_waldir() needs superuser or pg_monitor, and the result is left out without."""

def _undefined_table() -> type[Exception]:
    import psycopg.errors

    return psycopg.errors.UndefinedTable


def _not_permitted() -> tuple[type[Exception], ...]:
    """Why the WAL directory may not be listable: a role without pg_monitor, a PostgreSQL-compatible server without
    pg_ls_waldir (YugabyteDB). The slots are still collected."""
    import psycopg.errors

    return psycopg.errors.InsufficientPrivilege, psycopg.errors.UndefinedFunction, psycopg.errors.FeatureNotSupported

WAL_STATUSES = ("reserved", "extended", "unreserved", "lost")

# labels besides target and the source's static labels
POSTGRES_WAL_POSITION_BYTES = MetricSpec("cdcwatch_postgres_wal_position_bytes", "gauge", (
    "Current WAL position (LSN) as a byte number: pg_current_wal_lsn(), on a standby "
    "pg_last_wal_replay_lsn(). Its slope is the WAL rate; it goes back only on a failover to a server "
    "with less WAL."))
POSTGRES_WAL_DIRECTORY_BYTES = MetricSpec("cdcwatch_postgres_wal_directory_bytes", "gauge", (
    "Size of the files in the WAL directory (pg_ls_waldir(); absent where the role may not list it: grant "
    "pg_monitor)."))
POSTGRES_TABLE_ROWS_ESTIMATE = MetricSpec("cdcwatch_postgres_table_rows_estimate", "gauge", (
    "Estimated rows of a table a publication holds (an estimate, not a count): pg_class.reltuples as of the last "
    "VACUUM/ANALYZE, or pg_stat_all_tables.n_live_tup while the table was never analyzed. `table` is "
    "`schema.table`, Debezium's RowsScanned key; `server` comes from publication_servers."),
    ("database", "table", "server"))
POSTGRES_REPLICATION_SLOTS = MetricSpec("cdcwatch_postgres_replication_slots", "gauge", "Replication slots reported on the source.")
SLOT_ACTIVE = MetricSpec("cdcwatch_postgres_replication_slot_active", "gauge", (
    "1 if a consumer is connected to the slot."),
    ("slot", "slot_type", "plugin", "database", "server"))
SLOT_WAL_STATUS = MetricSpec("cdcwatch_postgres_replication_slot_wal_status", "gauge", (
    "WAL availability as a state set (reserved, extended, unreserved, lost: the slot can no longer "
    "stream)."),
    ("slot", "server", "wal_status"))
SLOT_SAFE_WAL_SIZE_BYTES = MetricSpec("cdcwatch_postgres_replication_slot_safe_wal_size_bytes", "gauge", (
    "WAL that can still be written before the slot is at risk of losing WAL (absent without "
    "max_slot_wal_keep_size)."),
    ("slot", "server"))
SLOT_RETAINED_WAL_BYTES = MetricSpec("cdcwatch_postgres_replication_slot_retained_wal_bytes", "gauge", (
    "WAL the slot keeps on disk: current WAL position minus the slot's restart_lsn."),
    ("slot", "server"))
SLOT_CONFIRMED_FLUSH_LAG_BYTES = MetricSpec("cdcwatch_postgres_replication_slot_confirmed_flush_lag_bytes", "gauge", (
    "Current WAL position minus the position the consumer confirmed (logical slots)."),
    ("slot", "server"))
SLOT_LAST_ADVANCE_TIMESTAMP_SECONDS = MetricSpec("cdcwatch_postgres_replication_slot_last_advance_timestamp_seconds", "gauge", (
    "When cdcwatch last saw the slot's confirmed flush position move (its first sighting until it does)."),
    ("slot", "server"))
SLOT_METRICS = metric_specs(
    POSTGRES_WAL_POSITION_BYTES,
    POSTGRES_WAL_DIRECTORY_BYTES,
    POSTGRES_TABLE_ROWS_ESTIMATE,
    POSTGRES_REPLICATION_SLOTS,
    SLOT_ACTIVE,
    SLOT_WAL_STATUS,
    SLOT_SAFE_WAL_SIZE_BYTES,
    SLOT_RETAINED_WAL_BYTES,
    SLOT_CONFIRMED_FLUSH_LAG_BYTES,
    SLOT_LAST_ADVANCE_TIMESTAMP_SECONDS,
)


@dataclass
class _Slot:
    name: str
    plugin: str
    slot_type: str
    database: str
    active: bool
    wal_status: str
    safe_wal_size: int | None
    retained: int | None
    flush_lag: int | None
    confirmed_flush: str | None


class ReplicationSlotCollector:
    """Collects one source's replication slots; raises on failure (the exporter turns that into up=0)."""

    kind = "postgres"

    def __init__(self, source: PostgresSourceConfig) -> None:
        self.source = source
        self.target = source.name
        self.address = f"{source.host}:{source.port}"
        self.common = {"target": self.target, **source.labels}
        """The labels of every series of the source."""
        self.advanced: dict[str, tuple[str | None, float]] = {}
        self.wal_directory_denied = False
        """The WAL directory could not be listed (said once in the log, tried again every scrape)."""
        self.tables_denied = False
        """The publications' tables could not be read (a server without publications; said once in the log)."""

    def _connect(self, deadline: float) -> psycopg.Connection:
        # imported at the first collection: libpq costs about 20 MiB, which an exporter without PostgreSQL targets
        # does not pay
        import psycopg

        password = self.source.password.get_secret_value() if self.source.password else None
        return psycopg.connect(host=self.source.host, port=self.source.port, dbname=self.source.dbname,
                               user=self.source.user, password=password, sslmode=self.source.sslmode,
                               sslrootcert=self.source.sslrootcert, sslcert=self.source.sslcert,
                               sslkey=self.source.sslkey,  # None: libpq's default
                               connect_timeout=max(int(deadline - time.monotonic()), 1),
                               options=f"-c statement_timeout={int(self.source.timeout_seconds * 1000)}",
                               application_name="cdcwatch", autocommit=True)

    def collect(self) -> Collection:
        deadline = time.monotonic() + self.source.timeout_seconds
        with self._connect(deadline) as connection:
            connection.read_only = True
            rows = connection.execute(SLOTS_QUERY).fetchall()
            wal_position = _one(connection.execute(POSITION_QUERY).fetchone())
            wal_directory = self._wal_directory(connection)
            tables = self._tables(connection)
        now = time.time()
        slots = [_Slot(*row) for row in rows if self.source.slots.matches(row[0])]
        builder = FamilyBuilder()
        if wal_position is not None:  # NULL on a standby that has replayed nothing yet
            builder.add_spec(POSTGRES_WAL_POSITION_BYTES, wal_position, self.common)
        if wal_directory is not None:
            builder.add_spec(POSTGRES_WAL_DIRECTORY_BYTES, wal_directory, self.common)
        builder.add_spec(POSTGRES_REPLICATION_SLOTS, len(slots), self.common)
        seen: dict[str, tuple[str | None, float]] = {}
        for slot in slots:
            server = self.source.slot_servers.get(slot.name, "")
            where = {"slot": slot.name, "server": server}
            builder.add_spec(SLOT_ACTIVE, float(slot.active), self.common, slot=slot.name, slot_type=slot.slot_type, plugin=slot.plugin,
                             database=slot.database, server=server)
            for status in WAL_STATUSES:
                builder.add_spec(SLOT_WAL_STATUS, float(slot.wal_status == status), self.common, wal_status=status, **where)
            for spec, measured in ((SLOT_SAFE_WAL_SIZE_BYTES, slot.safe_wal_size), (SLOT_RETAINED_WAL_BYTES, slot.retained),
                                   (SLOT_CONFIRMED_FLUSH_LAG_BYTES, slot.flush_lag)):
                if measured is not None:
                    builder.add_spec(spec, measured, self.common, **where)
            position, since = self.advanced.get(slot.name, (slot.confirmed_flush, now))
            seen[slot.name] = (slot.confirmed_flush, since if position == slot.confirmed_flush else now)
            builder.add_spec(SLOT_LAST_ADVANCE_TIMESTAMP_SECONDS, seen[slot.name][1], self.common, **where)
        self.advanced = seen
        estimated = self._estimates(builder, tables)
        inactive = sum(not slot.active for slot in slots)
        return Collection(builder.families(), f"{len(slots)} slots, {inactive} inactive, {estimated} tables estimated")

    def _estimates(self, builder: FamilyBuilder, rows: list[tuple[object, ...]]) -> int:
        """One row estimate per (server, table) of the publications allowed; a table in two publications of one
        server is reported once."""
        done: set[tuple[str, str]] = set()
        for publication, database, schema, table, reltuples, live in rows:
            if not self.source.publications.matches(str(publication)):
                continue
            server, name = self.source.publication_servers.get(str(publication), ""), f"{schema}.{table}"
            estimate = _estimate(reltuples, live)
            if estimate is None or (server, name) in done:
                continue
            done.add((server, name))
            builder.add_spec(POSTGRES_TABLE_ROWS_ESTIMATE, estimate, self.common, database=str(database), table=name, server=server)
        return len(done)

    def _tables(self, connection: psycopg.Connection) -> list[tuple[object, ...]]:
        try:
            return connection.execute(TABLES_QUERY).fetchall()
        except (*_not_permitted(), _undefined_table()) as exc:
            if not self.tables_denied:
                log.info("%s: no row estimates of published tables: %s", self.target, str(exc).strip())
                self.tables_denied = True
            return []

    def _wal_directory(self, connection: psycopg.Connection) -> int | None:
        try:
            size = _one(connection.execute(WAL_DIRECTORY_QUERY).fetchone())
        except _not_permitted() as exc:
            if not self.wal_directory_denied:
                log.info("%s: the WAL directory's size is not reported: %s", self.target, str(exc).strip())
                self.wal_directory_denied = True
            return None
        self.wal_directory_denied = False
        return size

    def inherit(self, previous: ReplicationSlotCollector) -> None:
        """Carry on what the collector this one replaces at a reload saw: when each slot last advanced (else every
        slot's last advance would read as the reload's time), and what was already said in the log."""
        self.advanced = dict(previous.advanced)
        self.wal_directory_denied, self.tables_denied = previous.wal_directory_denied, previous.tables_denied

    def close(self) -> None:
        """Nothing is held open between scrapes."""


def _one(row: tuple[object, ...] | None) -> int | None:
    value = row[0] if row else None
    return int(value) if isinstance(value, int) else None


def _estimate(reltuples: object, live: object) -> float | None:
    """reltuples once a VACUUM or ANALYZE counted rows; else (-1: never analyzed, from PostgreSQL 14 on; 0: never
    analyzed before 14, or empty when analyzed) the cumulative statistics' live-row count, which counts the rows
    inserted since."""
    if isinstance(reltuples, (int, float)) and reltuples > 0:
        return float(reltuples)
    if isinstance(live, int) and live >= 0:
        return float(live)
    return 0.0 if reltuples == 0 else None
