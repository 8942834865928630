"""The demo's second shape, run as a user would: `scripts/demo --sink jdbc` (PostgreSQL → Debezium → Kafka → the
Debezium JDBC sink connector → PostgreSQL, no Spark; the target's freshness from the canary). It starts quiet, and each
of its scenarios raises the alert a user needs (a failed sink task, a paused sink named by the stale canary, records
sent to the dead letter queue, a column the sink does not carry, and the faults both shapes share: a source outage,
an exporter restart, a failed scrape) and resolves after recovery. A scenario of the Spark shape alone is refused with
what to run instead."""

from __future__ import annotations

import signal
import subprocess

import pytest

from devstack.procs import free_port
from devstack.scenarios import SCENARIOS
from tests.integration.test_demo import (
    DEMO,
    ctrl_c_stops_everything,
    first_status_line,
    scenario_checks_hold,
    scenario_fires_and_resolves,
    start_demo,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("demo-jdbc")
    workdir.chmod(0o755)
    process, state, log = start_demo(workdir, "--sink", "jdbc", "--port", str(free_port()))
    yield workdir, process, state, log
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        process.wait(120)


def test_the_first_status_after_ready_fires_nothing(demo) -> None:
    _, _, state, log = demo
    line = first_status_line(log)
    assert line.endswith("firing: none"), line
    assert "debezium up" in line and "sink freshness" in line and "spark" not in line, line
    assert state["sink"] == "jdbc" and state["spark_metrics"] is None


@pytest.mark.parametrize("name", [name for name, scenario in SCENARIOS.items()
                                  if scenario.check is None and "jdbc" in scenario.sinks])
def test_scenario_alert_fires_and_resolves(demo, name: str) -> None:
    scenario_fires_and_resolves(demo, name)


@pytest.mark.parametrize("name", [name for name, scenario in SCENARIOS.items()
                                  if scenario.check is not None and "jdbc" in scenario.sinks])
def test_scenario_checks_hold(demo, name: str) -> None:
    scenario_checks_hold(demo, name)


def test_a_scenario_of_the_other_shape_is_refused(demo) -> None:
    workdir, _, _, _ = demo
    done = subprocess.run([DEMO, "--scenario", "consumer-stall"], cwd=workdir, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and "--sink spark" in done.stderr and "--sink jdbc" in done.stderr, done.stderr


def test_ctrl_c_stops_everything_it_started(demo) -> None:
    ctrl_c_stops_everything(demo)
