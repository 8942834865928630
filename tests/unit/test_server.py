"""`cdcwatch serve`'s wiring in cdcwatch/server.py, in this process: SIGHUP reloads the configuration file,
SIGTERM and SIGINT stop serving (and the previous signal handlers come back), an address that cannot be bound
exits 2 before anything serves. The collectors are PostgreSQL sources nothing listens for (no server needed);
tests/integration/test_reload.py and test_cli.py run the same against a real `cdcwatch serve` process."""

from __future__ import annotations

import os
import signal
import socket
import threading
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cdcwatch.cli import main
from cdcwatch.server import ListenError, Service
from cdcwatch.validation import load_config
from devstack.procs import free_port, wait_for
from devstack.samples import parse


def sources(*names: str) -> str:
    return "postgres:\n" + "".join(f"  - name: {name}\n    port: 1\n    timeout_seconds: 1\n" for name in names)


def targets(service: Service) -> set[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{service.port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {dict(labels)["target"] for name, labels in parse(text) if name == "cdcwatch_up"}


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Callable[[Callable[[Service], None]], Service]]:
    """Run a Service in the main thread (signals reach only it) while `act` drives it from a second thread."""
    config = tmp_path / "cdcwatch.yml"
    config.write_text(sources("first"), encoding="utf-8")
    failures: list[BaseException] = []

    def run(act: Callable[[Service], None]) -> Service:
        service = Service(config, load_config(config), "127.0.0.1", 0)

        def driver() -> None:
            try:  # a signal sent before run() installed the handlers would end this whole process
                wait_for(lambda: all(signal.getsignal(s) == service._on_signal
                                     for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)), 30,
                         "the service's signal handlers")
                act(service)
            except BaseException as exc:  # reported by the test, after the service stopped
                failures.append(exc)
                service.shutdown()

        thread = threading.Thread(target=driver, daemon=True)
        thread.start()
        service.run()
        thread.join(30)
        if failures:
            raise failures[0]
        return service

    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    yield run
    assert {s: signal.getsignal(s) for s in handlers} == handlers, "the previous signal handlers were not restored"


def test_sighup_reloads_and_sigterm_stops(running, tmp_path: Path) -> None:
    def act(service: Service) -> None:
        wait_for(lambda: targets(service) == {"first"}, 30, "the first scrape")
        (tmp_path / "cdcwatch.yml").write_text(sources("first", "added"), encoding="utf-8")
        os.kill(os.getpid(), signal.SIGHUP)
        wait_for(lambda: targets(service) == {"first", "added"}, 30, "SIGHUP to apply the edited file")
        os.kill(os.getpid(), signal.SIGTERM)

    service = running(act)
    assert service.stopping.is_set() and service.reloader.config.postgres[-1].name == "added"
    assert service.exporter.reloads.failures == 0


def test_a_rejected_reload_keeps_the_configuration_and_sigint_stops(running, tmp_path: Path) -> None:
    def act(service: Service) -> None:
        (tmp_path / "cdcwatch.yml").write_text("postgres:\n  - name: first\n    port: not-a-port\n", encoding="utf-8")
        os.kill(os.getpid(), signal.SIGHUP)
        wait_for(lambda: service.exporter.reloads.failures == 1, 30, "the rejected reload")
        assert targets(service) == {"first"}
        os.kill(os.getpid(), signal.SIGINT)

    service = running(act)
    assert not service.exporter.reloads.last_successful


def test_an_address_that_cannot_be_bound_exits_2_before_serving(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "cdcwatch.yml"
    config.write_text(sources("first"), encoding="utf-8")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ListenError, match=f"cannot listen on 127.0.0.1:{port}: Address already in use"):
            Service(config, load_config(config), "127.0.0.1", port)
        assert main(["serve", "--config.file", str(config), "--web.listen-address", f"127.0.0.1:{port}"]) == 2
    assert f"cdcwatch: cannot listen on 127.0.0.1:{port}: Address already in use" in capsys.readouterr().err


def test_the_answer_stats_are_the_declared_self_metrics() -> None:
    from cdcwatch.exporter import METRICS_RESPONSE_SECONDS_TOTAL, METRICS_RESPONSES_TOTAL, SELF_METRICS
    from cdcwatch.server import AnswerStats

    stats = AnswerStats()
    assert stats.collect() == []  # nothing answered yet: no series
    for format in ("PrometheusText0.0.4", "OpenMetricsText1.0.0", "OpenMetricsText1.0.0"):
        stats.record(format, {"collect": 0.5, "render": 0.25, "compress": 0.125, "send": 0.0625})
    counts, seconds = stats.collect()
    for family, spec in ((counts, METRICS_RESPONSES_TOTAL), (seconds, METRICS_RESPONSE_SECONDS_TOTAL)):
        assert SELF_METRICS[spec.name] is spec and family.name == spec.name.removesuffix("_total")
        assert family.type == spec.type and family.documentation == spec.help
        assert all(tuple(sample.labels) == spec.labels for sample in family.samples)
    assert [(s.labels["format"], s.value) for s in counts.samples] == [("OpenMetricsText1.0.0", 2.0), ("PrometheusText0.0.4", 1.0)]
    assert [(s.labels["part"], s.value) for s in seconds.samples[:4]] == [
        ("collect", 1.0), ("render", 0.5), ("compress", 0.25), ("send", 0.125)]
