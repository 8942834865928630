"""The connect collector on a real Kafka Connect worker (Apache Kafka 4 connect-runtime, distributed
mode on the real broker) running the released Debezium PostgreSQL plugin from `plugin.path`, its REST
API served over TLS behind Kafka's basic-auth extension.

A connector's life: RUNNING → PAUSED → RUNNING, a dropped replication slot → task FAILED while running,
a slot held by another client → task FAILED at start-up, and a connector whose plugin is missing when
the worker starts → FAILED in REST although it has no MBeans at all. The worker's JMX and the Debezium
beans share the `server` label. Task restarts through REST and a worker killed with SIGKILL and started
again are counted exactly, with start times checked against the test's clock and /proc; each connector's
identity (server, slot, database, plugin) is the configuration the test registered, and a second
connector with the same topic.prefix is reported as a conflict.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from devstack.configs import connect_worker, exporter_config, jmx_target
from devstack.connect import ConnectWorker
from devstack.debezium import postgres_connector_properties
from devstack.procs import stop_group, wait_for
from devstack.tls import make_pki
from tests.integration.conftest import process_start_time, promtool_check, value

pytestmark = pytest.mark.integration

SERVER = "connsrv"
SLOT = "connect_slot"
USER, PASSWORD = "monitor", "connect-secret-7"


@pytest.fixture(scope="module")
def pki(stack_dir):
    return make_pki(stack_dir / "connect-tls", ("connect",))


@pytest.fixture(scope="module")
def worker(postgres, kafka, stack_dir, pki):
    postgres.sql("DROP TABLE IF EXISTS connect_items; CREATE TABLE connect_items (id int PRIMARY KEY, v text);"
                 "INSERT INTO connect_items VALUES (1, 'a')")
    process = ConnectWorker(stack_dir / "connect", kafka.bootstrap, tls=pki, users={USER: PASSWORD})
    process.start()
    process.put("/connectors/inventory/config", {**connector(postgres, stack_dir, SLOT, "public.connect_items"),
                                                 "retriable.restart.connector.wait.ms": "1000"})
    yield process
    process.stop()


def connector(postgres, stack_dir, slot: str, tables: str, server: str = SERVER) -> dict[str, str]:
    properties = postgres_connector_properties(stack_dir, postgres.port, server, tables, slot=slot)
    for engine_only in ("name", "offset.storage", "offset.storage.file.filename", "offset.flush.interval.ms"):
        properties.pop(engine_only)
    return {**properties, "tasks.max": "1"}


def connect_config(worker, pki, password: str = PASSWORD, ca: str | None = None) -> str:
    return exporter_config(
        connect=[connect_worker("worker", worker.url, jmx_port=worker.jmx_port, timeout_seconds=5, username=USER,
                                password=password, ca_file=ca or str(pki.ca))],
        debezium=[jmx_target("worker-jvm", worker.jmx_port)])


def state(values, metric: str, **labels: str) -> str | None:
    states = [s for s in ("RUNNING", "PAUSED", "STOPPED", "FAILED", "UNASSIGNED", "RESTARTING")
              if value(values, metric, state=s, **labels) == 1]
    return states[0] if len(states) == 1 else None


def first_exception_class(trace: str) -> str:
    """The class on the first line of a Java trace, read by the test itself from Connect's REST answer."""
    return trace.splitlines()[0].split(":")[0].strip()


