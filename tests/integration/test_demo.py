"""The README's first command, run as a user would (`scripts/demo`, headless because stdout is a
pipe), then every scenario against that one running stack: each expected alert must reach the
webhook and resolve after recovery. Ctrl-C must leave nothing running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from cdcwatch.promapi import PrometheusApi
from devstack.procs import StackError, port_open, wait_for
from devstack.scenarios import SCENARIOS

pytestmark = pytest.mark.integration

DEMO = str(Path(__file__).resolve().parents[2] / "scripts" / "demo")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie of ours is gone for every purpose
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


def start_demo(workdir: Path, *args: str) -> tuple[subprocess.Popen, dict, Path]:
    """`scripts/demo *args` in `workdir`, once it is ready and printed its first status line."""
    log = workdir / "demo.out"
    process = subprocess.Popen([DEMO, *args], cwd=workdir, stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL)

    def ready() -> bool:
        if process.poll() is not None:
            raise StackError(f"the demo exited with {process.returncode}:\n{log.read_text()[-3000:]}")  # ends the wait
        return "firing:" in log.read_text().partition("ready:")[2]  # ready, and its first status line printed

    try:
        wait_for(ready, 400, "the demo to be ready", interval=1)
    except BaseException:  # a demo that never got ready must not run on beside the next one (nor hold its ports)
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(120)
        raise
    return process, json.loads((workdir / ".cdcwatch" / "demo" / "demo.json").read_text()), log


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory):
    """One demo for the module; a test that stopped it (Ctrl-C) leaves the next one a fresh start."""
    workdir = tmp_path_factory.mktemp("demo")
    workdir.chmod(0o755)
    current: list[tuple[subprocess.Popen, dict, Path]] = []

    def running() -> tuple[Path, subprocess.Popen, dict, Path]:
        if not current or current[-1][0].poll() is not None:
            current.append(start_demo(workdir))
        process, state, log = current[-1]
        return workdir, process, state, log

    yield running
    for process, _, _ in current:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(120)


@pytest.fixture
def demo(demo_runs):
    return demo_runs()


def first_status_line(log: Path) -> str:
    """The first status line the demo printed after "ready" (30 s later, awaited before any scenario runs)."""
    return next(line for line in log.read_text().partition("ready:")[2].splitlines() if "firing:" in line)


def test_the_first_status_after_ready_fires_nothing(demo) -> None:
    """A newcomer's first screen: the healthy pipeline, caught up with its initial snapshot, pages nobody (alerts
    pending at "ready" would fire within the demo's 10-15 s `for`, before this line)."""
    _, _, _, log = demo
    line = first_status_line(log)
    assert line.endswith("firing: none"), line
    assert "debezium up" in line, line


@pytest.mark.parametrize("name", [name for name, scenario in SCENARIOS.items()
                                  if scenario.check is None and "spark" in scenario.sinks])
def test_scenario_alert_fires_and_resolves(demo, name: str) -> None:
    scenario_fires_and_resolves(demo, name)


def scenario_fires_and_resolves(demo, name: str) -> None:
    """`scripts/demo --scenario name` against the running demo: the alert fires within its floor and slack, resolves
    after recovery, its runbook links open, the alerts it covers do not page, the target stays right."""
    workdir, _, state, _ = demo
    started = time.time()
    report_file = workdir / f"{name}.json"
    done = subprocess.run([DEMO, "--scenario", name, "--report", str(report_file)], cwd=workdir,
                          capture_output=True, text=True, timeout=900)
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_file.read_text())
    scenario = SCENARIOS[name]
    if name != "target-drift":  # every other fault leaves the target right: reconciliation must not say otherwise
        assert most_rows_diverged(state["prometheus"], since=started) == 0, f"a divergence reported during {name}"
    assert report["states_seen"] in (None, dict(scenario.states)), report
    if scenario.alert is None:  # ridden out: the restart and the replay counted, no page, flowing again
        assert report["restarts_counted"] >= 1 and report["duplicates_counted"] > 0, report
        assert report["flowing_after"] is not None, report
        return
    assert report["fired_after"] is not None and report["resolved_after"] is not None
    # not before the alert's `for` (plus the time the fault needs to build), not later than the floor + the slack
    assert report["earliest_seconds"] <= report["fired_after"] <= report["latest_seconds"], report
    for notification in report["notifications"]:  # every link a notification carries opens, at the alert's anchor
        with urllib.request.urlopen(notification["runbook_url"], timeout=10) as response:
            assert f'id="{notification["alert"].lower()}"' in response.read().decode()
    # e.g. a worker that died: the Debezium target of its JVM fails too, and its CdcwatchTargetDown must not page
    # while the fault lasts, nor while the pipeline catches up after it
    assert not covered_paged_before_the_all_clear(report, scenario), report["notifications"]
    # one cause, one page: the fault's page and no other critical alert notified from the fault to the all-clear
    if not scenario.more_pages:
        pages = pages_from_the_fault(report)
        # a backlog that outlasts the freshness threshold pages once, for the stale target (a busy machine drains slower)
        assert pages == scenario.pages or (scenario.stale_page and pages == {*scenario.pages, scenario.stale_page}), \
            report["notifications"]
    if name == "connector-crash":
        assert report["duplicates_counted"] > 0, "the replay after kill -9 was not counted as duplicates"


