"""A reload hands what a collector learned to its replacement while the target's configuration is unchanged
(Exporter.replace), and never when it changed: here the hand-offs where a real server adds nothing, the Debezium
collector's JMX client and the reconciliation's suspects. tests/integration/test_reload_state.py has the others."""

from __future__ import annotations

from collections.abc import Sequence

from cdcwatch.debezium import DebeziumCollector
from cdcwatch.exporter import Exporter, ScheduledCollector
from cdcwatch.jmx import JmxQuery, MBean
from cdcwatch.reconcile import ReconcileCollector
from cdcwatch.validation import parse_config
from devstack.procs import wait_for
from tests.unit.test_reconcile import Clock, MemorySide, config


class _Client:
    """A JMX client that counts the connections it would make (one, at its first query)."""

    def __init__(self) -> None:
        self.connected = self.closed = False

    def query(self, pattern: str, attributes: Sequence[str]) -> list[MBean]:
        return self.query_many([(pattern, attributes)])[0]

    def query_many(self, queries: Sequence[JmxQuery]) -> list[list[MBean]]:
        self.connected = True
        return [[] for _ in queries]

    def close(self) -> None:
        self.closed = True


def test_the_debezium_collector_keeps_its_jmx_connection_over_a_reload() -> None:
    [target] = parse_config("debezium:\n  - name: jvm\n    jmx: {host: 127.0.0.1, port: 9010}\n").debezium
    warm, fresh = _Client(), _Client()
    before, after = DebeziumCollector(target, warm), DebeziumCollector(target, fresh)
    before.collect()
    exporter = Exporter([ScheduledCollector(before, 5, target)])
    exporter.replace([ScheduledCollector(after, 5, target)])
    after.collect()
    assert not fresh.connected  # the connection already made, its listings and JVM constants, are used
    wait_for(lambda: fresh.closed, 5, "the replaced collector to close the unused client")
    assert not warm.closed
    exporter.close()
    assert warm.closed


def _confirmed_pair(settings: dict[str, object]) -> tuple[ReconcileCollector, Clock]:
    """A pair's collector whose comparison has confirmed one row missing in the target and suspects another."""
    clock = Clock()
    collector = ReconcileCollector(config(**settings), MemorySide({1: 10, 2: 20, 3: 30}),  # type: ignore[arg-type]
                                   MemorySide({2: 20, 3: 31}))  # type: ignore[arg-type]
    collector.reconciler.clock = collector.reconciler.wall = clock
    collector.reconciler.run_pass()
    for _ in range(2):  # confirm_rechecks: 2, settle_seconds: 10
        clock.now += 10
        collector.reconciler.recheck_due()
    collector.reconciler.sides["target"].rows[4] = 40  # type: ignore[attr-defined]
    collector.reconciler.run_pass()  # key 4: extra, suspected only
    return collector, clock


def _successor(settings: dict[str, object], clock: Clock) -> ReconcileCollector:
    collector = ReconcileCollector(config(**settings), MemorySide({}), MemorySide({}))  # type: ignore[arg-type]
    collector.reconciler.clock = collector.reconciler.wall = clock
    return collector


def test_the_reconciliation_keeps_its_divergences_and_suspects_over_a_reload() -> None:
    before, clock = _confirmed_pair({})
    state = before.reconciler.state()
    assert state.diverged == {"missing": 1, "extra": 0, "different": 1} and state.suspects == 1
    after = _successor({}, clock)
    exporter = Exporter([ScheduledCollector(before, 2, before.config)])
    exporter.replace([ScheduledCollector(after, 2, after.config)])
    assert after.reconciler.state() == state
    assert after.reconciler.suspects[4].first_seen == before.reconciler.suspects[4].first_seen
    exporter.close()


def test_a_changed_configuration_hands_nothing_on() -> None:
    before, clock = _confirmed_pair({})
    changed = _successor({"settle_seconds": 20}, clock)
    exporter = Exporter([ScheduledCollector(before, 2, before.config)])
    exporter.replace([ScheduledCollector(changed, 2, changed.config)])
    state = changed.reconciler.state()
    assert sum(state.diverged.values()) == 0 and state.suspects == 0 and state.chunks_checked == 0
    exporter.close()


def test_the_replaced_comparison_stops_when_its_state_is_handed_on() -> None:
    """Once its suspects are copied, the old pair's thread must neither read the sides beside the new one nor learn
    anything that would be lost: it is told to stop at the hand-over."""
    before, clock = _confirmed_pair({})
    after = _successor({}, clock)
    after.inherit(before)
    assert before._stop.is_set()
    assert after.reconciler.state().diverged == before.reconciler.state().diverged