def test_states_from_rest_over_tls_and_jmx_through_a_connector_life(worker, pki, postgres, serve_factory) -> None:
    serve = serve_factory(connect_config(worker, pki))

    def task_state() -> str | None:
        return state(serve.scrape(), "cdcwatch_connect_task_state", connector="inventory", task="0", server=SERVER)

    wait_for(lambda: task_state() == "RUNNING", 90, "the task to run")
    wait_for(lambda: value(serve.scrape(), "cdcwatch_debezium_connected", server=SERVER) == 1, 60, "Debezium streaming")
    values = serve.scrape()
    assert value(values, "cdcwatch_up", collector="connect", target="worker") == 1
    assert state(values, "cdcwatch_connect_connector_state", connector="inventory", server=SERVER) == "RUNNING"
    assert value(values, "cdcwatch_connect_connector_info", connector="inventory", type="source",
                 **{"class": "io.debezium.connector.postgresql.PostgresConnector"}) == 1
    assert value(values, "cdcwatch_connect_worker_info", version=worker.get("/")["version"]) == 1
    assert value(values, "cdcwatch_connect_connector_tasks_configured", connector="inventory") == 1
    assert value(values, "cdcwatch_connect_connector_tasks_running", connector="inventory") == 1
    # JMX: the worker's own beans, and the Debezium beans of the same connector under the same server label
    assert value(values, "cdcwatch_connect_worker_connectors", target="worker") == 1
    assert value(values, "cdcwatch_connect_jmx_task_status", connector="inventory", task="0", server=SERVER,
                 state="running") == 1

    # every change the connector streams is one record polled
    polled = lambda: value(serve.scrape(), "cdcwatch_connect_source_records_polled_total",  # noqa: E731
                           connector="inventory", task="0")
    before = wait_for(lambda: (p := polled()) is not None and p >= 1 and p, 30, "the snapshot row to be polled")
    postgres.sql("INSERT INTO connect_items SELECT g, 'b' FROM generate_series(2, 31) g;"
                 "UPDATE connect_items SET v = 'c' WHERE id <= 5; DELETE FROM connect_items WHERE id = 31")
    changed = 30 + 5 + 2  # a delete is two records: the delete event and its tombstone
    wait_for(lambda: polled() >= before + changed, 60, f"{changed} more records polled")
    assert polled() == before + changed

    worker.put("/connectors/inventory/pause")
    wait_for(lambda: task_state() == "PAUSED", 60, "the task to pause")
    assert state(serve.scrape(), "cdcwatch_connect_connector_state", connector="inventory") == "PAUSED"
    worker.put("/connectors/inventory/resume")
    wait_for(lambda: task_state() == "RUNNING", 60, "the task to resume")

    def drop_slot() -> bool:
        postgres.sql(f"SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '{SLOT}'"
                     " AND active_pid IS NOT NULL")
        postgres.sql(f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{SLOT}'"
                     " AND NOT active")
        return task_state() == "FAILED"

    wait_for(drop_slot, 90, "the task to fail once its slot is gone", interval=1)
    values = serve.scrape()
    failures = [dict(labels) for (name, labels), v in values.items() if name == "cdcwatch_connect_task_failure_info"]
    trace = worker.get("/connectors/inventory/status")["tasks"][0]["trace"]
    assert len(failures) == 1 and failures[0]["task"] == "0" and failures[0]["server"] == SERVER
    assert failures[0]["exception"] == first_exception_class(trace) == "org.apache.kafka.connect.errors.ConnectException"
    assert value(values, "cdcwatch_connect_connector_tasks_running", connector="inventory") == 0
    promtool_check(serve.text())
    # each bean is asked only for attributes it has: Kafka's JmxReporter logs a warning with an
    # AttributeNotFoundException for every one it lacks (the same warning with Connect's own NotFoundException is
    # Connect computing a task count while a task's status is not registered yet: an attribute it has)
    log = (worker.dir / "worker.log").read_text(encoding="utf-8")
    lacking = re.findall(r"Error getting JMX attribute '([^']+)'[^\n]*\n(?:javax\.management\.)?AttributeNotFoundException", log)
    assert not lacking, f"attributes asked of beans that lack them: {sorted(set(lacking))}"


def test_a_task_that_fails_at_start_up(worker, pki, postgres, stack_dir, serve_factory) -> None:
    """The slot is held by another client (pg_recvlogical), so the task cannot start streaming."""
    slot = "held_slot"
    postgres.sql("DROP TABLE IF EXISTS held_items; CREATE TABLE held_items (id int PRIMARY KEY);"
                 f"CREATE PUBLICATION {slot}_pub FOR TABLE held_items")
    postgres.sql(f"SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')")
    holder = subprocess.Popen(["pg_recvlogical", "-h", "127.0.0.1", "-p", str(postgres.port), "-U", "postgres",
                               "-d", "postgres", "--slot", slot, "--start", "-o", "proto_version=1",
                               "-o", f"publication_names={slot}_pub", "-f", "/dev/null"], start_new_session=True,
                              stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: postgres.sql(f"SELECT active FROM pg_replication_slots WHERE slot_name = '{slot}'") == "t", 30,
                 "pg_recvlogical to hold the slot")
        worker.put("/connectors/held/config", {**connector(postgres, stack_dir, slot, "public.held_items", "heldsrv"),
                                               "slot.max.retries": "1", "slot.retry.delay.ms": "500"})
        serve = serve_factory(connect_config(worker, pki))
        wait_for(lambda: state(serve.scrape(), "cdcwatch_connect_task_state", connector="held", task="0") == "FAILED",
                 90, "the task to fail at start-up")
        values = serve.scrape()
        trace = worker.get("/connectors/held/status")["tasks"][0]["trace"]
        failure = [dict(labels) for (name, labels), v in values.items()
                   if name == "cdcwatch_connect_task_failure_info" and dict(labels)["connector"] == "held"]
        assert [f["exception"] for f in failure] == [first_exception_class(trace)], trace.splitlines()[0]
        assert failure[0]["server"] == "heldsrv"
    finally:
        worker.delete("/connectors/held")
        stop_group(holder, 10)


