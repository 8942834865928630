"""A reload during a slow collection: the collector replaced is still collecting when its successor is handed what it
learned. The hand-over waits for that collection, so its readings and counts reach the successor exactly once, the
successor never collects at the same time, the old collection writes nothing the successor reads, and the old
collector closes only once its collection has ended. Events order every step; nothing sleeps."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from cdcwatch.collection import Collection
from cdcwatch.exporter import Exporter, ScheduledCollector
from cdcwatch.families import FamilyBuilder
from cdcwatch.kafka import KafkaCollector
from cdcwatch.reload import ConfigReloader
from cdcwatch.specs import MetricSpec
from cdcwatch.validation import load_config
from devstack.procs import wait_for
from devstack.samples import Values, parse, value
from tests.stand_ins import KafkaStandIn

KAFKA_CONFIG = """\
kafka:
  - name: k
    bootstrap_servers: 127.0.0.1:1
    max_partitions: 1
    freshness: false
    timeout_seconds: 60
    committed_offsets: true
    status: {window_samples: 3, per_partition: true}
"""
"""Two partitions of one topic, the group commits in both: the first is reported, the second dropped and counted
(cdcwatch_kafka_series_dropped_total grows by one a collection). A deadline far beyond the test's steps."""


class Watched(Exporter):
    """Tells when a scrape has found (or started) its collections and now waits for them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.waiting = threading.Semaphore(0)

    def _await(self, *args: Any) -> Any:
        self.waiting.release()
        return super()._await(*args)


def scrape(exporter: Exporter) -> Values:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(exporter)
    return parse(generate_latest(registry).decode())


class Scrape(threading.Thread):
    """A scrape on its own thread, as concurrent HTTP requests make them."""

    def __init__(self, exporter: Exporter) -> None:
        super().__init__(daemon=True)
        self.exporter = exporter
        self.values: Values = {}

    def run(self) -> None:
        self.values = scrape(self.exporter)

    def result(self) -> Values:
        self.join(30)
        assert not self.is_alive()
        return self.values


def kafka_figures(values: Values) -> tuple[float | None, ...]:
    """Committed offset, status code, dropped group partitions (counter), message reads (broker, cache), up."""
    where = {"target": "k", "group": "g", "topic": "t", "partition": "0"}
    return (value(values, "cdcwatch_kafka_consumergroup_committed_offset", **where),
            value(values, "cdcwatch_kafka_consumergroup_status_code", **where),
            value(values, "cdcwatch_kafka_series_dropped_total", target="k"),
            value(values, "cdcwatch_kafka_message_reads_total", target="k", source="broker"),
            value(values, "cdcwatch_kafka_message_reads_total", target="k", source="cache"),
            value(values, "cdcwatch_up", collector="kafka", target="k"))


def test_a_reload_during_a_slow_kafka_collection_loses_and_doubles_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    cluster = KafkaStandIn()
    cluster.install(monkeypatch)
    now = time.time()
    cluster.produce("t", 0, 10, 0.0)  # without a time: the lag in seconds comes from the end offsets' history
    cluster.produce("t", 1, 10, now - 60)
    cluster.commit("g", {("t", 0): 2, ("t", 1): 2})
    path = tmp_path / "cdcwatch.yml"
    path.write_text(KAFKA_CONFIG, encoding="utf-8")
    config = load_config(path)
    exporter = Watched.from_config(config)
    reloader = ConfigReloader(path, exporter, config)
    [old] = [s.collector for s in exporter._collectors]
    assert isinstance(old, KafkaCollector)

    with caplog.at_level(logging.INFO):  # (the reload sets the root logger's level: put back afterwards)
        # committed offset, status (OK), dropped, reads from the broker and from the cache, up
        assert kafka_figures(scrape(exporter)) == (2, 0, 1, 1, 0, 1)
        cluster.commit("g", {("t", 0): 3})
        assert kafka_figures(scrape(exporter)) == (3, 0, 2, 2, 0, 1)
        [first_end] = old.history[("t", 0)].samples

        # a slow collection: its commits were read (3), the answer takes its time
        cluster.hold_commits()
        exporter.waiting = threading.Semaphore(0)  # (the scrapes so far are done)
        slow = Scrape(exporter)
        slow.start()
        assert cluster.held.wait(30) and exporter.waiting.acquire(timeout=30)
        cluster.commit("g", {("t", 0): 5})  # meanwhile the group moves on, and two messages more come
        cluster.produce("t", 0, 2, now - 30)
        assert reloader.reload()  # the file unchanged: the new collector is handed what the old one learned
        [new] = [s.collector for s in exporter._collectors]
        assert isinstance(new, KafkaCollector) and new is not old
        after = Scrape(exporter)
        after.start()
        assert exporter.waiting.acquire(timeout=30)  # the scrape after the reload has its collection
        # the old collection ends last: after the new collector's first collection was held for the hand-over,
        # or, where a scheduler lets it run at once, after that collection ended
        if "handed on once that collection ends" not in caplog.text:
            after.join(30)
        assert not old.messages.consumer.closed  # type: ignore[attr-defined]
        cluster.release.set()

        # the scrape that started before the reload gets the old collection: the commits as it read them
        assert kafka_figures(slow.result()) == (3, 0, 3, 2, 1, 1)
        # the first scrape after the reload: read after it, with every count of the old collection carried once
        assert kafka_figures(after.result()) == (5, 0, 4, 3, 1, 1)
        # and its window holds the samples in the order they were read (a stale one after it would be a REWIND)
        row = new.kept["g"][("t", 0)]
        assert row.window is not None and [s.committed for s in row.window.samples] == [3, 3, 5]
        assert kafka_figures(scrape(exporter)) == (5, 0, 5, 3, 2, 1)
        assert [s.committed for s in row.window.samples] == [3, 5, 5]
        # the end offset's history is not started over by a stale, smaller end read before the reload
        history = list(new.history[("t", 0)].samples)
        assert history[0] == first_end and [end for _, end in history] == [10, 12]

        wait_for(lambda: old.messages.consumer.closed, 10, "the replaced collector to close its consumer")  # type: ignore[attr-defined]
        assert cluster.violations == []  # no call into a closed client, no close during a call
        assert not new.messages.consumer.closed  # type: ignore[attr-defined]
        with pytest.raises(RuntimeError, match="replaced or closed"):
            old.collect()  # retired: it can write nothing the new collector reads
    exporter.close()


# --- the scheduler, for every collector kind with an `inherit` -----------------------------------------------------

COLLECTIONS = MetricSpec("cdcwatch_connect_connectors", "gauge", "h")


class Learning:
    """A collector whose counter carries on over reloads, as the Connect collector's restart counts and the
    Debezium and Connect collectors' JMX connections do; each step is logged in `timeline`."""

    kind = "connect"

    def __init__(self, name: str, timeline: list[str], gate: threading.Event | None = None) -> None:
        self.name, self.target, self.timeline, self.gate = name, "w", timeline, gate
        self.collections = 0
        self.collecting = threading.Event()
        """Set once a collection has begun."""

    def collect(self) -> Collection:
        self.timeline.append(f"{self.name} collects")
        self.collecting.set()
        if self.gate is not None:
            assert self.gate.wait(30)
        self.collections += 1
        self.timeline.append(f"{self.name} collected")
        builder = FamilyBuilder()
        builder.add_spec(COLLECTIONS, float(self.collections), {"target": "w"})
        return Collection(builder.families())

    def inherit(self, previous: Learning) -> None:
        self.timeline.append(f"{self.name} inherits {previous.name}")
        self.collections = previous.collections

    def close(self) -> None:
        self.timeline.append(f"{self.name} closed")


