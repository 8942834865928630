"""Real components for integration tests: PostgreSQL, MariaDB, Apache Kafka 4, Debezium, `cdcwatch serve`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from devstack.configs import exporter_config, listen
from devstack.kafka import KafkaBroker
from devstack.mariadb import MariaDbServer
from devstack.postgres import PostgresServer
from devstack.procs import free_port, port_open, wait_for
from devstack.samples import Values, parse, total, value  # noqa: F401 (the tests import them from here)

_STACK_DIRS: list[Path] = []
"""The session's stack directory, once made: a failed test's report carries the tails of the logs written meanwhile."""
MS = 0.001
"""The resolution of the times a lag is computed from (Debezium's ts_ms, a Spark progress' timestamp): a bound
on such a lag allows it once."""
LOG_TAIL_LINES = 40
LOG_TAIL_FILES = 8


@pytest.fixture(scope="session")
def stack_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="cdcwatch-it-"))
    path.chmod(0o755)
    _STACK_DIRS.append(path)
    yield path
    _STACK_DIRS.remove(path)
    shutil.rmtree(path, ignore_errors=True)


def _log_tails(since: float) -> str:
    """The last lines of each server log written since `since`, newest first: the stack is gone once the session ends."""
    logs = [log for directory in _STACK_DIRS for pattern in ("*.log", "stderr") for log in directory.rglob(pattern)
            if log.is_file() and log.stat().st_mtime >= since]
    logs.sort(key=lambda log: log.stat().st_mtime, reverse=True)
    parts = []
    for log in logs:
        text = log.read_bytes()[-64 * 1024:]
        if b"\0" in text:  # a Kafka log segment, not a server's log
            continue
        lines = text.decode("utf-8", errors="replace").splitlines()[-LOG_TAIL_LINES:]
        parts.append(f"--- {log} (last {len(lines)} lines)\n" + "\n".join(lines))
        if len(parts) == LOG_TAIL_FILES:
            break
    return "\n".join(parts)


_SETUP_STARTED = pytest.StashKey[float]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if call.when == "setup":
        item.stash[_SETUP_STARTED] = call.start
    if report.failed and _STACK_DIRS:
        tails = _log_tails(item.stash.get(_SETUP_STARTED, call.start))
        if tails:
            report.sections.append(("the local stack's logs written since the failed test began", tails))


def _running(server_class, directory: Path):
    server = server_class(directory, free_port())
    server.start()
    return server


@pytest.fixture(scope="session")
def postgres(stack_dir: Path) -> Iterator[PostgresServer]:
    server = _running(PostgresServer, stack_dir / "postgres")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def kafka(stack_dir: Path) -> Iterator[KafkaBroker]:
    """Apache Kafka 4 (KRaft), PLAINTEXT plus a SASL_SSL (SCRAM-SHA-256) listener."""
    broker = KafkaBroker(stack_dir / "kafka", secure=True)
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def mariadb(stack_dir: Path) -> Iterator[MariaDbServer]:
    server = _running(MariaDbServer, stack_dir / "mariadb")
    yield server
    server.stop()


class Serve:
    """A running `cdcwatch serve` process and a way to scrape it."""

    def __init__(self, config_text: str, workdir: Path, *args: str) -> None:
        self.port = free_port()
        self.config = workdir / f"cdcwatch-{self.port}.yml"
        self.listen = exporter_config(listen=listen(self.port))  # the file's head; config_text (its other sections) follows
        self.config.write_text(self.listen + config_text, encoding="utf-8")
        self.log = workdir / f"cdcwatch-{self.port}.log"
        self.process = subprocess.Popen([sys.executable, "-m", "cdcwatch.cli", "serve", "--config", str(self.config), *args],
                                        stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)
        wait_for(lambda: port_open(self.port), 30, f"cdcwatch serve on {self.port} (log {self.log})")

    def text(self, timeout: float = 60) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=timeout) as response:
            return response.read().decode()

    def scrape(self) -> Values:
        return parse(self.text())

    def timed_scrape(self) -> tuple[Values, float]:
        started = time.monotonic()
        values = self.scrape()
        return values, time.monotonic() - started

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def promtool_check(text: str) -> None:
    """`promtool check metrics` on an exposition; fails the test with promtool's complaints, or without promtool."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool is not on PATH (scripts/setup.sh installs it)"
    done = subprocess.run([promtool, "check", "metrics"], input=text,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def process_start_time(pid: int) -> float:
    """When a process started (Unix seconds, within 10 ms), read from /proc: its start in clock ticks after boot
    (field 22 of /proc/<pid>/stat) plus the boot time, as the wall clock less the time since boot, read back to back
    (a file read between them would count its own delay; /proc/stat's btime is whole seconds)."""
    boot = time.clock_gettime(time.CLOCK_REALTIME) - time.clock_gettime(time.CLOCK_BOOTTIME)
    ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    return boot + ticks / os.sysconf("SC_CLK_TCK")


@pytest.fixture
def serve_factory(stack_dir: Path) -> Iterator[Callable[..., Serve]]:
    started: list[Serve] = []

    def make(config_text: str, *args: str) -> Serve:
        serve = Serve(config_text, stack_dir, *args)
        started.append(serve)
        return serve

    yield make
    for serve in started:
        serve.stop()