def test_refused_rest_credentials_are_up_0_with_a_clear_reason(worker, pki, serve_factory) -> None:
    wrong_password = serve_factory(connect_config(worker, pki, password="not-the-password"))
    values = wrong_password.scrape()
    assert value(values, "cdcwatch_up", collector="connect", target="worker") == 0
    wait_for(lambda: "401" in wrong_password.log.read_text(), 10, "the log to name the refused credentials")
    assert "not-the-password" not in wrong_password.log.read_text()


def test_an_untrusted_rest_certificate_is_up_0_with_a_clear_reason(worker, pki, stack_dir, serve_factory) -> None:
    other_ca = make_pki(stack_dir / "untrusted-ca", (), ca_name="an untrusted CA")
    untrusted = serve_factory(connect_config(worker, pki, ca=str(other_ca.ca)))
    assert value(untrusted.scrape(), "cdcwatch_up", collector="connect", target="worker") == 0
    wait_for(lambda: "CERTIFICATE_VERIFY_FAILED" in untrusted.log.read_text(), 10, "the log to name the certificate")


def test_a_connector_whose_plugin_is_missing_at_start_fails_without_mbeans(worker, pki, serve_factory) -> None:
    worker.stop()
    worker.plugins = ("debezium-connector-mysql",)
    try:
        worker.start()
        serve = serve_factory(connect_config(worker, pki))
        wait_for(lambda: state(serve.scrape(), "cdcwatch_connect_connector_state", connector="inventory") == "FAILED",
                 90, "the connector to fail at startup")
        values = serve.scrape()
        trace = worker.get("/connectors/inventory/status")["connector"]["trace"]
        failure = [dict(labels) for (name, labels), v in values.items() if name == "cdcwatch_connect_connector_failure_info"]
        assert len(failure) == 1 and failure[0]["server"] == SERVER
        assert failure[0]["exception"] == first_exception_class(trace)
        assert value(values, "cdcwatch_debezium_mbeans", target="worker-jvm") == 0
        assert value(values, "cdcwatch_connect_worker_connector_startup_failures_total", target="worker") >= 1
    finally:
        worker.stop()
        worker.plugins = None
        worker.start()


def labels_of(values, metric: str, **labels: str) -> list[dict[str, str]]:
    return [dict(ls) for (name, ls) in values if name == metric and set(labels.items()) <= set(ls)]


