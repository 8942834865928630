"""The exporter's own logic: deadlines, up/errors, state-change logging (fake collectors)."""

from __future__ import annotations

import logging
import math
import threading
import time
from wsgiref.util import setup_testing_defaults

from prometheus_client import CollectorRegistry, generate_latest

from cdcwatch.collection import Collection
from cdcwatch.exporter import Exporter, ScheduledCollector, budget_of, scrape_budget
from cdcwatch.failures import FailureKind
from cdcwatch.families import FamilyBuilder, RenderedFamily
from cdcwatch.server import build_app
from cdcwatch.specs import MetricSpec
from devstack.samples import parse

CONNECTED = MetricSpec("cdcwatch_debezium_connected", "gauge", "h")
TABLE_EVENTS = MetricSpec("cdcwatch_debezium_table_events_total", "counter", "h", ("table",))
PARTITION_LAG = MetricSpec("cdcwatch_test_partition_lag", "gauge", "h", ("partition",))


class FakeCollector:
    kind = "debezium"

    def __init__(self, target, behaviour):
        self.target = target
        self.behaviour = behaviour
        self.calls = 0

    def collect(self):
        self.calls += 1
        return self.behaviour()

    def close(self):
        pass


def ok():
    builder = FamilyBuilder()
    builder.add_spec(CONNECTED, 1.0, {"target": "good"})
    return Collection(builder.families(), "fine")


def registry_for(exporter):
    registry = CollectorRegistry(auto_describe=False)
    registry.register(exporter)
    return registry


def scrape_values(registry):
    """One scrape, as {(name, frozenset(labels)): value}."""
    return parse(generate_latest(registry).decode())


def test_failing_target_is_up_0_and_counted_while_others_are_served():
    def broken():
        raise ConnectionError("Connection refused to host: 127.0.0.1")

    exporter = Exporter([ScheduledCollector(FakeCollector("good", ok), 1), ScheduledCollector(FakeCollector("bad", broken), 1)])
    registry = registry_for(exporter)
    good = frozenset({"collector": "debezium", "target": "good"}.items())
    bad = frozenset({"collector": "debezium", "target": "bad"}.items())
    for expected_errors in (1.0, 2.0):
        values = scrape_values(registry)
        assert values[("cdcwatch_up", good)] == 1.0
        assert values[("cdcwatch_debezium_connected", frozenset({"target": "good"}.items()))] == 1.0
        assert values[("cdcwatch_up", bad)] == 0.0
        assert values[("cdcwatch_scrape_errors_total", bad)] == expected_errors
        assert values[("cdcwatch_scrape_errors_total", good)] == 0.0
        failures = {dict(labels)["target"]: dict(labels)["failure"] for name, labels in values
                    if name == "cdcwatch_target_failure_info"}
        assert failures == {"bad": "refused"}  # what failed, for the failing target only
    build = [k for k in values if k[0] == "cdcwatch_build_info"]
    assert len(build) == 1 and dict(build[0][1])["version"] == __import__("cdcwatch").__version__
    exporter.close()


def test_hung_target_returns_within_deadline_and_is_not_started_twice():
    """A second scrape joins the hung collection under its own deadline instead of starting another."""
    deadline = 0.3
    release, finished = threading.Event(), threading.Event()

    def hang():
        release.wait(30)
        finished.set()
        return ok()

    hung = FakeCollector("hung", hang)
    exporter = Exporter([ScheduledCollector(hung, deadline), ScheduledCollector(FakeCollector("good", ok), deadline)])
    for _ in range(2):
        started = time.monotonic()
        results = {r.target: r for r in exporter.scrape()}
        assert deadline <= time.monotonic() - started and not finished.is_set()  # its deadline, not the hang
        assert not results["hung"].up and results["hung"].failure is FailureKind.TIMEOUT
        assert str(results["hung"].error).startswith(f"hung: timed out: no answer within {deadline:g}s; check ")
        assert results["good"].up
    assert hung.calls == 1
    release.set()
    assert finished.wait(5)
    assert {r.target: r.up for r in exporter.scrape()}["hung"]
    exporter.close()


