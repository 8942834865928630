"""The `mysql` collector: per source, whether it writes a binary log, how long it keeps binlogs
(`binlog_expire_logs_seconds`, on older servers `expire_logs_days`), the position it writes at, and per binlog
its sequence number, its size, when it was rotated (closed) and so when it expires; per table of the source
(the ones `tables` allows, system databases never), the server's row estimate, which snapshot progress is
measured against.

Statements per scrape on a fresh connection under the source's deadline: `SHOW GLOBAL VARIABLES`,
`SHOW BINARY LOGS` (the last binlog's size is the current write position) and a read of `information_schema.tables`. When a
binlog was rotated is the start time of the binlog after it: the timestamp of that file's format description
event, its first event, written when the server opened it. SQL shows no event times, so it is read the way a
replica reads it: a non-blocking binlog dump (COM_BINLOG_DUMP) from position 4 of that file, closed after its
first real event; once per file, then remembered. The server expires a binlog by its file's modification time,
the moment it was closed, so the rotation time plus the expiry period is when the binlog becomes removable (at
the server's next rotation or restart). The event timestamp is in whole seconds, rounded down: the expiry is at
most a second early, never late.

A source that is down or slow gives `cdcwatch_up{collector="mysql"} 0`; a server without a binary log gives
`cdcwatch_mysql_binlog_enabled 0` and no binlog or table series; without the REPLICATION SLAVE privilege the
binlogs are listed without rotation and expiry times (said once in the log).
"""

from __future__ import annotations

import itertools
import logging
import re
import struct
import time
from typing import Any

from cdcwatch.collection import Collection
from cdcwatch.config import MysqlSourceConfig
from cdcwatch.families import FamilyBuilder
from cdcwatch.mysql.replication import binlog_dump_events
from cdcwatch.specs import MetricSpec, metric_specs

__all__ = ["BINLOG_METRICS", "TABLES_QUERY", "VARIABLES_QUERY", "BinlogCollector", "expire_seconds", "file_number"]

log = logging.getLogger("cdcwatch.mysql")

VARIABLES_QUERY = ("SHOW GLOBAL VARIABLES WHERE Variable_name IN "
                   "('log_bin', 'binlog_expire_logs_seconds', 'expire_logs_days', 'information_schema_stats_expiry')")
"""Read-only; binlog_expire_logs_seconds exists from MySQL 8.0 and MariaDB 10.6, expire_logs_days until MySQL 8.4,
information_schema_stats_expiry on MySQL 8 only."""

TABLES_QUERY = """
SELECT table_schema, table_name, table_rows
FROM information_schema.tables
WHERE table_type IN ('BASE TABLE', 'SYSTEM VERSIONED') AND table_rows IS NOT NULL
  AND table_schema NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')
ORDER BY table_schema, table_name
"""
"""Read-only: the row estimate of every table the user may see outside the system databases (views and engines
without an estimate have none). InnoDB's is the persistent statistics' row count: exact for a table small enough
that ANALYZE TABLE samples all its pages, an estimate for a larger one."""

_FRESH_STATISTICS = "SET SESSION information_schema_stats_expiry = 0"
"""MySQL 8 answers information_schema.tables from a cache up to a day old (information_schema_stats_expiry); this
session reads the storage engine's current statistics instead. MariaDB has no such cache (and no such variable)."""

_FORMAT_DESCRIPTION_EVENT = 15
_CHECKSUM = ("SET @master_binlog_checksum = @@global.binlog_checksum, @source_binlog_checksum = @@global.binlog_checksum,"
             " @mariadb_slave_capability = 4")
"""A dump client must say it understands the server's event checksums (MySQL and MariaDB refuse the dump otherwise)."""

_FILE = ("server", "file")
BINLOG_ENABLED = MetricSpec("cdcwatch_mysql_binlog_enabled", "gauge", (
    "1 if the server writes a binary log (log_bin), else 0: a CDC connector then has nothing to read, and the "
    "other binlog series are absent."), ("server",))
