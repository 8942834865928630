"""The real Debezium MySQL connector against MariaDB with file schema history."""

from __future__ import annotations

import pytest

from devstack.configs import exporter_config, jmx_target
from devstack.debezium import DebeziumProcess, mysql_connector_properties
from devstack.procs import free_port, wait_for
from tests.integration.conftest import value

pytestmark = pytest.mark.integration

DDL = [
    "CREATE TABLE shop.audit (id INT PRIMARY KEY, note VARCHAR(40))",
    "ALTER TABLE shop.audit ADD COLUMN created DATETIME",
    "CREATE TABLE shop.tags (id INT PRIMARY KEY)",
    "ALTER TABLE shop.products ADD COLUMN colour VARCHAR(10)",
    "DROP TABLE shop.tags",
]


def test_schema_history_running_and_changes_applied_equal_ddl(mariadb, stack_dir, serve_factory):
    mariadb.root_sql("CREATE DATABASE IF NOT EXISTS shop;"
                     "CREATE TABLE shop.products (id INT PRIMARY KEY, name VARCHAR(20));"
                     "INSERT INTO shop.products VALUES (1, 'a'), (2, 'b'), (3, 'c');")
    state = stack_dir / "dbz-mysql"
    props = mysql_connector_properties(state, mariadb.port, mariadb.user, mariadb.password, "mariasrv", "shop")
    connector = DebeziumProcess(state, free_port(), props)
    connector.start()
    try:
        serve = serve_factory(exporter_config(debezium=[jmx_target("maria", connector.jmx_port)]))

        def streaming():
            values = serve.scrape()
            return values if value(values, "cdcwatch_debezium_connected", target="maria", plugin="mysql") == 1 else None

        values = wait_for(streaming, 90, "the MySQL connector to stream")
        assert value(values, "cdcwatch_debezium_schema_history_state", target="maria", state="running") == 1
        assert value(values, "cdcwatch_debezium_schema_history_state", target="maria", state="recovering") == 0
        assert value(values, "cdcwatch_debezium_snapshot_rows_scanned_total", target="maria", table="shop.products") == 3
        before = value(values, "cdcwatch_debezium_schema_history_changes_applied_total", target="maria", context="schema-history")
        assert before is not None and before > 0

        for statement in DDL:
            mariadb.root_sql(statement)
        expected = before + len(DDL)
        wait_for(lambda: value(serve.scrape(), "cdcwatch_debezium_schema_history_changes_applied_total",
                               target="maria", context="schema-history") == expected, 60,
                 f"schema history changes applied to reach {expected}")
        values = serve.scrape()
        assert value(values, "cdcwatch_debezium_schema_history_seconds_since_last_applied_change", target="maria") < 60
        assert value(values, "cdcwatch_debezium_binlog_file_number", target="maria") >= 1
        assert value(values, "cdcwatch_debezium_binlog_position_bytes", target="maria") > 0
        assert value(values, "cdcwatch_up", target="maria") == 1
    finally:
        connector.stop()