def scheduled(collector: Learning, timeout: float = 30) -> ScheduledCollector:
    return ScheduledCollector(collector, timeout, config={"worker": "w"})  # type: ignore[arg-type]


def counted(results: list[Any]) -> float:
    [result] = results
    assert result.up, result.error
    return float(result.collection.families[0].samples[0].value)


def test_the_successor_of_a_collecting_collector_inherits_after_that_collection_and_only_then_collects() -> None:
    timeline: list[str] = []
    gate = threading.Event()
    old = Learning("old", timeline)
    exporter = Watched([scheduled(old)])
    assert counted(exporter.scrape()) == 1
    assert exporter.waiting.acquire(timeout=30)
    old.gate = gate
    old.collecting.clear()
    slow = threading.Thread(target=exporter.scrape, daemon=True)
    slow.start()
    assert old.collecting.wait(30) and exporter.waiting.acquire(timeout=30)
    new = Learning("new", timeline)
    exporter.replace([scheduled(new)])
    results: list[Any] = []
    after = threading.Thread(target=lambda: results.extend(exporter.scrape()), daemon=True)
    after.start()
    assert exporter.waiting.acquire(timeout=30)
    # the old collection under way: the new collector neither inherited nor collected yet
    assert timeline == ["old collects", "old collected", "old collects"]
    gate.set()
    after.join(30)
    slow.join(30)
    assert counted(results) == 3  # both collections of the old collector counted, once each
    wait_for(lambda: "old closed" in timeline, 10, "the replaced collector to close")
    # handed on after the old collection, collected after the hand-over; closed after both (the new collection
    # and the close of the old collector go on side by side)
    assert timeline[:5] == ["old collects", "old collected", "old collects", "old collected", "new inherits old"]
    assert sorted(timeline[5:]) == ["new collected", "new collects", "old closed"]
    assert timeline.index("new collects") < timeline.index("new collected")
    exporter.close()