BINLOG_EXPIRE_SECONDS = MetricSpec("cdcwatch_mysql_binlog_expire_seconds", "gauge", (
    "How long the server keeps a binlog after it was rotated: binlog_expire_logs_seconds, or expire_logs_days "
    "times 86400 on servers without it; 0: binlogs never expire."), ("server",))
BINLOG_FILES = MetricSpec("cdcwatch_mysql_binlog_files", "gauge", "Binary logs the server keeps (SHOW BINARY LOGS).", ("server",))
BINLOG_SIZE_BYTES = MetricSpec("cdcwatch_mysql_binlog_size_bytes", "gauge", "Size of all the binary logs the server keeps.", ("server",))
BINLOG_WRITE_FILE_NUMBER = MetricSpec("cdcwatch_mysql_binlog_write_file_number", "gauge", (
    "Sequence number of the binlog the server writes (the last of SHOW BINARY LOGS)."), ("server",))
BINLOG_WRITE_POSITION_BYTES = MetricSpec("cdcwatch_mysql_binlog_write_position_bytes", "gauge", (
    "Position the server writes at in that binlog (its size)."), ("server",))
BINLOG_FILE_NUMBER = MetricSpec("cdcwatch_mysql_binlog_file_number", "gauge", (
    "Sequence number of each binlog the server keeps (the file name's numeric extension): what "
    "cdcwatch_debezium_binlog_file_number is compared with."), _FILE)
BINLOG_FILE_SIZE_BYTES = MetricSpec("cdcwatch_mysql_binlog_file_size_bytes", "gauge", "Size of each binlog the server keeps.", _FILE)
BINLOG_FILE_ROTATED_TIMESTAMP_SECONDS = MetricSpec("cdcwatch_mysql_binlog_file_rotated_timestamp_seconds", "gauge", (
    "When each binlog was rotated (closed): the start time of the next binlog, in whole seconds (absent for "
    "the binlog being written, and without the REPLICATION SLAVE privilege)."), _FILE)
BINLOG_FILE_EXPIRY_TIMESTAMP_SECONDS = MetricSpec("cdcwatch_mysql_binlog_file_expiry_timestamp_seconds", "gauge", (
    "When each rotated binlog expires: its rotation time plus the expiry period; from then on the server "
    "removes it at its next rotation or restart (absent while binlogs never expire)."), _FILE)
MYSQL_TABLE_ROWS_ESTIMATE = MetricSpec("cdcwatch_mysql_table_rows_estimate", "gauge", (
    "Estimated rows of a table of the source (an estimate, not a count): information_schema.tables.table_rows, "
    "for InnoDB the persistent statistics as of the last ANALYZE TABLE or automatic recalculation. `table` is "
    "`database.table`, Debezium's RowsScanned key; the tables are those `tables` allows, at most `max_tables`."),
    ("database", "table", "server"))
BINLOG_METRICS = metric_specs(
    BINLOG_ENABLED,
    BINLOG_EXPIRE_SECONDS,
    BINLOG_FILES,
    BINLOG_SIZE_BYTES,
    BINLOG_WRITE_FILE_NUMBER,
    BINLOG_WRITE_POSITION_BYTES,
    BINLOG_FILE_NUMBER,
    BINLOG_FILE_SIZE_BYTES,
    BINLOG_FILE_ROTATED_TIMESTAMP_SECONDS,
    BINLOG_FILE_EXPIRY_TIMESTAMP_SECONDS,
    MYSQL_TABLE_ROWS_ESTIMATE,
)

_NUMBER = re.compile(r"\.([0-9]+)$")


def file_number(name: str) -> int | None:
    """A binlog's sequence number: the numeric extension of its file name (`mariadb-bin.000012` → 12)."""
    match = _NUMBER.search(name)
    return int(match.group(1)) if match else None


