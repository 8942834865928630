"""The `connect` collector: connector and task states from a Kafka Connect worker's REST API, and the
worker's `kafka.connect` MBeans when its JMX is configured.

REST is the authority on state: a connector that failed at startup has no MBeans at all, and a
FAILED task's MBeans say nothing about why. Each connector carries the Debezium `server` label
(its `topic.prefix`), so a FAILED task and its vanished Debezium beans share a dashboard row, and
its configuration names the rest of its pipeline's identity: the replication slot and the database.

Restarts: a task restart is over within a second and REST reports RUNNING before and after it, so
REST cannot see it. Each task's producer (`connector-producer-<connector>-<task>`) is created when the
task starts, and its `app-info` bean tells when: a new start time is a restart, counted here across
collections (`TaskRestarts`), with the reason `jvm` when the task's previous start was before the
worker JVM's own start time, else `task`.

Malformed answers: a REST answer is read within the collection's deadline and up to MAX_BODY_BYTES; an answer
that is no JSON, an error page, a redirect (never followed: it would carry the credentials elsewhere) or a
document of the wrong shape fails the collection (up 0) with a one-line ConnectRestError. Inside a
well-formed list of connectors, parts of the wrong type are left out and counted
(`cdcwatch_connect_rest_malformed_total{part}`); the rest is reported.
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cdcwatch.collection import Collection
from cdcwatch.config import ConnectWorkerConfig
from cdcwatch.connect.jmx_rules import CONNECT_JMX_METRICS, CONNECT_JMX_QUERIES, CONNECT_RULES, JMX_STATES, STATUS_RULES
from cdcwatch.failures import describe, exception_class
from cdcwatch.families import FamilyBuilder
from cdcwatch.jmx import RUNTIME_BEAN, JmxClient, MBean, jmx_address, jvm_start_time_seconds, make_client
from cdcwatch.specs import MetricSpec, metric_specs

__all__ = ["CONNECTORS_PATH", "CONNECT_JMX_METRICS", "CONNECT_METRICS", "CONNECTOR_STATES", "MALFORMED_PARTS",
           "MAX_BODY_BYTES", "PRODUCER_APP_INFO_QUERIES", "RESTART_REASONS", "ConnectCollector", "ConnectRestError",
           "TaskRestarts", "debezium_plugin", "exception_class", "pipeline_identity", "server_name_conflicts",
           "task_producer"]

CONNECTOR_STATES = ("RUNNING", "PAUSED", "STOPPED", "FAILED", "UNASSIGNED", "RESTARTING")

CONNECTORS_PATH = "/connectors?expand=status&expand=info"

# labels besides target and the worker's static labels
CONNECT_WORKER_INFO = MetricSpec("cdcwatch_connect_worker_info", "gauge", (
    "Always 1; the labels tell the worker's Kafka Connect build."),
    ("version", "commit", "kafka_cluster_id"))
CONNECT_CONNECTORS = MetricSpec("cdcwatch_connect_connectors", "gauge", "Connectors the worker's REST API lists.")
CONNECT_CONNECTOR_INFO = MetricSpec("cdcwatch_connect_connector_info", "gauge", (
    "Always 1; the labels tell the connector's class, type and worker."),
    ("connector", "server", "class", "type", "worker_id"))
CONNECT_CONNECTOR_STATE = MetricSpec("cdcwatch_connect_connector_state", "gauge", (
    "Connector state as a state set (REST); `type` source or sink."),
    ("connector", "server", "type", "state"))
CONNECT_CONNECTOR_FAILURE_INFO = MetricSpec("cdcwatch_connect_connector_failure_info", "gauge", (
    "1 while the connector is FAILED; `exception` is the first exception class of its trace (never the "
    "message)."),
    ("connector", "server", "type", "exception"))
CONNECT_CONNECTOR_TASKS_CONFIGURED = MetricSpec("cdcwatch_connect_connector_tasks_configured", "gauge", (
    "Tasks the connector has (REST info)."),
    ("connector", "server"))
CONNECT_CONNECTOR_TASKS_RUNNING = MetricSpec(
    "cdcwatch_connect_connector_tasks_running", "gauge", "Of those, tasks in state RUNNING.", ("connector", "server"))
CONNECT_TASK_STATE = MetricSpec("cdcwatch_connect_task_state", "gauge", (
    "Task state as a state set (REST)."),
    ("connector", "server", "type", "task", "state"))
CONNECT_TASK_FAILURE_INFO = MetricSpec("cdcwatch_connect_task_failure_info", "gauge", (
    "1 while the task is FAILED; `exception` is the first exception class of its trace."),
    ("connector", "server", "type", "task", "exception"))
CONNECT_CONNECTOR_PIPELINE_INFO = MetricSpec("cdcwatch_connect_connector_pipeline_info", "gauge", (
    "Always 1; one pipeline's identity across stages, from the connector's configuration: `server` "
    "(topic.prefix, the label of its Debezium, Kafka and Spark series), the PostgreSQL `slot` (slot.name), "
    "the `database` (database.dbname or database.names) and the Debezium `plugin` (as in the Debezium "
    "series)."),
    ("connector", "server", "slot", "database", "plugin"))
CONNECT_SERVER_NAME_CONFLICTS = MetricSpec("cdcwatch_connect_server_name_conflicts", "gauge", (
    "Other Debezium connectors of the cluster that use the same server name (topic.prefix); 0 is right: "
    "more means their topics and their Debezium MBeans collide."),
    ("server",))
CONNECT_WORKER_START_TIME_SECONDS = MetricSpec("cdcwatch_connect_worker_start_time_seconds", "gauge", (
    "When the worker's JVM started (Unix time)."),
    source="JMX `java.lang:type=Runtime` `StartTime`")
CONNECT_TASK_START_TIME_SECONDS = MetricSpec("cdcwatch_connect_task_start_time_seconds", "gauge", (
    "When the task last started on this worker (Unix time): when its producer was created."),
    ("connector", "server", "task"),
    source="JMX `kafka.producer` `app-info` `StartTimeMs` of `connector-producer-<connector>-<task>`")
CONNECT_TASK_RESTARTS_TOTAL = MetricSpec("cdcwatch_connect_task_restarts_total", "counter", (
    "Task restarts on this worker that cdcwatch saw (its start time changed between two collections) "
    "since cdcwatch started: `reason` jvm (the worker JVM restarted) or task (the task alone: a REST "
    "restart, a reconfiguration, a rebalance)."),
    ("connector", "server", "task", "reason"),
    source="JMX (task and JVM start times)")
CONNECT_REST_MALFORMED_TOTAL = MetricSpec("cdcwatch_connect_rest_malformed_total", "counter", (
    "Parts of the worker's REST answers left out as malformed since cdcwatch started: `part` connector (an "
    "entry that is no object), status or info (no object), task (no object, or no id), state (no string, or "
    "a state Kafka Connect does not define: its state set reads 0 everywhere)."),
    ("part",))
CONNECT_METRICS = metric_specs(
    CONNECT_WORKER_INFO,
    CONNECT_CONNECTORS,
    CONNECT_CONNECTOR_INFO,
    CONNECT_CONNECTOR_STATE,
    CONNECT_CONNECTOR_FAILURE_INFO,
    CONNECT_CONNECTOR_TASKS_CONFIGURED,
    CONNECT_CONNECTOR_TASKS_RUNNING,
    CONNECT_TASK_STATE,
    CONNECT_TASK_FAILURE_INFO,
    CONNECT_CONNECTOR_PIPELINE_INFO,
    CONNECT_SERVER_NAME_CONFLICTS,
    CONNECT_WORKER_START_TIME_SECONDS,
    CONNECT_TASK_START_TIME_SECONDS,
    CONNECT_TASK_RESTARTS_TOTAL,
    CONNECT_REST_MALFORMED_TOTAL,
)

MALFORMED_PARTS = ("connector", "status", "info", "task", "state")

MAX_BODY_BYTES = 32 * 1024 * 1024
"""The largest REST answer read; a longer one fails the collection (a sane worker's list of connectors with
their configurations is a few megabytes even for a thousand connectors)."""


class ConnectRestError(Exception):
    """The REST API's answer could not be used; the message is one line, safe to log."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Redirects are not followed: urllib would send the Authorization header to wherever they point."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> urllib.request.Request | None:
        return None