def covered_paged_before_the_all_clear(report: dict, scenario) -> set[str]:
    """The alerts `scenario` covers that were notified firing before its alert's resolved notice: neither the fault
    nor the catch-up after it may page them (a Connect alert fires on for `durations.recovery` once its connector
    runs again, and inhibits them meanwhile); notifications are timed from the fault, and one before it belongs to
    the fault before."""
    ended = next(n["after_seconds"] for n in report["notifications"]
                 if n["alert"] == scenario.alert and n["status"] == "resolved")
    return {n["alert"] for n in report["notifications"]
            if n["status"] == "firing" and 0 <= n["after_seconds"] < ended} & set(scenario.covered)


def pages_from_the_fault(report: dict) -> set[str]:
    """The critical alerts notified firing from the fault on until the scenario's alert resolved (the report ends
    with that notice): the pages the fault sent. A notification before the fault belongs to the one before it."""
    return {n["alert"] for n in report["notifications"]
            if n["status"] == "firing" and n["severity"] == "critical" and n["after_seconds"] >= 0}


def most_rows_diverged(prometheus: str, since: float) -> float:
    """The most rows the demo's reconciliation reported diverged at any evaluation since `since` (a failure when it
    reported nothing: then it did not run)."""
    seconds = int(time.time() - since) + 1
    result = PrometheusApi(prometheus, timeout=10).query(f"max_over_time(sum(cdcwatch_reconcile_rows_diverged)[{seconds}s:1s])")
    assert result, "no reconciliation series in Prometheus"
    return float(result[0]["value"][1])


@pytest.mark.parametrize("name", [name for name, scenario in SCENARIOS.items()
                                  if scenario.check is not None and "spark" in scenario.sinks])
def test_scenario_checks_hold(demo, name: str) -> None:
    scenario_checks_hold(demo, name)


def scenario_checks_hold(demo, name: str) -> None:
    """A scenario without an alert: what it checks in the running demo (against the database) holds."""
    workdir, _, _, _ = demo
    report_file = workdir / f"{name}.json"
    done = subprocess.run([DEMO, "--scenario", name, "--report", str(report_file)], cwd=workdir,
                          capture_output=True, text=True, timeout=300)
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(report_file.read_text())
    assert report["checks"], report


def test_a_taken_port_is_reported_before_anything_starts(demo) -> None:
    workdir, _, state, _ = demo
    port = int(state["metrics"].rsplit(":", 1)[1].split("/")[0])
    done = subprocess.run([DEMO, "--state-dir", str(workdir / "other")], cwd=workdir,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and f"port {port} is taken" in done.stderr
    assert not (workdir / "other").exists()


def test_a_scenario_without_a_running_demo_says_so(tmp_path: Path) -> None:
    done = subprocess.run([DEMO, "--scenario", "source-down", "--state-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "start `scripts/demo` first" in done.stderr


def test_ctrl_c_stops_everything_it_started(demo) -> None:
    ctrl_c_stops_everything(demo)


def ctrl_c_stops_everything(demo) -> None:
    """Ctrl-C: the demo exits 0, every process it started (by the PIDs it recorded) is gone, its port free."""
    workdir, process, state, log = demo
    pids = json.loads((workdir / ".cdcwatch" / "demo" / "demo.json").read_text())["pids"]
    process.send_signal(signal.SIGINT)
    assert process.wait(180) == 0, log.read_text()[-3000:]
    wait_for(lambda: not [name for name, pid in pids.items() if alive(pid)], 30, "every demo process to exit")
    assert not port_open(int(state["metrics"].rsplit(":", 1)[1].split("/")[0])), "cdcwatch still listens"