def test_a_scrape_waits_for_no_target_past_the_timeout_prometheus_sends():
    """Prometheus says its scrape timeout in a header: a target slower than it is `up 0` in an answer that comes
    before that timeout, the other targets served, instead of the whole scrape failing at Prometheus' end."""
    release = threading.Event()
    hung = FakeCollector("hung", lambda: (release.wait(30), ok())[1])
    exporter = Exporter([ScheduledCollector(hung, 10), ScheduledCollector(FakeCollector("good", ok), 10)])
    app = build_app(exporter)
    environ = {"PATH_INFO": "/metrics", "HTTP_X_PROMETHEUS_SCRAPE_TIMEOUT_SECONDS": "1.5"}
    setup_testing_defaults(environ)
    statuses: list[str] = []
    try:
        started = time.monotonic()
        body = b"".join(app(environ, lambda status, headers: statuses.append(status)))
        took = time.monotonic() - started
        # 1.5 s less a tenth left to render and send the answer, not the target's 10 s deadline (a real Prometheus
        # times the whole answer against its timeout in tests/integration/test_prometheus_scrape.py)
        assert math.isclose(budget_of("1.5") or 0, 1.35) and 1.35 <= took < 10
        values = parse(body.decode())
        assert statuses == ["200 OK"]
        assert values[("cdcwatch_up", frozenset({"collector": "debezium", "target": "hung"}.items()))] == 0.0
        assert values[("cdcwatch_up", frozenset({"collector": "debezium", "target": "good"}.items()))] == 1.0
        failure = {"collector": "debezium", "target": "hung", "failure": "timeout"}
        assert values[("cdcwatch_target_failure_info", frozenset(failure.items()))] == 1.0
    finally:
        release.set()
        exporter.close()


def test_the_scrape_timeout_shortens_a_target_deadline_and_never_lengthens_it():
    release = threading.Event()
    exporter = Exporter([ScheduledCollector(FakeCollector("hung", lambda: (release.wait(30), ok())[1]), 0.3)])
    try:
        for budget in (None, 20.0):
            with scrape_budget(budget):
                started = time.monotonic()
                [result] = exporter.scrape()
            assert 0.3 <= time.monotonic() - started < 10 and not result.up  # its deadline, not the 30 s hang
            assert str(result.error).startswith("hung: timed out: no answer within 0.3s; check ")
        with scrape_budget(0.2):
            [result] = exporter.scrape()
        assert result.failure is FailureKind.TIMEOUT
        assert result.error == ("hung: timed out: no answer within 0.2s, what the scraper's own timeout leaves (the "
                                "target's timeout_seconds is 0.3); raise Prometheus' scrape_timeout above the target's "
                                "timeout_seconds (the collection goes on meanwhile, and the next scrape waits for it)")
    finally:
        release.set()
        exporter.close()


def test_the_budget_leaves_half_a_second_or_a_tenth_of_the_timeout_and_ignores_a_bad_header():
    assert budget_of("10") == 9.5
    assert math.isclose(budget_of("1") or 0, 0.9)
    assert math.isclose(budget_of("0.2") or 0, 0.18)
    for header in (None, "", "soon", "0", "-3", "nan", "inf"):
        assert budget_of(header) is None, header


def test_one_log_line_per_state_change(caplog):
    state = {"up": False}

    def flapping():
        if not state["up"]:
            raise OSError("down")
        return ok()

    exporter = Exporter([ScheduledCollector(FakeCollector("flap", flapping), 1)])
    with caplog.at_level(logging.INFO, logger="cdcwatch"):
        for up in (False, False, False, True, True, False):
            state["up"] = up
            exporter.scrape()
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["target flap (debezium) is down: flap: failed: down", "target flap (debezium) is up again",
                        "target flap (debezium) is down: flap: failed: down"]
    exporter.close()


