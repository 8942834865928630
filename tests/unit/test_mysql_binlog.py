"""The mysql collector's own logic on canned server answers: file numbers, the expiry period, a server without a
binary log, rotation times from the next binlog's start, and a missing PyMySQL."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from cdcwatch.config import MysqlSourceConfig
from cdcwatch.mysql import BinlogCollector
from cdcwatch.mysql.binlog import TABLES_QUERY, expire_seconds, file_number


class _Cursor:
    def __init__(self, answers: dict[str, list[tuple[Any, ...]]]) -> None:
        self.answers = answers
        self.rows: list[tuple[Any, ...]] = []

    def __enter__(self) -> _Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def execute(self, statement: str) -> None:
        self.rows = next((rows for start, rows in self.answers.items() if statement.startswith(start)), [])

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows


class _Connection:
    def __init__(self, answers: dict[str, list[tuple[Any, ...]]]) -> None:
        self.answers = answers

    def cursor(self) -> _Cursor:
        return _Cursor(self.answers)

    def close(self) -> None:
        pass


def _collector(answers: dict[str, list[tuple[Any, ...]]], starts: dict[str, float]) -> BinlogCollector:
    collector = BinlogCollector(MysqlSourceConfig(name="maria", user="cdc", server="orders", labels={"env": "t"}))
    collector._connect = lambda deadline: _Connection(answers)  # type: ignore[method-assign]
    collector._start_time = lambda name, deadline: starts.get(name)  # type: ignore[method-assign]
    return collector


def _samples(collection: Any) -> dict[tuple[str, str], float]:
    return {(s.name, s.labels.get("file", "")): s.value for f in collection.families for s in f.samples}


def test_file_numbers_and_the_expiry_period() -> None:
    assert file_number("mariadb-bin.000012") == 12
    assert file_number("binlog.1000000") == 1000000
    assert file_number("no-number") is None
    assert expire_seconds({"binlog_expire_logs_seconds": "3600", "expire_logs_days": "0.041667"}) == 3600
    assert expire_seconds({"expire_logs_days": "7"}) == 7 * 86400  # MySQL 5.7: no binlog_expire_logs_seconds
    assert expire_seconds({"binlog_expire_logs_seconds": "0", "expire_logs_days": "0.5"}) == 43200
    assert expire_seconds({}) == 0


def test_a_server_without_a_binary_log_is_reported_not_failed() -> None:
    collector = _collector({"SHOW GLOBAL VARIABLES": [("log_bin", "OFF"), ("expire_logs_days", "0")]}, {})
    collection = collector.collect()
    assert _samples(collection) == {("cdcwatch_mysql_binlog_enabled", ""): 0}
    assert collection.summary == "binary log disabled (log_bin OFF)"


def test_each_binlog_is_rotated_when_the_next_one_starts() -> None:
    answers = {"SHOW GLOBAL VARIABLES": [("binlog_expire_logs_seconds", "600"), ("log_bin", "ON")],
               "SHOW BINARY LOGS": [("bin.000011", 1000), ("bin.000012", 2000), ("bin.000013", 345)]}
    collector = _collector(answers, {"bin.000012": 5000.0, "bin.000013": 7000.0})
    samples = _samples(collector.collect())
    assert samples[("cdcwatch_mysql_binlog_files", "")] == 3
    assert samples[("cdcwatch_mysql_binlog_size_bytes", "")] == 3345
    assert samples[("cdcwatch_mysql_binlog_write_file_number", "")] == 13
    assert samples[("cdcwatch_mysql_binlog_write_position_bytes", "")] == 345
    assert samples[("cdcwatch_mysql_binlog_file_number", "bin.000012")] == 12
    assert samples[("cdcwatch_mysql_binlog_file_rotated_timestamp_seconds", "bin.000011")] == 5000
    assert samples[("cdcwatch_mysql_binlog_file_expiry_timestamp_seconds", "bin.000011")] == 5600
    assert samples[("cdcwatch_mysql_binlog_file_expiry_timestamp_seconds", "bin.000012")] == 7600
    assert ("cdcwatch_mysql_binlog_file_rotated_timestamp_seconds", "bin.000013") not in samples  # being written
    # a binlog whose successor's start is unknown gets no rotation time; a purged one is forgotten
    answers["SHOW BINARY LOGS"] = [("bin.000012", 2000), ("bin.000013", 345), ("bin.000014", 4)]
    samples = _samples(collector.collect())
    assert ("cdcwatch_mysql_binlog_file_rotated_timestamp_seconds", "bin.000013") not in samples
    assert samples[("cdcwatch_mysql_binlog_file_rotated_timestamp_seconds", "bin.000012")] == 7000
    assert set(collector.started) == {"bin.000013"}


def test_without_pymysql_the_source_is_down_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pymysql", None)
    collector = BinlogCollector(MysqlSourceConfig(name="maria", user="cdc"))
    with pytest.raises(RuntimeError, match=r"pip install 'cdcwatch\[mysql\]'"):
        collector.collect()


def test_row_estimates_of_the_allowed_tables_up_to_the_cap(caplog: pytest.LogCaptureFixture) -> None:
    answers = {"SHOW GLOBAL VARIABLES": [("log_bin", "ON")], "SHOW BINARY LOGS": [("bin.000001", 400)],
               "\nSELECT table_schema": [("shop", "items", 1200), ("shop", "orders", 50), ("shop", "audit_log", 9),
                                         ("stage", "load", 7)]}
    source = MysqlSourceConfig(name="maria", user="cdc", server="orders", max_tables=2,
                               tables={"allow": ["shop\\..*"], "deny": ["shop\\.audit_.*"]})
    collector = BinlogCollector(source)
    collector._connect = lambda deadline: _Connection(answers)  # type: ignore[method-assign]
    collection = collector.collect()
    estimates = {(s.labels["database"], s.labels["table"], s.labels["server"]): s.value for f in collection.families
                 for s in f.samples if s.name == "cdcwatch_mysql_table_rows_estimate"}
    # `database.table`, Debezium MySQL's RowsScanned key; the source's server joins it to the connector
    assert estimates == {("shop", "shop.items", "orders"): 1200, ("shop", "shop.orders", "orders"): 50}
    assert collection.summary.endswith("2 tables estimated")
    assert "2 tables allowed" not in caplog.text  # the cap was not reached
    collector.source = source.model_copy(update={"max_tables": 1})
    samples = [s for f in collector.collect().families for s in f.samples if s.name == "cdcwatch_mysql_table_rows_estimate"]
    assert [s.labels["table"] for s in samples] == ["shop.items"]  # the first in name order
    assert "2 tables allowed, row estimates of the first 1 only" in caplog.text


def test_mysql_8_reads_current_statistics_not_its_cache() -> None:
    executed: list[str] = []

    class Recording(_Cursor):
        def execute(self, statement: str) -> None:
            executed.append(statement)
            super().execute(statement)

    answers = {"SHOW GLOBAL VARIABLES": [("log_bin", "ON"), ("information_schema_stats_expiry", "86400")],
               "SHOW BINARY LOGS": [("bin.000001", 400)]}
    connection = _Connection(answers)
    connection.cursor = lambda: Recording(answers)  # type: ignore[method-assign]
    collector = BinlogCollector(MysqlSourceConfig(name="mysql8", user="cdc"))
    collector._connect = lambda deadline: connection  # type: ignore[method-assign]
    collector.collect()
    assert executed.index("SET SESSION information_schema_stats_expiry = 0") < executed.index(TABLES_QUERY)
    executed.clear()
    answers["SHOW GLOBAL VARIABLES"] = [("log_bin", "ON")]  # MariaDB: no cache, no variable
    collector.collect()
    assert TABLES_QUERY in executed and not any(s.startswith("SET SESSION") for s in executed)