RESTART_REASONS = ("jvm", "task")

PRODUCER_APP_INFO_QUERIES = (("kafka.producer:type=app-info,id=*", ("StartTimeMs",)),
                             ("kafka.producer:type=app-info,client-id=*", ("start-time-ms",)))
"""Every producer's `app-info` beans: `id=<client id>` (`StartTimeMs`) and, from the metrics reporter,
`client-id=<client id>` (`start-time-ms`); each asked only for its own attribute (the metrics reporter logs a
warning with a stack trace for every attribute a bean lacks)."""

_DEBEZIUM_CLASS = re.compile(r"io\.debezium\.connector\.(\w+)\.")
_PLUGIN_DOMAINS = {"postgresql": "postgres", "sqlserver": "sql_server"}
"""Debezium connector packages whose MBean domain (`debezium.<plugin>`) is spelled otherwise."""

def debezium_plugin(connector_class: str) -> str:
    """The `plugin` label the connector's Debezium series carry (its MBean domain `debezium.<plugin>`); empty for
    a connector that is not Debezium's."""
    match = _DEBEZIUM_CLASS.match(connector_class)
    return _PLUGIN_DOMAINS.get(match.group(1), match.group(1)) if match else ""


def pipeline_identity(config: Mapping[str, Any]) -> dict[str, str]:
    """server, slot, database and plugin of a connector, from its configuration (Debezium's defaults applied:
    a PostgreSQL connector without `slot.name` uses the slot `debezium`). A sink's server is the one its topics
    are named after (`sink_server`)."""
    plugin = debezium_plugin(str(config.get("connector.class") or ""))
    slot = config.get("slot.name") or ("debezium" if plugin == "postgres" else "")
    database = config.get("database.dbname") or config.get("database.names") or ""
    return {"server": _server(config) or sink_server(config), "slot": str(slot), "database": str(database),
            "plugin": plugin}