def test_concurrent_scrapes_coalesce_onto_one_collection():
    waiting = threading.Semaphore(0)

    class Watched(Exporter):
        def _await(self, *args):  # a scrape has found (or started) its collection and now waits for it
            waiting.release()
            return super()._await(*args)

    gate = threading.Event()
    slow = FakeCollector("slow", lambda: gate.wait(5) and ok())
    exporter = Watched([ScheduledCollector(slow, 5)])
    registry = registry_for(exporter)
    outputs = []
    scrapers = [threading.Thread(target=lambda: outputs.append(generate_latest(registry))) for _ in range(4)]
    for scraper in scrapers:
        scraper.start()
    for _ in scrapers:  # all four wait on a collection before it may finish
        assert waiting.acquire(timeout=5)
    gate.set()
    for scraper in scrapers:
        scraper.join(10)
    assert slow.calls == 1
    assert len(outputs) == 4
    for output in outputs:  # every scraper saw the target up, each sample exactly once
        assert output.count(b'cdcwatch_debezium_connected{target="good"} 1.0') == 1
        assert b'cdcwatch_up{collector="debezium",target="slow"} 1.0' in output
    exporter.close()


def test_concurrency_limit_bounds_collections_running_at_once():
    running, most = [0], [0]
    lock = threading.Lock()

    def tracked():
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        return ok()

    collectors = [ScheduledCollector(FakeCollector(f"t{i}", tracked), 5) for i in range(6)]
    exporter = Exporter(collectors, max_concurrency=2)
    results = exporter.scrape()
    assert all(r.up for r in results) and most[0] == 2
    exporter.close()


def test_series_beyond_the_cap_are_dropped_counted_and_logged_once(caplog):
    def many():
        builder = FamilyBuilder()
        for table in range(30):
            builder.add_spec(TABLE_EVENTS, 1.0, table=f"t{table}")
        return Collection(builder.families())

    exporter = Exporter([ScheduledCollector(FakeCollector("wide", many), 5)], max_series=10)
    values = scrape_values(registry_for(exporter))
    assert sum(1 for (name, _), _v in values.items() if name == "cdcwatch_debezium_table_events_total") == 10
    dropped = ("cdcwatch_series_dropped_total", frozenset({("collector", "debezium"), ("target", "wide")}))
    assert values[dropped] == 20
    exporter.scrape()
    assert scrape_values(registry_for(exporter))[dropped] == 60
    warnings = [r.getMessage() for r in caplog.records if "max_series_per_target" in r.getMessage()]
    assert len(warnings) == 1 and "wide" in warnings[0] and "30 series" in warnings[0]
    exporter.close()


def test_rendered_series_beyond_the_cap_are_cut_as_lines_without_parsing_them():
    """A rendered family (a large Kafka cluster's per-partition series) is cut to its first lines: parsing 400,000
    lines into samples to cut them took a scrape of 100,000 group partitions past any scrape timeout."""
    def wide():
        builder = FamilyBuilder()
        builder.add_spec(TABLE_EVENTS, 1.0, table="first")
        rendered = builder.rendered(PARTITION_LAG)
        rendered.lines.extend(f'cdcwatch_test_partition_lag{{partition="{p}"}} {p}.0\n' for p in range(30))
        return Collection(builder.families())

    exporter = Exporter([ScheduledCollector(FakeCollector("wide", wide), 5)], max_series=10)
    [result] = exporter.scrape()
    [events, lag] = result.collection.families
    assert isinstance(lag, RenderedFamily) and lag._samples is None  # cut as lines, never parsed
    assert lag.lines == [f'cdcwatch_test_partition_lag{{partition="{p}"}} {p}.0\n' for p in range(9)]
    values = scrape_values(registry_for(exporter))
    assert sorted(labels for (name, labels), _v in values.items() if name == "cdcwatch_test_partition_lag") == sorted(
        frozenset({("partition", str(p))}) for p in range(9))
    exporter.close()
