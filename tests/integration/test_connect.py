"""The connect collector on a real Kafka Connect 4.3 worker (distributed, on noida-db) running the real
Debezium PostgreSQL connector: RUNNING → PAUSED → RUNNING, a dropped replication slot → task FAILED
with its exception class, and a connector whose class is missing when the worker starts → FAILED in
REST although it has no MBeans at all. The worker's JMX and the Debezium beans share the `server` label.
"""

from __future__ import annotations

import pytest

from devstack.connect import ConnectWorker
from devstack.debezium import postgres_connector_properties
from devstack.procs import wait_for
from tests.integration.conftest import promtool_check, value

pytestmark = pytest.mark.integration

SERVER = "connsrv"
SLOT = "connect_slot"


@pytest.fixture(scope="module")
def worker(postgres, noida, stack_dir):
    postgres.sql("DROP TABLE IF EXISTS connect_items; CREATE TABLE connect_items (id int PRIMARY KEY, v text);"
                 "INSERT INTO connect_items VALUES (1, 'a')")
    process = ConnectWorker(stack_dir / "connect", noida.bootstrap)
    process.start()
    properties = postgres_connector_properties(stack_dir, postgres.port, SERVER, "public.connect_items", slot=SLOT)
    for engine_only in ("name", "offset.storage", "offset.storage.file.filename", "offset.flush.interval.ms"):
        properties.pop(engine_only)
    process.put("/connectors/inventory/config", {**properties, "tasks.max": "1",
                                                 "retriable.restart.connector.wait.ms": "1000"})
    yield process
    process.stop()


def state(values, metric: str, **labels: str) -> str | None:
    states = [s for s in ("RUNNING", "PAUSED", "STOPPED", "FAILED", "UNASSIGNED", "RESTARTING")
              if value(values, metric, state=s, **labels) == 1]
    return states[0] if len(states) == 1 else None


def test_states_from_rest_and_jmx_through_a_connector_life(worker, postgres, serve_factory) -> None:
    serve = serve_factory(
        f"connect:\n  - name: worker\n    url: {worker.url}\n    timeout_seconds: 5\n"
        f"    jmx: {{host: 127.0.0.1, port: {worker.jmx_port}}}\n"
        f"targets:\n  - name: worker-jvm\n    jmx: {{host: 127.0.0.1, port: {worker.jmx_port}}}\n")

    def task_state() -> str | None:
        return state(serve.scrape(), "cdcwatch_connect_task_state", connector="inventory", task="0", server=SERVER)

    wait_for(lambda: task_state() == "RUNNING", 90, "the task to run")
    values = serve.scrape()
    assert value(values, "cdcwatch_up", collector="connect", target="worker") == 1
    assert state(values, "cdcwatch_connect_connector_state", connector="inventory", server=SERVER) == "RUNNING"
    assert value(values, "cdcwatch_connect_connector_info", connector="inventory", type="source",
                 **{"class": "io.debezium.connector.postgresql.PostgresConnector"}) == 1
    assert value(values, "cdcwatch_connect_worker_info", version="4.3.0") == 1
    assert value(values, "cdcwatch_connect_connector_tasks_configured", connector="inventory") == 1
    assert value(values, "cdcwatch_connect_connector_tasks_running", connector="inventory") == 1
    # JMX: the worker's own beans, and the Debezium beans of the same connector under the same server label
    assert value(values, "cdcwatch_connect_worker_connectors", target="worker") == 1
    assert value(values, "cdcwatch_connect_jmx_task_status", connector="inventory", task="0", server=SERVER,
                 state="running") == 1
    assert value(values, "cdcwatch_connect_source_records_polled_total", connector="inventory", task="0") is not None
    wait_for(lambda: value(serve.scrape(), "cdcwatch_debezium_connected", server=SERVER) == 1, 60, "Debezium streaming")

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
    assert len(failures) == 1 and failures[0]["task"] == "0" and failures[0]["server"] == SERVER
    assert "." in failures[0]["exception"] and " " not in failures[0]["exception"], failures[0]
    assert value(values, "cdcwatch_connect_connector_tasks_running", connector="inventory") == 0
    promtool_check(serve.text())


def test_a_connector_whose_class_is_missing_at_start_fails_without_mbeans(worker, serve_factory) -> None:
    worker.stop()
    worker.start(exclude_jars=("debezium-connector-postgres",))
    serve = serve_factory(
        f"connect:\n  - name: worker\n    url: {worker.url}\n    timeout_seconds: 5\n"
        f"    jmx: {{host: 127.0.0.1, port: {worker.jmx_port}}}\n"
        f"targets:\n  - name: worker-jvm\n    jmx: {{host: 127.0.0.1, port: {worker.jmx_port}}}\n")
    wait_for(lambda: state(serve.scrape(), "cdcwatch_connect_connector_state", connector="inventory") == "FAILED", 90,
             "the connector to fail at startup")
    values = serve.scrape()
    failure = [dict(labels) for (name, labels), v in values.items() if name == "cdcwatch_connect_connector_failure_info"]
    assert len(failure) == 1 and failure[0]["server"] == SERVER and "." in failure[0]["exception"]
    assert value(values, "cdcwatch_debezium_mbeans", target="worker-jvm") == 0
    assert value(values, "cdcwatch_connect_worker_connector_startup_failures_total", target="worker") >= 1