def expire_seconds(variables: dict[str, str]) -> float:
    """The expiry period from SHOW GLOBAL VARIABLES: binlog_expire_logs_seconds where set, else expire_logs_days
    (a fraction of a day on MariaDB), else 0 (never)."""
    seconds = float(variables.get("binlog_expire_logs_seconds") or 0)
    if seconds > 0:
        return seconds
    return float(variables.get("expire_logs_days") or 0) * 86400


class BinlogCollector:
    """Collects one source's binary logs; raises on failure (the exporter turns that into up=0)."""

    kind = "mysql"

    def __init__(self, source: MysqlSourceConfig) -> None:
        self.source = source
        self.target = source.name
        self.address = f"{source.host}:{source.port}"
        self.common = {"target": self.target, **source.labels, "server": source.server}
        """The labels of every series of the source (`server` is declared by every spec)."""
        self.started: dict[str, float] = {}
        """Start time of each binlog read so far (by file name); a file's start is the rotation of the one before."""
        self.dump_denied = False
        """Binlog dumps were refused (said once in the log; tried again for each new file)."""
        self.disabled_said = False
        self.capped_said = False
        """More tables than max_tables were allowed (said once in the log)."""

    def _connect(self, deadline: float) -> Any:
        try:
            import pymysql
        except ImportError:
            raise RuntimeError("the mysql collector needs PyMySQL: pip install 'cdcwatch[mysql]'") from None
        timeout = max(deadline - time.monotonic(), 0.5)
        password = self.source.password.get_secret_value() if self.source.password else ""
        ssl = {"ca": self.source.ssl_ca} if self.source.ssl_ca else None
        return pymysql.connect(host=self.source.host, port=self.source.port, user=self.source.user, password=password,
                               ssl=ssl, connect_timeout=timeout, read_timeout=timeout, write_timeout=timeout,
                               autocommit=True, charset="utf8mb4")

    def collect(self) -> Collection:
        deadline = time.monotonic() + self.source.timeout_seconds
        connection = self._connect(deadline)
        try:
            with connection.cursor() as cursor:
                cursor.execute(VARIABLES_QUERY)
                variables = {str(name).lower(): str(value) for name, value in cursor.fetchall()}
                enabled = variables.get("log_bin", "OFF").upper() in ("ON", "1")
                binlogs: list[tuple[str, int]] = []
                tables: list[tuple[Any, ...]] = []
                if enabled:  # without a binary log no connector captures a table
                    cursor.execute("SHOW BINARY LOGS")
                    binlogs = [(str(row[0]), int(row[1])) for row in cursor.fetchall()]
                    if "information_schema_stats_expiry" in variables:
                        cursor.execute(_FRESH_STATISTICS)
                    cursor.execute(TABLES_QUERY)
                    tables = list(cursor.fetchall())
        finally:
            connection.close()
        builder = FamilyBuilder()
        builder.add_spec(BINLOG_ENABLED, float(enabled), self.common)
        if not enabled:
            if not self.disabled_said:
                log.warning("%s: the server writes no binary log (log_bin is OFF): no CDC connector can read it", self.target)
                self.disabled_said = True
            return Collection(builder.families(), "binary log disabled (log_bin OFF)")
        self.disabled_said = False
        expire = expire_seconds(variables)
        builder.add_spec(BINLOG_EXPIRE_SECONDS, expire, self.common)
        builder.add_spec(BINLOG_FILES, len(binlogs), self.common)
        builder.add_spec(BINLOG_SIZE_BYTES, sum(size for _, size in binlogs), self.common)
        if binlogs:
            current, position = binlogs[-1]
            number = file_number(current)
            if number is not None:
                builder.add_spec(BINLOG_WRITE_FILE_NUMBER, number, self.common)
            builder.add_spec(BINLOG_WRITE_POSITION_BYTES, position, self.common)
        self._read_starts([name for name, _ in binlogs[1:]], deadline)
        for (name, size), following in zip(binlogs, [*binlogs[1:], None], strict=True):
            number = file_number(name)
            if number is not None:
                builder.add_spec(BINLOG_FILE_NUMBER, number, self.common, file=name)
            builder.add_spec(BINLOG_FILE_SIZE_BYTES, size, self.common, file=name)
            rotated = self.started.get(following[0]) if following else None
            if rotated is not None:
                builder.add_spec(BINLOG_FILE_ROTATED_TIMESTAMP_SECONDS, rotated, self.common, file=name)
                if expire > 0:
                    builder.add_spec(BINLOG_FILE_EXPIRY_TIMESTAMP_SECONDS, rotated + expire, self.common, file=name)
        total = sum(size for _, size in binlogs)
        estimated = self._estimates(builder, tables)
        return Collection(builder.families(), f"{len(binlogs)} binlogs, {total} bytes, expire {expire:g}s, "
                                              f"{estimated} tables estimated")

    def _estimates(self, builder: FamilyBuilder, rows: list[tuple[Any, ...]]) -> int:
        """One row estimate per table `tables` allows, the first `max_tables` in name order."""
        allowed = [(str(schema), str(table), rows_estimate) for schema, table, rows_estimate in rows
                   if self.source.tables.matches(f"{schema}.{table}")]
        limit = self.source.max_tables
        if len(allowed) > limit and not self.capped_said:
            log.warning("%s: %d tables allowed, row estimates of the first %d only (max_tables); narrow `tables`",
                        self.target, len(allowed), limit)
            self.capped_said = True
        for schema, table, rows_estimate in allowed[:limit]:
            builder.add_spec(MYSQL_TABLE_ROWS_ESTIMATE, float(rows_estimate), self.common, database=schema, table=f"{schema}.{table}")
        return min(len(allowed), limit)

    def _read_starts(self, names: list[str], deadline: float) -> None:
        """The start time of each binlog not read yet, while the deadline allows (the rest at the next scrape)."""
        listed = set(names)
        self.started = {name: started for name, started in self.started.items() if name in listed}
        for name in names:
            if name in self.started:
                continue
            if time.monotonic() >= deadline:
                return
            started = self._start_time(name, deadline)
            if started is None:
                return
            self.started[name] = started

    def _start_time(self, name: str, deadline: float) -> float | None:
        """The timestamp of the binlog's format description event, read with a non-blocking binlog dump."""
        import pymysql

        connection = self._connect(deadline)
        try:
            with connection.cursor() as cursor:
                cursor.execute(_CHECKSUM)
            events = binlog_dump_events(connection, name)
            for event in itertools.islice(events, 4):  # a rotate event the server makes up, then the file's first
                if len(event) < 19:
                    return None
                when, kind = struct.unpack_from("<IB", event)
                if kind == _FORMAT_DESCRIPTION_EVENT:
                    self.dump_denied = False
                    return float(when)
            return None
        except pymysql.err.MySQLError as exc:  # REPLICATION SLAVE missing, a file gone meanwhile
            if not self.dump_denied:
                log.warning("%s: cannot read when binlog %s started (%s): binlogs get no rotation or expiry time; "
                            "grant REPLICATION SLAVE", self.target, name, exc.args[-1] if exc.args else exc)
                self.dump_denied = True
            return None
        finally:
            try:
                connection.close()
            except Exception:  # the server may be mid-stream; the socket goes anyway
                pass

    def inherit(self, previous: BinlogCollector) -> None:
        """Carry on what the collector this one replaces at a reload learned: each binlog's start time (a dump per
        file saved, and kept where the server no longer lets them be read), and what was already said in the log."""
        self.started = dict(previous.started)
        self.dump_denied, self.disabled_said, self.capped_said = (previous.dump_denied, previous.disabled_said,
                                                                  previous.capped_said)

    def close(self) -> None:
        """Nothing is held open between scrapes."""
