"""Hot reload of a running `cdcwatch serve`: the file watcher applies an edited, atomically replaced or
restored file within one watch interval, limits included; SIGHUP reloads on its own (watcher off); an
invalid or missing file keeps the last good configuration; counters do not reset. The watcher's claims are one test
each: a change applied (edited in place, or renamed over), limits applied, a missing file waited out."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from cdcwatch.config import WATCH_INTERVAL_SECONDS
from devstack.configs import exporter_config, postgres_source
from devstack.procs import free_port, wait_for
from tests.integration.conftest import value

pytestmark = pytest.mark.integration

NOTICE = WATCH_INTERVAL_SECONDS + 2.0
"""Until an edit shows in a scrape: the watcher's next look, then the reload itself, a 0.2 s poll and a scrape
(which may first wait for a collection already under way)."""


def sources(postgres, *extra: str, **sections: Any) -> str:
    """The `main` source, the `extra` ones nothing listens for (always down), and other `sections` (limits=...)."""
    return exporter_config(**sections, postgres=[postgres_source("main", postgres.port, timeout_seconds=2)]
                           + [postgres_source(name, free_port(), timeout_seconds=2) for name in extra])


def targets(values) -> set[str]:
    return {dict(labels)["target"] for (name, labels) in values if name == "cdcwatch_up"}


def exported(values) -> int:
    """Series of the `main` source itself (not cdcwatch's own about it)."""
    return sum(1 for name, labels in values if name.startswith("cdcwatch_postgres_") and ("target", "main") in labels)


def write(serve, text: str, atomically: bool = False) -> None:
    """The config file with `text` after its listen lines: rewritten in place, or written to a new file
    renamed over it (editors, ConfigMaps)."""
    if not atomically:
        serve.config.write_text(serve.listen + text, encoding="utf-8")
        return
    new = serve.config.with_suffix(".new")
    new.write_text(serve.listen + text, encoding="utf-8")
    os.replace(new, serve.config)


def watched(serve, text: str, applied, what: str, atomically: bool = False) -> dict:
    """Write `text`, and the first scrape in which the watcher has applied it, within one watch interval."""
    write(serve, text, atomically)

    def scrape_once_applied() -> dict | None:
        values = serve.scrape()
        return values if applied(values) else None

    return wait_for(scrape_once_applied, NOTICE, f"the watcher to apply {what}")


def dropped(values) -> float:
    return value(values, "cdcwatch_series_dropped_total", target="main")


@pytest.mark.parametrize("atomically", [False, True], ids=["edited-in-place", "renamed-over"])
def test_the_watcher_applies_an_added_source_within_its_interval_keeping_counters(postgres, serve_factory,
                                                                                  atomically: bool) -> None:
    serve = serve_factory(sources(postgres, "gone"))
    first = serve.scrape()
    assert targets(first) == {"main", "gone"}
    assert value(first, "cdcwatch_config_last_reload_successful") == 1
    serve.scrape()
    errors_before = value(serve.scrape(), "cdcwatch_scrape_errors_total", target="gone")
    assert errors_before >= 3

    values = watched(serve, sources(postgres, "gone", "added"), lambda v: targets(v) == {"main", "gone", "added"},
                     "an added source", atomically)
    assert value(values, "cdcwatch_scrape_errors_total", target="gone") > errors_before  # not reset by the reload
    assert value(values, "cdcwatch_up", collector="postgres", target="main") == 1


def test_the_watcher_applies_a_lower_series_limit_and_the_default_again(postgres, serve_factory) -> None:
    postgres.sql("SELECT pg_create_physical_replication_slot('reload_cap')")  # 1 + 6 series for `main`
    try:
        serve = serve_factory(sources(postgres))
        series = exported(serve.scrape())
        assert series > 3
        capped = sources(postgres, limits={"max_series_per_target": 3})
        before = watched(serve, capped, lambda v: exported(v) == 3, "a lower series limit")
        after = serve.scrape()
        assert exported(after) == 3 and dropped(after) - dropped(before) == series - 3
        watched(serve, sources(postgres), lambda v: exported(v) == series, "the default limit again")
    finally:
        postgres.drop_slot("reload_cap")


def test_the_watcher_waits_out_a_missing_file(postgres, serve_factory) -> None:
    serve = serve_factory(sources(postgres, "gone"))
    assert targets(serve.scrape()) == {"main", "gone"}
    serve.config.unlink()  # a missing file is waited out, not a reload to reject
    wait_for(lambda: "cannot be read; the running configuration stays" in serve.log.read_text(encoding="utf-8"),
             NOTICE, "the watcher to notice the missing file")
    assert targets(serve.scrape()) == {"main", "gone"}
    values = watched(serve, sources(postgres), lambda v: targets(v) == {"main"}, "the file written again")
    assert value(values, "cdcwatch_config_reload_failures_total") == 0
    assert value(values, "cdcwatch_config_last_reload_successful") == 1


def hup(serve, text: str | None) -> None:
    """The config file rewritten with `text` (or removed, for None), then SIGHUP."""
    if text is None:
        serve.config.unlink()
    else:
        write(serve, text)
    serve.process.send_signal(signal.SIGHUP)


def test_sighup_reloads_with_the_watcher_off(postgres, serve_factory) -> None:
    serve = serve_factory(sources(postgres), "--config-watch-interval", "0")
    hup(serve, sources(postgres, "added"))
    wait_for(lambda: targets(serve.scrape()) == {"main", "added"}, 30, "SIGHUP to apply the edited file")
    assert value(serve.scrape(), "cdcwatch_config_last_reload_successful") == 1


def test_a_sighup_reload_of_an_invalid_or_missing_file_is_rejected_and_the_last_good_one_runs(postgres,
                                                                                              serve_factory) -> None:
    serve = serve_factory(sources(postgres, "kept"), "--config-watch-interval", "0")
    assert targets(serve.scrape()) == {"main", "kept"}

    hup(serve, "postgres:\n  - name: main\n    port: not-a-port\n")
    wait_for(lambda: value(serve.scrape(), "cdcwatch_config_reload_failures_total") == 1, 30, "the rejected reload")
    values = serve.scrape()
    assert value(values, "cdcwatch_config_last_reload_successful") == 0
    assert targets(values) == {"main", "kept"}  # the last good configuration still runs
    assert "configuration reload rejected" in serve.log.read_text(encoding="utf-8")

    hup(serve, None)  # a SIGHUP asks for the file: without one, the reload is rejected and counted
    wait_for(lambda: value(serve.scrape(), "cdcwatch_config_reload_failures_total") == 2, 30, "the reload of no file")
    assert targets(serve.scrape()) == {"main", "kept"}
    assert "cannot read file" in serve.log.read_text(encoding="utf-8")

    hup(serve, sources(postgres))
    wait_for(lambda: targets(serve.scrape()) == {"main"}, 30, "SIGHUP to apply the file written again")
    assert value(serve.scrape(), "cdcwatch_config_last_reload_successful") == 1
