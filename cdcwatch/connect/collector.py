"""The `connect` collector: connector and task states from a Kafka Connect worker's REST API, and the
worker's `kafka.connect` MBeans when its JMX is configured.

REST is the authority on state: a connector that failed at startup has no MBeans at all, and a
FAILED task's MBeans say nothing about why. Each connector carries the Debezium `server` label
(its `topic.prefix`), so a FAILED task and its vanished Debezium beans share a dashboard row.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import time
import urllib.request
from typing import Any

from cdcwatch.config import ConnectWorkerConfig
from cdcwatch.connect.jmx_rules import CONNECT_JMX_PATTERN, CONNECT_RULES, JMX_STATES, STATUS_RULES
from cdcwatch.families import Collection, FamilyBuilder, MetricSpec, metric_specs
from cdcwatch.jmx import JmxClient, MBean, make_client

__all__ = ["CONNECT_METRICS", "CONNECTOR_STATES", "ConnectCollector", "exception_class"]

CONNECTOR_STATES = ("RUNNING", "PAUSED", "STOPPED", "FAILED", "UNASSIGNED", "RESTARTING")

CONNECT_METRICS = metric_specs(
    # labels besides target and the worker's static labels
    MetricSpec("cdcwatch_connect_worker_info", "gauge", (
        "Always 1; the labels tell the worker's Kafka Connect build."),
        ("version", "commit", "kafka_cluster_id")),
    MetricSpec("cdcwatch_connect_connectors", "gauge", "Connectors the worker's REST API lists."),
    MetricSpec("cdcwatch_connect_connector_info", "gauge", (
        "Always 1; the labels tell the connector's class, type and worker."),
        ("connector", "server", "class", "type", "worker_id")),
    MetricSpec("cdcwatch_connect_connector_state", "gauge", (
        "Connector state as a state set (REST)."),
        ("connector", "server", "state")),
    MetricSpec("cdcwatch_connect_connector_failure_info", "gauge", (
        "1 while the connector is FAILED; `exception` is the first exception class of its trace (never the "
        "message)."),
        ("connector", "server", "exception")),
    MetricSpec("cdcwatch_connect_connector_tasks_configured", "gauge", (
        "Tasks the connector has (REST info)."),
        ("connector", "server")),
    MetricSpec("cdcwatch_connect_connector_tasks_running", "gauge", "Of those, tasks in state RUNNING.", ("connector", "server")),
    MetricSpec("cdcwatch_connect_task_state", "gauge", (
        "Task state as a state set (REST)."),
        ("connector", "server", "task", "state")),
    MetricSpec("cdcwatch_connect_task_failure_info", "gauge", (
        "1 while the task is FAILED; `exception` is the first exception class of its trace."),
        ("connector", "server", "task", "exception")),
)

_EXCEPTION_CLASS = re.compile(r"([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+)")


def exception_class(trace: str | None) -> str:
    """The first exception class named in a Java stack trace: a bounded label value, never free text."""
    match = _EXCEPTION_CLASS.match((trace or "").strip())
    return match.group(1)[:200] if match else "unknown"


class ConnectCollector:
    """Collects one Connect worker; raises on failure (the exporter turns that into up=0)."""

    kind = "connect"

    def __init__(self, worker: ConnectWorkerConfig) -> None:
        self.worker = worker
        self.target = worker.name
        self.jmx: JmxClient | None = make_client(worker.jmx, worker.timeout_seconds) if worker.jmx else None
        self._context = ssl.create_default_context(cafile=worker.ca_file) if worker.url.startswith("https") else None
        self._headers = {"Accept": "application/json"}
        if worker.username and worker.password:
            token = base64.b64encode(f"{worker.username}:{worker.password.get_secret_value()}".encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"

    def _get(self, path: str, deadline: float) -> Any:
        left = deadline - time.monotonic()
        if left <= 0.05:
            raise TimeoutError("the Connect collection deadline passed")
        request = urllib.request.Request(self.worker.url + path, headers=self._headers)
        with urllib.request.urlopen(request, timeout=left, context=self._context) as response:
            return json.loads(response.read())

    def collect(self) -> Collection:
        deadline = time.monotonic() + self.worker.timeout_seconds * 0.9
        root = self._get("/", deadline)
        connectors = self._get("/connectors?expand=status&expand=info", deadline)
        builder = FamilyBuilder()
        self._add(builder, "cdcwatch_connect_worker_info", 1, version=str(root.get("version", "")),
                  commit=str(root.get("commit", "")), kafka_cluster_id=str(root.get("kafka_cluster_id", "")))
        self._add(builder, "cdcwatch_connect_connectors", len(connectors))
        servers: dict[str, str] = {}
        failed = 0
        for name, entry in sorted(connectors.items()):
            servers[name] = server = _server(entry.get("info") or {})
            failed += self._connector(builder, name, server, entry)
        if self.jmx is not None:
            self._jmx_families(builder, servers)
        return Collection(builder.families(), f"{len(connectors)} connectors, {failed} failed")

    def _connector(self, builder: FamilyBuilder, name: str, server: str, entry: dict[str, Any]) -> int:
        status, info = entry.get("status") or {}, entry.get("info") or {}
        connector = status.get("connector") or {}
        state = str(connector.get("state", "UNASSIGNED"))
        where = {"connector": name, "server": server}
        self._add(builder, "cdcwatch_connect_connector_info", 1, **where,
                  **{"class": str((info.get("config") or {}).get("connector.class", "")),
                     "type": str(info.get("type") or status.get("type") or ""),
                     "worker_id": str(connector.get("worker_id", ""))})
        for candidate in CONNECTOR_STATES:
            self._add(builder, "cdcwatch_connect_connector_state", float(candidate == state), state=candidate, **where)
        if state == "FAILED":
            self._add(builder, "cdcwatch_connect_connector_failure_info", 1,
                      exception=exception_class(connector.get("trace")), **where)
        tasks = status.get("tasks") or []
        self._add(builder, "cdcwatch_connect_connector_tasks_configured", len(info.get("tasks") or tasks), **where)
        self._add(builder, "cdcwatch_connect_connector_tasks_running", sum(t.get("state") == "RUNNING" for t in tasks), **where)
        failed = int(state == "FAILED")
        for task in tasks:
            task_state, task_id = str(task.get("state", "UNASSIGNED")), str(task.get("id", ""))
            for candidate in CONNECTOR_STATES:
                self._add(builder, "cdcwatch_connect_task_state", float(candidate == task_state), task=task_id,
                          state=candidate, **where)
            if task_state == "FAILED":
                failed += 1
                self._add(builder, "cdcwatch_connect_task_failure_info", 1, task=task_id,
                          exception=exception_class(task.get("trace")), **where)
        return failed

    def _jmx_families(self, builder: FamilyBuilder, servers: dict[str, str]) -> None:
        assert self.jmx is not None
        attributes = sorted({rule.attribute for rule in CONNECT_RULES} | {"status"})
        for bean in self.jmx.query(CONNECT_JMX_PATTERN, attributes):
            self._bean(builder, bean, servers)

    def _bean(self, builder: FamilyBuilder, bean: MBean, servers: dict[str, str]) -> None:
        kind = bean.keys.get("type", "")
        labels: dict[str, str] = {}
        if "connector" in bean.keys:
            labels = {"connector": bean.keys["connector"], "server": servers.get(bean.keys["connector"], "")}
            kind += "+connector" if kind == "connect-worker-metrics" else ""
        if "task" in bean.keys:
            labels["task"] = bean.keys["task"]
        for rule in CONNECT_RULES:
            measured = bean.attributes.get(rule.attribute)
            if rule.bean_type == kind and isinstance(measured, (int, float)) and not isinstance(measured, bool):
                builder.add(rule.metric, rule.type, rule.help,
                            {"target": self.target, **self.worker.labels, **labels, **dict(rule.labels)},
                            float(measured) * rule.scale)
        status_metric = STATUS_RULES.get(kind)
        status = bean.attributes.get("status")
        if status_metric and isinstance(status, str):
            for state in JMX_STATES:
                builder.add(status_metric, "gauge", "Status the worker's MBean reports, as a state set.",
                            {"target": self.target, **self.worker.labels, **labels, "state": state},
                            float(status.lower() == state))

    def _add(self, builder: FamilyBuilder, metric: str, value: float, **labels: str) -> None:
        builder.add_spec(CONNECT_METRICS[metric], value, {"target": self.target, **self.worker.labels}, **labels)

    def close(self) -> None:
        if self.jmx is not None:
            self.jmx.close()


def _server(info: dict[str, Any]) -> str:
    """The Debezium logical name of a connector: `topic.prefix` (`database.server.name` before Debezium 2)."""
    config = info.get("config") or {}
    return str(config.get("topic.prefix") or config.get("database.server.name") or "")
