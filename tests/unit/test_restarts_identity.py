"""Task restarts counted across collections, the pipeline identity read from connector configurations, and
server-name conflicts: the connect collector's own logic, on a stand-in REST API and a fake JMX client. (The
real worker, restarted through REST and killed, is in tests/integration/test_connect.py.)"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from http.server import ThreadingHTTPServer
from typing import Any

import pytest

from cdcwatch.connect import ConnectCollector
from cdcwatch.connect.collector import (
    TaskRestarts,
    debezium_plugin,
    pipeline_identity,
    producer_start_times,
    server_name_conflicts,
)
from cdcwatch.exporter import Exporter, ScheduledCollector
from cdcwatch.jmx import JmxQuery, MBean, jvm_start_time_seconds, parse_object_name, pattern_matches
from cdcwatch.validation import parse_config
from tests.stand_ins import JsonHandler

JVM = 1_700_000_000_000  # the worker JVM's start, Unix ms


def test_the_first_sighting_counts_nothing_and_the_same_start_time_nothing_more() -> None:
    restarts = TaskRestarts()
    assert restarts.observe(JVM, {("inv", "0"): JVM + 500}, ["inv"]) == {("inv", "0"): {"jvm": 0, "task": 0}}
    assert restarts.observe(JVM, {("inv", "0"): JVM + 500}, ["inv"]) == {("inv", "0"): {"jvm": 0, "task": 0}}


def test_a_new_start_time_is_one_restart_with_the_reason_the_jvm_start_tells() -> None:
    restarts = TaskRestarts()
    restarts.observe(JVM, {("inv", "0"): JVM + 500, ("inv", "1"): JVM + 600}, ["inv"])
    # task 0 restarted in the same JVM; task 1 did not
    assert restarts.observe(JVM, {("inv", "0"): JVM + 9000, ("inv", "1"): JVM + 600}, ["inv"]) == {
        ("inv", "0"): {"jvm": 0, "task": 1}, ("inv", "1"): {"jvm": 0, "task": 0}}
    # the worker JVM restarted: both tasks' previous starts came before it
    later = JVM + 60_000
    counts = restarts.observe(later, {("inv", "0"): later + 900, ("inv", "1"): later + 950}, ["inv"])
    assert counts == {("inv", "0"): {"jvm": 1, "task": 1}, ("inv", "1"): {"jvm": 1, "task": 0}}


def test_a_task_absent_for_a_while_is_compared_with_its_last_start_when_it_is_back() -> None:
    restarts = TaskRestarts()
    restarts.observe(JVM, {("inv", "0"): JVM + 500}, ["inv"])
    later = JVM + 60_000
    assert restarts.observe(later, {}, ["inv"]) == {("inv", "0"): {"jvm": 0, "task": 0}}  # the worker starts again
    assert restarts.observe(later, {("inv", "0"): later + 4000}, ["inv"]) == {("inv", "0"): {"jvm": 1, "task": 0}}


def test_a_connector_rest_no_longer_lists_is_forgotten() -> None:
    restarts = TaskRestarts()
    restarts.observe(JVM, {("inv", "0"): JVM + 500, ("other", "0"): JVM + 500}, ["inv", "other"])
    assert restarts.observe(JVM, {("inv", "0"): JVM + 500}, ["inv"]) == {("inv", "0"): {"jvm": 0, "task": 0}}
    # created again under the same name: a first sighting
    assert restarts.observe(JVM, {("other", "0"): JVM + 7000}, ["inv", "other"])[("other", "0")] == {"jvm": 0, "task": 0}


@pytest.mark.parametrize("connector_class, plugin", [
    ("io.debezium.connector.postgresql.PostgresConnector", "postgres"),
    ("io.debezium.connector.mysql.MySqlConnector", "mysql"),
    ("io.debezium.connector.mariadb.MariaDbConnector", "mariadb"),
    ("io.debezium.connector.sqlserver.SqlServerConnector", "sql_server"),
    ("io.debezium.connector.oracle.OracleConnector", "oracle"),
    ("io.debezium.connector.mongodb.MongoDbConnector", "mongodb"),
    ("io.confluent.connect.jdbc.JdbcSourceConnector", ""),
    ("", ""),
])
def test_the_plugin_is_the_debezium_mbean_domain(connector_class: str, plugin: str) -> None:
    assert debezium_plugin(connector_class) == plugin


def test_pipeline_identity_from_the_connector_configuration() -> None:
    postgres = {"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "orders",
                "slot.name": "orders_slot", "database.dbname": "shop"}
    assert pipeline_identity(postgres) == {"server": "orders", "slot": "orders_slot", "database": "shop", "plugin": "postgres"}
    # Debezium's default slot; a pre-2.0 logical name
    assert pipeline_identity({"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                              "database.server.name": "legacy"})["slot"] == "debezium"
    assert pipeline_identity({"database.server.name": "legacy"})["server"] == "legacy"
    assert pipeline_identity({"connector.class": "io.debezium.connector.sqlserver.SqlServerConnector", "topic.prefix": "erp",
                              "database.names": "erp1"}) == {"server": "erp", "slot": "", "database": "erp1",
                                                             "plugin": "sql_server"}


@pytest.mark.parametrize("config, server", [
    ({"topics": "inventory.public.customers, inventory.public.orders"}, "inventory"),
    ({"topics": "inventory.public.customers,__debezium-heartbeat.inventory"}, "inventory"),  # the heartbeat aside
    ({"topics.regex": r"inventory\..*"}, "inventory"),
    ({"topics": "inventory.public.customers,shop.public.orders"}, ""),  # two servers: none
    ({"topics": "customers"}, ""),  # not named after a server
    ({"topics.regex": r"(inventory|shop)\..*"}, ""),
    ({"topic.prefix": "orders", "topics": "inventory.public.customers"}, "orders"),  # its own prefix first
])
def test_a_sink_applies_the_server_its_topics_are_named_after(config: dict[str, str], server: str) -> None:
    assert pipeline_identity({"connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector", **config})["server"] == server


def test_server_name_conflicts_count_other_debezium_connectors_only() -> None:
    identities = [{"server": "orders", "plugin": "postgres"}, {"server": "orders", "plugin": "mysql"},
                  {"server": "users", "plugin": "postgres"}, {"server": "jdbc-", "plugin": ""},
                  {"server": "jdbc-", "plugin": ""}, {"server": "", "plugin": "postgres"}]
    assert server_name_conflicts(identities) == {"orders": 1, "users": 0}


def _bean(name: str, attributes: dict[str, Any]) -> MBean:
    domain, keys = parse_object_name(name)
    return MBean(name, domain, keys, attributes)


def test_producer_start_times_from_either_app_info_bean_the_later_one_winning() -> None:
    beans = [_bean("kafka.producer:type=app-info,id=connector-producer-inv-0", {"StartTimeMs": 1000}),
             _bean("kafka.producer:type=app-info,client-id=connector-producer-inv-0", {"start-time-ms": 2000}),
             _bean('kafka.producer:type=app-info,id="connector-producer-a,b-0"', {"StartTimeMs": 3000}),
             _bean("kafka.producer:type=app-info,id=x", {"StartTimeMs": None})]
    assert producer_start_times(beans) == {"connector-producer-inv-0": 2000.0, "connector-producer-a,b-0": 3000.0}


@pytest.mark.parametrize("pattern, name, matches", [
    ("java.lang:type=Runtime", "java.lang:type=Runtime", True),
    ("java.lang:type=Runtime", "java.lang:type=Memory", False),
    ("java.lang:type=Runtime", "java.lang:type=Runtime,name=x", False),
    ("debezium.*:type=connector-metrics,*", "debezium.postgres:context=streaming,server=s,type=connector-metrics", True),
    ("debezium.*:type=connector-metrics,*", "kafka.connect:type=connector-metrics,connector=c", False),
    ("kafka.producer:type=app-info,*", "kafka.producer:id=connector-producer-inv-0,type=app-info", True),
    ("kafka.producer:type=app-info,*", "kafka.producer:client-id=p,type=producer-metrics", False),
    ("kafka.connect:*", "kafka.connect:type=connect-worker-metrics", True),
    ("kafka.connect:type=connector-task-metrics,connector=c?,*", "kafka.connect:type=connector-task-metrics,connector=c1,task=0",
     True),
])
def test_object_name_patterns(pattern: str, name: str, matches: bool) -> None:
    assert pattern_matches(pattern, name) is matches


def test_the_jvm_start_time_comes_from_the_runtime_bean_only() -> None:
    assert jvm_start_time_seconds([_bean("java.lang:type=Runtime", {"StartTime": 1_700_000_000_123})]) == 1_700_000_000.123
    assert jvm_start_time_seconds([_bean("java.lang:type=Memory", {"StartTime": 5})]) is None
    assert jvm_start_time_seconds([]) is None


# --- the collector on a stand-in REST API and a fake JMX client ----------------------------------------------

def _entry(name: str, server: str, slot: str, tasks: int = 1) -> dict[str, Any]:
    config = {"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": server,
              "slot.name": slot, "database.dbname": "shop", "name": name}
    return {"status": {"connector": {"state": "RUNNING", "worker_id": "w:8083"},
                       "tasks": [{"id": t, "state": "RUNNING", "worker_id": "w:8083"} for t in range(tasks)], "type": "source"},
            "info": {"name": name, "config": config, "tasks": [{"connector": name, "task": t} for t in range(tasks)],
                     "type": "source"}}


class _Rest(JsonHandler):
    connectors: dict[str, Any] = {}

    def do_GET(self) -> None:  # noqa: N802
        self.send_json({"version": "4.3.0", "commit": "c", "kafka_cluster_id": "k"} if self.path == "/" else self.connectors)


@pytest.fixture
def rest() -> Iterator[tuple[str, type[_Rest]]]:
    handler = type("Rest", (_Rest,), {"connectors": {}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()


class _Jmx:
    """The worker's JVM as the collector's JMX queries see it: a start time and the producers' start times."""

    def __init__(self) -> None:
        self.jvm_started = JVM
        self.producers: dict[str, int] = {}

    def query(self, pattern: str, attributes: Sequence[str]) -> list[MBean]:
        return self.query_many([(pattern, attributes)])[0]

    def query_many(self, queries: Sequence[JmxQuery]) -> list[list[MBean]]:
        beans = [_bean("java.lang:type=Runtime", {"StartTime": self.jvm_started})]
        beans += [_bean(f"kafka.producer:type=app-info,id={client}", {"StartTimeMs": started})
                  for client, started in self.producers.items()]
        return [[b for b in beans if pattern_matches(pattern, b.name)] for pattern, _ in queries]

    def close(self) -> None:
        pass