_REGEX_PREFIX = re.compile(r"([A-Za-z0-9_-]+)\\\.")
"""A topics.regex that starts with a literal server name and an escaped dot: `inventory\\..*`."""


def sink_server(config: Mapping[str, Any]) -> str:
    """The server a sink connector applies: the one prefix (up to the first dot) of every topic it reads, from
    `topics` or the literal start of `topics.regex`, Kafka's internal and Debezium's heartbeat topics aside; empty
    when its topics name no one server."""
    topics = [t.strip() for t in str(config.get("topics") or "").split(",") if t.strip() and not t.strip().startswith("_")]
    prefixes = {t.split(".", 1)[0] for t in topics if "." in t}
    if topics and len(prefixes) == 1 and all("." in t for t in topics):
        return prefixes.pop()
    match = _REGEX_PREFIX.match(str(config.get("topics.regex") or ""))
    return match.group(1) if match and not topics else ""


def server_name_conflicts(identities: Iterable[Mapping[str, str]]) -> dict[str, int]:
    """Per server name of the Debezium connectors: how many other connectors use it too."""
    used = Counter(i["server"] for i in identities if i["plugin"] and i["server"])
    return {server: count - 1 for server, count in sorted(used.items())}


def task_producer(connector: str, task: str) -> str:
    """The client id Kafka Connect gives a source task's producer (unless `producer.override.client.id` is set)."""
    return f"connector-producer-{connector}-{task}"


def producer_start_times(beans: Sequence[MBean]) -> dict[str, float]:
    """Client id → start time (Unix ms) of the producers' `app-info` beans; the later one when a closing
    producer's bean is still registered beside its successor's."""
    starts: dict[str, float] = {}
    for bean in beans:
        client = bean.keys.get("id") or bean.keys.get("client-id")
        started = bean.attributes.get("StartTimeMs", bean.attributes.get("start-time-ms"))
        if client and isinstance(started, (int, float)) and not isinstance(started, bool) and started > 0:
            starts[client] = max(float(started), starts.get(client, 0.0))
    return starts


