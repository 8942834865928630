"""The mysql collector and the binlog runway on a real MariaDB with a real Debezium MySQL connector.

The row estimate of the table the connector snapshots is checked against `count(*)` after `ANALYZE TABLE` and
joined by the generated rules to the connector's snapshot progress. The collector's binlog list and sizes are
checked against `SHOW BINARY LOGS` read by the test, and the rotation time of the connector's binlog against the
test's clock around its `FLUSH BINARY LOGS`. Then, with a short
`binlog_expire_logs_seconds` and the connector stopped on that binlog, the generated rules on a real Prometheus
must count the runway down to the moment the test's clock says (rotation + expiry), the critical alert must fire
before then, while the server still has the binlog, and resolve once the restarted connector has caught up; a
rotation after the expiry then removes the binlog, as the runway said it would.
"""

from __future__ import annotations

import json
import time

import pytest

from cdcwatch.events import decode
from cdcwatch.mixin import MixinConfig
from cdcwatch.mixin.generate import rules_yaml
from cdcwatch.promapi import PrometheusApi
from devstack.configs import exporter_config, jmx_target, mysql_source
from devstack.debezium import DebeziumProcess, mysql_connector_properties
from devstack.procs import free_port, wait_for
from devstack.prometheus import PrometheusServer
from tests.integration.conftest import promtool_check, value

pytestmark = pytest.mark.integration

SERVER = "binsrv"
EXPIRE = 36
"""binlog_expire_logs_seconds during the test."""
RUNWAY = "server:cdcwatch_mysql_binlog_runway_seconds:min"
CONNECTOR = "server:cdcwatch_debezium_binlog_file_number:last"
FAST = MixinConfig.model_validate({"durations": {"critical": "4s", "warning": "4s", "instant": "1s"},
                                   "thresholds": {"binlog_runway_critical_seconds": 28, "binlog_runway_warning_seconds": 34}})
FIRING = f'ALERTS{{alertname="CdcMysqlBinlogRunwayCritical", alertstate="firing", server="{SERVER}"}}'


def binary_logs(mariadb) -> dict[str, float]:
    """SHOW BINARY LOGS as the server answers it: file name → size."""
    rows = [line.split("\t") for line in mariadb.root_sql("SHOW BINARY LOGS").splitlines()]
    return {row[0]: float(row[1]) for row in rows}


def collected(values) -> dict[str, float]:
    """The binlogs and sizes the collector reported."""
    return {dict(labels)["file"]: v for (name, labels), v in values.items()
            if name == "cdcwatch_mysql_binlog_file_size_bytes" and dict(labels)["target"] == "maria"}


def streamed(connector: DebeziumProcess, key: tuple) -> bool:
    records = [json.loads(line) for line in connector.events_file.read_text(encoding="utf-8").splitlines() if line]
    return any(decode(r["key"], r["value"]).key == key for r in records if r["value"])