def _collector(url: str, jmx: _Jmx | None) -> ConnectCollector:
    collector = ConnectCollector(parse_config(f"connect:\n  - name: w\n    url: {url}\n").connect[0])
    collector.jmx = jmx
    return collector


def _samples(collector: ConnectCollector) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value for f in collector.collect().families for s in f.samples}


def _value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float | None:
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls]
    assert len(found) <= 1, (name, labels)
    return found[0] if found else None


def test_the_collector_counts_restarts_by_the_task_producers_start_times(rest: tuple[str, type[_Rest]]) -> None:
    url, handler = rest
    handler.connectors = {"inv": _entry("inv", "orders", "orders_slot")}
    jmx = _Jmx()
    jmx.producers = {"connector-producer-inv-0": JVM + 800, "cdcwatch-connect-statuses": JVM + 100}
    collector = _collector(url, jmx)
    samples = _samples(collector)
    assert _value(samples, "cdcwatch_connect_worker_start_time_seconds") == JVM / 1000
    assert _value(samples, "cdcwatch_connect_task_start_time_seconds", connector="inv", task="0", server="orders") == \
        (JVM + 800) / 1000
    assert _value(samples, "cdcwatch_connect_task_restarts_total", connector="inv", task="0", reason="task") == 0
    assert _value(samples, "cdcwatch_connect_task_restarts_total", connector="inv", task="0", reason="jvm") == 0

    jmx.producers["connector-producer-inv-0"] = JVM + 5000  # restarted through REST
    _samples(collector)
    del jmx.producers["connector-producer-inv-0"]  # stopped: no start time, the counts stay
    samples = _samples(collector)
    assert _value(samples, "cdcwatch_connect_task_start_time_seconds", connector="inv") is None
    assert _value(samples, "cdcwatch_connect_task_restarts_total", connector="inv", reason="task") == 1
    jmx.jvm_started = JVM + 60_000  # the worker was killed and started again
    jmx.producers["connector-producer-inv-0"] = JVM + 61_000
    samples = _samples(collector)
    assert _value(samples, "cdcwatch_connect_task_restarts_total", connector="inv", reason="task") == 1
    assert _value(samples, "cdcwatch_connect_task_restarts_total", connector="inv", reason="jvm") == 1

    # a reload builds a new collector: the counts carry on
    successor = _collector(url, jmx)
    exporter = Exporter([ScheduledCollector(collector, 5)])
    exporter.replace([ScheduledCollector(successor, 5)])
    jmx.producers["connector-producer-inv-0"] = JVM + 70_000
    samples = _samples(successor)
    assert _value(samples, "cdcwatch_connect_task_restarts_total", connector="inv", reason="task") == 2
    exporter.close()


def test_the_collector_reports_pipeline_identity_and_server_name_conflicts(rest: tuple[str, type[_Rest]]) -> None:
    url, handler = rest
    handler.connectors = {"inv": _entry("inv", "orders", "orders_slot"), "users": _entry("users", "users", "users_slot")}
    collector = _collector(url, None)
    samples = _samples(collector)
    assert _value(samples, "cdcwatch_connect_connector_pipeline_info", connector="inv", server="orders", slot="orders_slot",
                  database="shop", plugin="postgres") == 1
    assert _value(samples, "cdcwatch_connect_server_name_conflicts", server="orders") == 0
    assert _value(samples, "cdcwatch_connect_task_restarts_total") is None  # no JMX: nothing to count from
    handler.connectors["twin"] = _entry("twin", "orders", "twin_slot")
    collection = collector.collect()
    samples = {(s.name, frozenset(s.labels.items())): s.value for f in collection.families for s in f.samples}
    assert _value(samples, "cdcwatch_connect_server_name_conflicts", server="orders") == 1
    assert _value(samples, "cdcwatch_connect_server_name_conflicts", server="users") == 0
    assert collection.summary == "3 connectors, 0 failed, server name used twice: orders"