def test_two_reloads_during_one_slow_collection_hand_everything_on_in_order() -> None:
    timeline: list[str] = []
    gate = threading.Event()
    old = Learning("old", timeline, gate)
    exporter = Watched([scheduled(old)])
    slow = threading.Thread(target=exporter.scrape, daemon=True)
    slow.start()
    assert old.collecting.wait(30)
    middle, new = Learning("middle", timeline), Learning("new", timeline)
    exporter.replace([scheduled(middle)])
    exporter.replace([scheduled(new)])  # before `middle` got anything, or collected
    gate.set()
    slow.join(30)
    assert counted(exporter.scrape()) == 2
    inherited = [step for step in timeline if "inherits" in step]
    assert inherited == ["middle inherits old", "new inherits middle"] and middle.collections == 1
    exporter.close()


def test_a_collection_still_running_at_its_deadline_hands_nothing_on(caplog: pytest.LogCaptureFixture) -> None:
    """A hung target: the successor starts afresh at the deadline, and the hung collection, ending later, changes
    nothing of it."""
    timeline: list[str] = []
    gate = threading.Event()
    old = Learning("old", timeline, gate)
    exporter = Watched([scheduled(old, timeout=0.2)])
    hung = threading.Thread(target=exporter.scrape, daemon=True)
    hung.start()
    assert old.collecting.wait(30)
    new = Learning("new", timeline)
    with caplog.at_level(logging.WARNING, logger="cdcwatch"):
        exporter.replace([scheduled(new, timeout=0.2)])
        hung.join(30)  # (its scrape gave up at the deadline)
        wait_for(lambda: [r for r in exporter.scrape() if r.up], 10, "the successor to collect")
    assert "new inherits old" not in timeline and new.collections >= 1
    assert "still collecting at its deadline" in caplog.text
    collected = new.collections
    gate.set()
    wait_for(lambda: "old closed" in timeline, 10, "the hung collector to close once its collection ended")
    assert new.collections == collected and old.collections == 1
    exporter.close()