def test_binlog_runway_of_a_stopped_connector(mariadb, stack_dir, serve_factory) -> None:
    mariadb.root_sql("CREATE DATABASE IF NOT EXISTS binlogshop;"
                     "CREATE TABLE IF NOT EXISTS binlogshop.items (id INT PRIMARY KEY) ENGINE=InnoDB;"
                     "INSERT IGNORE INTO binlogshop.items VALUES (1);"
                     "INSERT IGNORE INTO binlogshop.items SELECT seq FROM binlogshop.seq_101_to_160;"
                     "ANALYZE TABLE binlogshop.items;")
    rows = int(mariadb.root_sql("SELECT count(*) FROM binlogshop.items"))
    state = stack_dir / "dbz-binlog"
    properties = mysql_connector_properties(state, mariadb.port, mariadb.user, mariadb.password, SERVER, "binlogshop")
    properties["database.server.id"] = "5402"
    connector = DebeziumProcess(state, free_port(), properties)
    prometheus = None
    mariadb.root_sql(f"SET GLOBAL binlog_expire_logs_seconds = {EXPIRE}")
    try:
        connector.start()
        serve = serve_factory(exporter_config(
            debezium=[jmx_target("binjvm", connector.jmx_port, timeout_seconds=1.5)],
            mysql=[mysql_source("maria", mariadb.port, mariadb.user, password=mariadb.password, server=SERVER,
                                timeout_seconds=1.5),
                   mysql_source("gone", free_port(), "nobody", timeout_seconds=1)]))
        rules = stack_dir / "binlog-rules.yml"
        rules.write_text(rules_yaml(FAST), encoding="utf-8")
        prometheus = PrometheusServer(stack_dir / "binlog-prometheus", {"cdcwatch": [f"127.0.0.1:{serve.port}"]}, [rules],
                                      interval="2s")
        prometheus.start()
        api = PrometheusApi(prometheus.url)

        # the connector follows a rotation onto binlog `needed` and streams a change from it
        wait_for(lambda: value(serve.scrape(), "cdcwatch_debezium_connected", target="binjvm", plugin="mysql") == 1,
                 90, f"the MySQL connector to stream (log {connector.log})")
        # the source's row estimate of the snapshotted table: after ANALYZE TABLE, InnoDB sampled every page of so
        # small a table, so it is count(*), and the rows the snapshot scanned
        values = serve.scrape()
        assert value(values, "cdcwatch_mysql_table_rows_estimate", target="maria", table="binlogshop.items",
                     database="binlogshop", server=SERVER) == rows
        assert value(values, "cdcwatch_debezium_snapshot_rows_scanned_total", target="binjvm",
                     table="binlogshop.items") == rows
        # the generated rules join the two: the connector's progress through that table, with the connector's labels
        progress = f'table:cdcwatch_debezium_snapshot_progress:ratio{{server="{SERVER}", table="binlogshop.items"}}'
        [joined] = wait_for(lambda: api.query(progress), 30, "the snapshot progress of binlogshop.items")
        assert joined["metric"]["target"] == "binjvm" and joined["metric"]["plugin"] == "mysql"
        assert float(joined["value"][1]) == 1
        [left] = api.query(f'table:cdcwatch_debezium_snapshot_rows_remaining:estimate{{server="{SERVER}"}}')
        assert (left["metric"]["table"], float(left["value"][1])) == ("binlogshop.items", 0)
        mariadb.root_sql("FLUSH BINARY LOGS")
        needed = max(binary_logs(mariadb))
        number = int(needed.rsplit(".", 1)[1])
        mariadb.root_sql("INSERT INTO binlogshop.items VALUES (2)")
        # a change streamed from it: the connector's offset is in that binlog when it stops
        wait_for(lambda: streamed(connector, (("id", 2),)), 60, "the streamed change")
        wait_for(lambda: api.query(f'{CONNECTOR}{{server="{SERVER}"}} == {number}'), 60,
                 f"Prometheus to see the connector on binlog {number}")
    finally:
        connector.stop()

    try:
        # the connector is stopped; its binlog is rotated: from now on it ages
        flushed_from = time.time()
        mariadb.root_sql("FLUSH BINARY LOGS")
        flushed = time.time()

        def same_as_the_server():
            # the server writes binlog checkpoints into the new binlog after the rotation, when it gets to them: the
            # scrape and the server's list are compared as one snapshot
            values = serve.scrape()
            logs = binary_logs(mariadb)
            return (values, logs) if collected(values) == logs else None

        values, logs = wait_for(same_as_the_server, 10, "the collected binlogs and sizes to be SHOW BINARY LOGS's")
        assert needed in logs and max(logs) != needed
        assert value(values, "cdcwatch_up", collector="mysql", target="maria") == 1
        assert value(values, "cdcwatch_up", collector="mysql", target="gone") == 0
        assert value(values, "cdcwatch_mysql_binlog_enabled", target="maria", server=SERVER) == 1
        assert value(values, "cdcwatch_mysql_binlog_expire_seconds", target="maria") == EXPIRE
        assert value(values, "cdcwatch_mysql_binlog_files", target="maria") == len(logs)
        assert value(values, "cdcwatch_mysql_binlog_write_position_bytes", target="maria") == logs[max(logs)]
        assert value(values, "cdcwatch_mysql_binlog_file_number", target="maria", file=needed) == number
        rotated = value(values, "cdcwatch_mysql_binlog_file_rotated_timestamp_seconds", target="maria", file=needed)
        assert flushed_from - 1 < rotated <= flushed, (flushed_from, rotated, flushed)  # whole seconds, rounded down
        assert value(values, "cdcwatch_mysql_binlog_file_expiry_timestamp_seconds", target="maria", file=needed) == rotated + EXPIRE
        assert value(values, "cdcwatch_mysql_binlog_file_rotated_timestamp_seconds", target="maria", file=max(logs)) is None
        promtool_check(serve.text())

        # the runway counts down to rotation + expiry on the test's clock, one second per second
        selector = f'{{server="{SERVER}"}}'

        def runway_since_the_rotation() -> list[tuple[float, float]]:
            # evaluations before the rotation may still hold the runway of the binlog before `needed`, from before
            # the connector reached `needed`
            result = api.get("/api/v1/query", query=f"{RUNWAY}{selector}[30s]")["result"]
            return [(float(at), float(left)) for at, left in (result[0]["values"] if result else ()) if float(at) > flushed]

        wait_for(lambda: len(runway_since_the_rotation()) >= 3, 30, "three evaluations of the runway after the rotation")
        points = runway_since_the_rotation()
        for at, left in points:
            assert flushed_from - 1 + EXPIRE - 0.01 <= at + left <= flushed + EXPIRE + 0.01, (at, left, flushed)
        assert all(later[1] < earlier[1] for earlier, later in zip(points, points[1:], strict=False)), points

        def retained_as_the_server_holds():
            # the bytes of the binlogs from the connector's on, as the server lists them now (a late checkpoint
            # event may still grow the newest one)
            kept = sum(size for name, size in binary_logs(mariadb).items() if name >= needed)
            [retained] = api.query(f'server:cdcwatch_mysql_binlog_retained_bytes:sum{selector}')
            return float(retained["value"][1]) == kept

        wait_for(retained_as_the_server_holds, 10, "the retained bytes to be the sizes of the binlogs from the connector's on")

        # the critical alert fires before the binlog can be removed, while the server still has it
        wait_for(lambda: api.query(FIRING), EXPIRE, "CdcMysqlBinlogRunwayCritical to fire")
        fired_at = time.time()
        assert fired_at < flushed_from + EXPIRE, (fired_at - flushed_from, EXPIRE)
        assert needed in binary_logs(mariadb)

        # the connector comes back, reads the binlog it needed and catches up: nothing it needs can expire
        connector.start()
        wait_for(lambda: not api.query(FIRING) and not api.query(f"{RUNWAY}{selector}"), 90,
                 f"the alert to resolve once the connector caught up (log {connector.log})")
        [now_reading] = api.query(f"{CONNECTOR}{selector}")
        assert float(now_reading["value"][1]) > number

        # past the expiry the server removes the binlog at its next rotation, as the runway said
        time.sleep(max(flushed + EXPIRE + 1 - time.time(), 0))
        mariadb.root_sql("FLUSH BINARY LOGS")
        logs = binary_logs(mariadb)
        assert needed not in logs
        # a scrape may still join a collection that listed the binlogs before the rotation
        wait_for(lambda: needed not in collected(serve.scrape()), 10, f"the collector to stop listing {needed}")
    finally:
        connector.stop()
        if prometheus is not None:
            prometheus.stop()
        mariadb.root_sql("SET GLOBAL binlog_expire_logs_seconds = 0")


def test_pymysql_has_the_calls_the_binlog_dump_makes() -> None:
    """cdcwatch.mysql.replication sends COM_BINLOG_DUMP through two of PyMySQL's private methods: a PyMySQL that
    renamed or changed them fails here, by name, before any binlog start time goes missing."""
    import inspect

    import pymysql

    connection = pymysql.connections.Connection
    assert list(inspect.signature(connection._execute_command).parameters) == ["self", "command", "sql"]
    assert list(inspect.signature(connection._read_packet).parameters)[:1] == ["self"]
    assert hasattr(pymysql.connections.MysqlPacket, "get_all_data")