def test_task_restarts_through_rest_and_a_killed_worker_are_counted_exactly(worker, pki, postgres, stack_dir,
                                                                             serve_factory) -> None:
    server, slot = "rstsrv", "restart_slot"
    postgres.sql("DROP TABLE IF EXISTS restart_items; CREATE TABLE restart_items (id int PRIMARY KEY);"
                 "INSERT INTO restart_items VALUES (1)")
    config = connector(postgres, stack_dir, slot, "public.restart_items", server)
    registered = time.time()
    worker.put("/connectors/restarts/config", config)
    serve = serve_factory(connect_config(worker, pki))
    task = {"connector": "restarts", "task": "0", "server": server}

    def started() -> float | None:
        return value(serve.scrape(), "cdcwatch_connect_task_start_time_seconds", **task)

    def restarts(values, reason: str) -> float | None:
        return value(values, "cdcwatch_connect_task_restarts_total", reason=reason, **task)

    def running() -> bool:
        return worker.get("/connectors/restarts/status")["tasks"][0]["state"] == "RUNNING"

    def started_again(previous: float, what: str, timeout: float) -> float:
        """The task's start time once it differs from `previous`."""
        return wait_for(lambda: (s := started()) is not None and s != previous and s, timeout, what)

    try:
        first = wait_for(lambda: running() and started(), 90, "the task to run with its producer")
        wait_for(lambda: value(serve.scrape(), "cdcwatch_debezium_connected", server=server) == 1, 60, "Debezium streaming")
        values = serve.scrape()
        assert registered - 0.001 <= first <= time.time()
        assert restarts(values, "task") == 0 and restarts(values, "jvm") == 0
        jvm_started = value(values, "cdcwatch_connect_worker_start_time_seconds", target="worker")
        assert value(values, "cdcwatch_debezium_jvm_start_time_seconds", target="worker-jvm") == jvm_started
        assert -0.02 <= jvm_started - process_start_time(worker.server.pid) < 3

        # identity: the configuration the test registered, the plugin of the connector's own Debezium series, and
        # the slot PostgreSQL reports active for that database
        [pipeline] = labels_of(values, "cdcwatch_connect_connector_pipeline_info", connector="restarts")
        assert pipeline == {"target": "worker", "connector": "restarts", "server": config["topic.prefix"],
                            "slot": config["slot.name"], "database": config["database.dbname"], "plugin": "postgres"}
        assert {ls["plugin"] for ls in labels_of(values, "cdcwatch_debezium_connected", server=server)} == {pipeline["plugin"]}
        assert postgres.sql("SELECT active || ' ' || database FROM pg_replication_slots WHERE slot_name = "
                            f"'{pipeline['slot']}'") == f"true {pipeline['database']}"
        assert value(values, "cdcwatch_connect_server_name_conflicts", server=server) == 0

        previous = first
        for count in (1, 2):
            posted = time.time()
            worker.post("/connectors/restarts/tasks/0/restart")
            now = started_again(previous, f"restart {count} to show", 90)
            assert posted - 0.001 <= now <= time.time()
            values = serve.scrape()
            assert (restarts(values, "task"), restarts(values, "jvm")) == (count, 0)
            previous = now

        worker.kill()
        assert value(serve.scrape(), "cdcwatch_up", collector="connect", target="worker") == 0
        restarted = time.time()
        worker.start()
        now = started_again(previous, "the task to start in the new worker JVM", 120)
        values = serve.scrape()
        assert (restarts(values, "task"), restarts(values, "jvm")) == (2, 1)
        new_jvm = value(values, "cdcwatch_connect_worker_start_time_seconds", target="worker")
        process_started = process_start_time(worker.server.pid)
        assert restarted - 0.02 <= process_started and -0.02 <= new_jvm - process_started < 3, (process_started, new_jvm)
        assert value(values, "cdcwatch_debezium_jvm_start_time_seconds", target="worker-jvm") == new_jvm
        assert new_jvm < now <= time.time()
        for _ in range(3):  # nothing restarts: nothing more is counted
            values = serve.scrape()
        assert (restarts(values, "task"), restarts(values, "jvm")) == (2, 1)
        assert value(values, "cdcwatch_connect_task_start_time_seconds", **task) == now
        promtool_check(serve.text())
    finally:
        worker.delete("/connectors/restarts")
        postgres.drop_slot(slot)


def test_a_second_connector_with_the_same_server_name_is_a_conflict(worker, pki, postgres, stack_dir,
                                                                    serve_factory) -> None:
    server = "twinsrv"
    postgres.sql("DROP TABLE IF EXISTS twin_items; CREATE TABLE twin_items (id int PRIMARY KEY)")
    first = connector(postgres, stack_dir, "twin_a", "public.twin_items", server)
    second = connector(postgres, stack_dir, "twin_b", "public.twin_items", server)
    serve = serve_factory(connect_config(worker, pki))
    conflicts = lambda: value(serve.scrape(), "cdcwatch_connect_server_name_conflicts", server=server)  # noqa: E731
    try:
        worker.put("/connectors/twin-a/config", first)
        wait_for(lambda: worker.get("/connectors/twin-a/status")["tasks"][0]["state"] == "RUNNING", 90, "twin-a to run")
        assert conflicts() == 0
        worker.put("/connectors/twin-b/config", second)
        wait_for(lambda: conflicts() == 1, 30, "the conflict to show")
        values = serve.scrape()
        assert sorted((p["connector"], p["server"], p["slot"]) for p in
                      labels_of(values, "cdcwatch_connect_connector_pipeline_info", server=server)) == [
            ("twin-a", server, "twin_a"), ("twin-b", server, "twin_b")]
        checked = subprocess.run([sys.executable, "-m", "cdcwatch.cli", "check", "--config", str(serve.config)],
                                 capture_output=True, text=True, timeout=120)
        assert f"server name used twice: {server}" in checked.stdout, checked.stdout + checked.stderr
        worker.delete("/connectors/twin-b")
        wait_for(lambda: conflicts() == 0, 30, "the conflict to clear")
    finally:
        for name in ("twin-b", "twin-a"):
            try:
                worker.delete(f"/connectors/{name}")
            except Exception:  # already deleted
                pass
        postgres.drop_slot("twin_a")
        postgres.drop_slot("twin_b")