class TaskRestarts:
    """Task restarts counted across collections, from each task's start time on the worker.

    A task whose start time differs from the one seen at the previous collection restarted once (two
    restarts between collections count as one): reason `jvm` when its previous start came before the worker
    JVM's start, else `task`. The first sighting of a task counts nothing. A connector that REST no longer
    lists is forgotten. Shared by the collectors of one worker across configuration reloads (thread-safe).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started: dict[tuple[str, str], float] = {}
        self._counts: dict[tuple[str, str], dict[str, int]] = {}

    def observe(self, jvm_started_ms: float | None, starts: Mapping[tuple[str, str], float],
                connectors: Iterable[str]) -> dict[tuple[str, str], dict[str, int]]:
        """Count the restarts `starts` ((connector, task) → start time, Unix ms) show; the counts of every task
        seen so far of the `connectors` REST lists."""
        listed = set(connectors)
        with self._lock:
            for key in [k for k in self._started if k[0] not in listed]:
                del self._started[key], self._counts[key]
            for key, started in starts.items():
                previous = self._started.get(key)
                self._started[key] = started
                counts = self._counts.setdefault(key, dict.fromkeys(RESTART_REASONS, 0))
                if previous is not None and started != previous:
                    counts["jvm" if jvm_started_ms is not None and previous < jvm_started_ms else "task"] += 1
            return {key: dict(counts) for key, counts in self._counts.items()}


class ConnectCollector:
    """Collects one Connect worker; raises on failure (the exporter turns that into up=0)."""

    kind = "connect"

    def __init__(self, worker: ConnectWorkerConfig) -> None:
        self.worker = worker
        self.target = worker.name
        self.address = worker.url
        self.common = {"target": self.target, **worker.labels}
        """The labels of every series of the worker."""
        self.jmx: JmxClient | None = make_client(worker.jmx, worker.timeout_seconds) if worker.jmx else None
        self.restarts = TaskRestarts()
        self._context = ssl.create_default_context(cafile=worker.ca_file) if worker.url.startswith("https") else None
        self._opener = urllib.request.build_opener(_NoRedirects(), urllib.request.HTTPSHandler(context=self._context))
        self.malformed = dict.fromkeys(MALFORMED_PARTS, 0)
        self._headers = {"Accept": "application/json"}
        if worker.username and worker.password:
            token = base64.b64encode(f"{worker.username}:{worker.password.get_secret_value()}".encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"

    def _get(self, path: str, deadline: float) -> Any:
        left = deadline - time.monotonic()
        if left <= 0.05:
            raise TimeoutError("the Connect collection deadline passed")
        request = urllib.request.Request(self.worker.url + path, headers=self._headers)
        try:
            with self._opener.open(request, timeout=left) as response:
                body = _read_bounded(response, deadline)
                content_type = response.headers.get_content_type()
        except urllib.error.HTTPError as exc:
            exc.close()
            moved = " (redirects are not followed)" if 300 <= exc.code < 400 else ""
            raise ConnectRestError(f"GET {path}: HTTP {exc.code} {exc.reason}{moved}") from None
        except http.client.HTTPException as exc:  # a truncated body, a broken status line or header
            raise ConnectRestError(f"GET {path}: malformed HTTP answer: {type(exc).__name__}") from None
        try:
            return json.loads(body)
        except ValueError:  # JSONDecodeError, UnicodeDecodeError
            raise ConnectRestError(f"GET {path}: the answer is no JSON ({content_type}, {len(body)} bytes)") from None

    def inherit(self, previous: object) -> None:
        """Carry on the restart and malformed-part counts of the collector this one replaces (a configuration
        reload): counters never reset while cdcwatch runs; and take over its JMX client with its connection and
        bean listings (the replaced collector closes this one's unused client instead)."""
        if isinstance(previous, ConnectCollector):
            self.restarts = previous.restarts
            self.malformed = previous.malformed
            self.jmx, previous.jmx = previous.jmx, self.jmx

    def collect(self) -> Collection:
        deadline = time.monotonic() + self.worker.timeout_seconds * 0.9
        root = self._get("/", deadline)
        if not isinstance(root, dict):
            raise ConnectRestError(f"GET /: expected a JSON object, got {_json_type(root)}")
        listing = self._get(CONNECTORS_PATH, deadline)
        if not isinstance(listing, dict):
            raise ConnectRestError(f"GET {CONNECTORS_PATH}: expected a JSON object of connectors, got {_json_type(listing)}")
        connectors: dict[str, dict[str, Any]] = {}
        for name, raw in listing.items():
            entry = self._wellformed(raw)
            if entry is not None:
                connectors[name] = entry
        builder = FamilyBuilder()
        builder.add_spec(CONNECT_WORKER_INFO, 1, self.common, version=_text(root.get("version")), commit=_text(root.get("commit")),
                         kafka_cluster_id=_text(root.get("kafka_cluster_id")))
        builder.add_spec(CONNECT_CONNECTORS, len(connectors), self.common)
        identities = {name: pipeline_identity((entry.get("info") or {}).get("config") or {})
                      for name, entry in connectors.items()}
        servers = {name: identity["server"] for name, identity in identities.items()}
        failed = 0
        for name, entry in sorted(connectors.items()):
            failed += self._connector(builder, name, identities[name], entry)
        conflicts = server_name_conflicts(identity for name, identity in identities.items()  # sources: a sink shares
                                          if _server((connectors[name].get("info") or {}).get("config") or {}))
        for server, others in conflicts.items():
            builder.add_spec(CONNECT_SERVER_NAME_CONFLICTS, others, self.common, server=server)
        for part in MALFORMED_PARTS:
            builder.add_spec(CONNECT_REST_MALFORMED_TOTAL, self.malformed[part], self.common, part=part)
        if self.jmx is not None:
            try:
                self._jmx_families(builder, servers, connectors)
            except Exception as exc:  # the error names the JMX endpoint, not the REST API that answered
                jmx = jmx_address(self.worker.jmx) if self.worker.jmx else "JMX"
                raise describe(exc, jmx, "the Connect worker's JMX agent") from exc
        clashing = sorted(server for server, others in conflicts.items() if others)
        summary = f"{len(connectors)} connectors, {failed} failed"
        return Collection(builder.families(), summary + (f", server name used twice: {', '.join(clashing)}"
                                                         if clashing else ""))

    def _wellformed(self, entry: Any) -> dict[str, Any] | None:
        """The connector entry with its parts of the wrong type left out (and counted); None if it is no object."""
        if not isinstance(entry, dict):
            self.malformed["connector"] += 1
            return None
        status, info = self._object(entry.get("status"), "status"), self._object(entry.get("info"), "info")
        connector = self._object(status.get("connector"), "status")
        state = connector.get("state")
        if state is not None and (not isinstance(state, str) or state not in CONNECTOR_STATES):
            self.malformed["state"] += 1
        tasks = [task for task in self._list(status.get("tasks"), "status") if self._task(task, "id")]
        for task in tasks:
            if task.get("state") is not None and (not isinstance(task["state"], str) or task["state"] not in CONNECTOR_STATES):
                self.malformed["state"] += 1
        configured = [task for task in self._list(info.get("tasks"), "info") if self._task(task, "task")]
        return {"status": {**status, "connector": connector, "tasks": tasks},
                "info": {**info, "config": self._object(info.get("config"), "info"), "tasks": configured}}

    def _object(self, value: Any, part: str) -> dict[str, Any]:
        if value is not None and not isinstance(value, dict):
            self.malformed[part] += 1
        return value if isinstance(value, dict) else {}

    def _list(self, value: Any, part: str) -> list[Any]:
        if value is not None and not isinstance(value, list):
            self.malformed[part] += 1
        return value if isinstance(value, list) else []

    def _task(self, task: Any, key: str) -> bool:
        wellformed = isinstance(task, dict) and _is_id(task.get(key))
        if not wellformed:
            self.malformed["task"] += 1
        return wellformed

    def _connector(self, builder: FamilyBuilder, name: str, identity: dict[str, str], entry: dict[str, Any]) -> int:
        status, info = entry.get("status") or {}, entry.get("info") or {}
        connector = status.get("connector") or {}
        state = _text(connector.get("state"), "UNASSIGNED")
        where = {"connector": name, "server": identity["server"]}
        typed = {**where, "type": _text(info.get("type") or status.get("type"))}
        builder.add_spec(CONNECT_CONNECTOR_PIPELINE_INFO, 1, self.common, connector=name, **identity)
        builder.add_spec(CONNECT_CONNECTOR_INFO, 1, self.common, **typed,
                         **{"class": _text((info.get("config") or {}).get("connector.class")),
                            "worker_id": _text(connector.get("worker_id"))})
        for candidate in CONNECTOR_STATES:
            builder.add_spec(CONNECT_CONNECTOR_STATE, float(candidate == state), self.common, state=candidate, **typed)
        if state == "FAILED":
            builder.add_spec(CONNECT_CONNECTOR_FAILURE_INFO, 1, self.common, exception=exception_class(_text(connector.get("trace"))),
                             **typed)
        tasks = status.get("tasks") or []
        builder.add_spec(CONNECT_CONNECTOR_TASKS_CONFIGURED, len(info.get("tasks") or tasks), self.common, **where)
        builder.add_spec(CONNECT_CONNECTOR_TASKS_RUNNING, sum(t.get("state") == "RUNNING" for t in tasks), self.common, **where)
        failed = int(state == "FAILED")
        for task in tasks:
            task_state, task_id = _text(task.get("state"), "UNASSIGNED"), str(task["id"])
            for candidate in CONNECTOR_STATES:
                builder.add_spec(CONNECT_TASK_STATE, float(candidate == task_state), self.common, task=task_id, state=candidate, **typed)
            if task_state == "FAILED":
                failed += 1
                builder.add_spec(CONNECT_TASK_FAILURE_INFO, 1, self.common, task=task_id,
                                 exception=exception_class(_text(task.get("trace"))), **typed)
        return failed

    def _jmx_families(self, builder: FamilyBuilder, servers: dict[str, str], connectors: dict[str, Any]) -> None:
        assert self.jmx is not None
        *by_type, by_id, by_client_id, runtime = self.jmx.query_many([
            *CONNECT_JMX_QUERIES, *PRODUCER_APP_INFO_QUERIES, (RUNTIME_BEAN, ("StartTime",))])
        producers = by_id + by_client_id
        for bean in sorted((bean for beans in by_type for bean in beans), key=lambda b: b.name):
            self._bean(builder, bean, servers)
        jvm_started = jvm_start_time_seconds(runtime)
        if jvm_started is not None:
            builder.add_spec(CONNECT_WORKER_START_TIME_SECONDS, jvm_started, self.common)
        self._restarts(builder, servers, connectors, producer_start_times(producers), jvm_started)

    def _restarts(self, builder: FamilyBuilder, servers: dict[str, str], connectors: dict[str, Any],
                  producers: dict[str, float], jvm_started: float | None) -> None:
        """Each listed task's start time on this worker and its restart counts."""
        tasks = {(name, task): task_producer(name, task) for name, entry in connectors.items()
                 for task in _task_ids(entry)}
        starts = {key: producers[client] for key, client in tasks.items() if client in producers}
        counts = self.restarts.observe(None if jvm_started is None else jvm_started * 1000, starts, connectors)
        for (name, task), started in sorted(starts.items()):
            builder.add_spec(CONNECT_TASK_START_TIME_SECONDS, started / 1000, self.common, connector=name, server=servers[name], task=task)
        for (name, task), by_reason in sorted(counts.items()):
            if (name, task) in tasks:
                for reason in RESTART_REASONS:
                    builder.add_spec(CONNECT_TASK_RESTARTS_TOTAL, by_reason[reason], self.common, connector=name, server=servers[name],
                                     task=task, reason=reason)

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
                builder.add_spec(rule.spec, float(measured) * rule.scale, self.common, **{**labels, **dict(rule.labels)})
        status_spec = STATUS_RULES.get(kind)
        status = bean.attributes.get("status")
        if status_spec and isinstance(status, str):
            for state in JMX_STATES:
                builder.add_spec(status_spec, float(status.lower() == state), self.common, **labels, state=state)

    def close(self) -> None:
        if self.jmx is not None:
            self.jmx.close()


def _read_bounded(response: Any, deadline: float) -> bytes:
    """The body, read in pieces until the deadline (each wait for data ends at the socket timeout, the time left
    when the request started) and up to MAX_BODY_BYTES."""
    declared = response.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise ConnectRestError(f"the answer is too large ({declared} bytes, at most {MAX_BODY_BYTES} are read)")
    pieces: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the answer took longer than the deadline ({size} bytes read)")
        piece = response.read1(65536)
        if not piece:
            if response.length:  # the connection ended before the Content-Length announced
                raise http.client.IncompleteRead(b"".join(pieces), response.length)
            return b"".join(pieces)
        size += len(piece)
        if size > MAX_BODY_BYTES:
            raise ConnectRestError(f"the answer is too large (more than {MAX_BODY_BYTES} bytes)")
        pieces.append(piece)


def _json_type(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _text(value: Any, default: str = "") -> str:
    """A label value from a REST field: a string as it is, anything else the default."""
    return value if isinstance(value, str) else default


def _is_id(value: Any) -> bool:
    """A task id: a number (Connect's) or a string, never a boolean or a structure."""
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def _server(config: Mapping[str, Any]) -> str:
    """The Debezium logical name of a connector: `topic.prefix` (`database.server.name` before Debezium 2)."""
    return str(config.get("topic.prefix") or config.get("database.server.name") or "")


def _task_ids(entry: dict[str, Any]) -> list[str]:
    """The connector's task ids, from its status and its task configurations (either may lag the other)."""
    status, info = entry.get("status") or {}, entry.get("info") or {}
    ids = {str(t.get("id")) for t in status.get("tasks") or [] if t.get("id") is not None}
    ids |= {str(t.get("task")) for t in info.get("tasks") or [] if t.get("task") is not None}
    return sorted(ids, key=lambda i: (len(i), i))
