"""Hot reload of a running `cdcwatch serve`: a changed file applies without a restart, SIGHUP too;
an invalid file keeps the last good configuration and is counted; counters do not reset."""

from __future__ import annotations

import signal

import pytest

from devstack.procs import free_port, wait_for
from tests.integration.conftest import value

pytestmark = pytest.mark.integration


def sources(postgres, *extra: str) -> str:
    text = f"postgres:\n  - name: main\n    host: 127.0.0.1\n    port: {postgres.port}\n    timeout_seconds: 2\n"
    for name in extra:  # sources nothing listens for: always down
        text += f"  - name: {name}\n    host: 127.0.0.1\n    port: {free_port()}\n    timeout_seconds: 2\n"
    return text


def targets(values) -> set[str]:
    return {dict(labels)["target"] for (name, labels) in values if name == "cdcwatch_up"}


def test_reload_on_file_change_and_sighup(postgres, serve_factory) -> None:
    serve = serve_factory(sources(postgres, "gone"))
    first = serve.scrape()
    assert targets(first) == {"main", "gone"}
    assert value(first, "cdcwatch_config_last_reload_successful") == 1
    serve.scrape()
    errors_before = value(serve.scrape(), "cdcwatch_scrape_errors_total", target="gone")
    assert errors_before >= 3

    def write(text: str) -> None:
        header = serve.config.read_text(encoding="utf-8").split("postgres:")[0]
        serve.config.write_text(header + text, encoding="utf-8")

    write(sources(postgres, "gone", "added"))  # picked up by the file watcher, no signal
    wait_for(lambda: targets(serve.scrape()) == {"main", "gone", "added"}, 30, "the edited file to apply")
    values = serve.scrape()
    assert value(values, "cdcwatch_scrape_errors_total", target="gone") > errors_before  # not reset by the reload
    assert value(values, "cdcwatch_up", collector="postgres", target="main") == 1

    write("postgres:\n  - name: main\n    port: not-a-port\n")
    serve.process.send_signal(signal.SIGHUP)
    wait_for(lambda: value(serve.scrape(), "cdcwatch_config_reload_failures_total") >= 1, 30, "the rejected reload")
    values = serve.scrape()
    assert value(values, "cdcwatch_config_last_reload_successful") == 0
    assert targets(values) == {"main", "gone", "added"}  # the last good configuration still runs
    assert "configuration reload rejected" in serve.log.read_text(encoding="utf-8")

    write(sources(postgres))
    serve.process.send_signal(signal.SIGHUP)
    wait_for(lambda: targets(serve.scrape()) == {"main"}, 30, "the fixed file to apply")
    assert value(serve.scrape(), "cdcwatch_config_last_reload_successful") == 1
