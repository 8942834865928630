"""Faults the demo can inject, each with the alert it must raise, and the client that runs one.

`scripts/demo --scenario NAME` finds the running demo through `demo.json`, asks it to inject the
fault, waits for the expected alert's notification at the webhook (alerts.log), asks it to recover,
waits for the resolved notification, and reports every notification with its delay next to the
floor Prometheus sets (scrape interval + evaluation interval + the alert's `for`).
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from devstack.demo_settings import (
    APPLY_LAG_THRESHOLD_SECONDS,
    APPLY_RATE,
    CHANGES_TOPIC,
    COMMIT_GROUP,
    CONNECTOR,
    MIXINS,
    QUIET_EVALUATIONS,
    RECONCILE_CONFIRM_RECHECKS,
    RECONCILE_PAIR,
    RECONCILE_SETTLE_SECONDS,
    SCHEMA_DRIFT_SECONDS,
    SCRAPE_INTERVAL,
    SERVER,
    SIGNAL_TABLE,
    SINK_CONNECTOR,
    SLOT,
    SNAPSHOT_TABLE,
    SPARK_FRESHNESS_SECONDS,
)
from devstack.samples import Values, largest, parse, total

__all__ = ["SCENARIOS", "Scenario", "ScenarioReport", "kill_connect_between_flushes", "restart_connect_with_replay",
           "run_scenario"]


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    alert: str | None
    """The alert the fault must raise; None: a fault the pipeline must ride out without a page."""
    labels: dict[str, str]
    inject: Callable[[Any], float | None]
    """Injects the fault; returns when it happened (None: now)."""
    recover: Callable[[Any], None]
    settle_seconds: float = 0.0
    """How long the fault must last before the alert's condition can hold (a status window, lag building up)."""
    late_seconds: Callable[[str], float] | None = None
    """What the alert may take beyond its floor for a reason the scenario measures (given Prometheus' URL, read at
    the injection): the floor is the earliest the condition can hold, not the latest."""
    states: tuple[tuple[str, str], ...] = ()
    """(stage, state) the demo pipeline's freshness state must take while the fault lasts."""
    quiet: tuple[str, ...] = ()
    """Alerts that must neither notify nor be pending once the pipeline flows again after the fault."""
    covered: tuple[str, ...] = ()
    """Alerts the fault would raise too that must not notify: the scenario's alert covers them."""
    covered_firing: tuple[str, ...] = ()
    """Of those, the ones that must fire in Prometheus for the same `server` while the fault lasts: an inhibition,
    not a quiet rule, keeps them from paging."""
    check: Callable[[Any], dict[str, Any]] | None = None
    """For a scenario without an alert (`alert` None): run in the demo between inject and recover, it checks what a
    user must see and returns the figures it checked (an AssertionError says what did not hold)."""
    sinks: tuple[str, ...] = ("spark",)
    """The demo's shapes the fault is injected in (`scripts/demo --sink`): what applies the changes to the target."""
    more_pages: str = ""
    """Why this fault can page more than once yet (a known gap, said in the runbook's fault matrix): its pages are
    not checked. Empty: they are, on every run."""
    stale_page: str = ""
    """For a fault that only delays the pipeline: the alert that pages, and only it, once the delay outlasts the
    target's freshness threshold (data that stale is the page's own cause: how long it lasts depends on how fast the
    machine drains it). Empty: the fault never pages beyond `pages`."""

    @property
    def pages(self) -> frozenset[str]:
        """The critical alerts this fault notifies from its start to its alert's resolution: its alert if critical,
        none for a fault that only degrades the pipeline (a warning) or is ridden out."""
        return frozenset({self.alert}) if self.alert is not None and _severity(self.alert) == "critical" else frozenset()


SLACK_SECONDS = 10.0
"""Allowed beyond the floor: the phase of Prometheus' scrape and evaluation ticks, Alertmanager's group_wait
(1 s) and the webhook, on a busy 2-core machine."""
EARLY_SLACK_SECONDS = 0.5
"""Allowed before the earliest moment: Prometheus stamps a sample when its scrape starts, while the fault is timed
when its injection returns, so a sample stamped just before the fault may already show it (seen: 12 ms early)."""


def _changes_beyond(stack: Any, offset: int) -> bool:
    return bool(stack.broker.end_offset(CHANGES_TOPIC) >= offset)


def _seconds_since(start: float, seconds: float) -> bool:
    return time.monotonic() - start >= seconds


def kill_connect_between_flushes(stack: Any, attempts: int = 3, after_flush: float = 0.0) -> float:
    """kill -9 the worker once changes reached Kafka after its last offset flush: those are re-delivered.

    The kill must fall between two flushes; when a flush slips in first (a busy machine), the worker runs on and
    the next flush is awaited: one kill, one outage, whatever the attempts.
    `after_flush`: at least this many seconds of changes after the flush are re-delivered.
    """
    from devstack.procs import StackError, wait_for

    interval = stack.connect.offset_flush_ms / 1000
    for _ in range(attempts):
        flushed, seen = stack.connect.next_offset_flush(interval * 3), time.monotonic()
        written = stack.broker.end_offset(CHANGES_TOPIC)
        try:
            wait_for(partial(_changes_beyond, stack, written + 10), interval / 2, "ten changes in Kafka after the flush")
            wait_for(partial(_seconds_since, seen, after_flush), interval / 2, f"{after_flush:g}s of changes")
        except StackError:
            continue  # the connector is slow right now: try after the next flush
        if time.monotonic() - seen > max(interval / 2, after_flush + 2):
            continue
        frozen = time.time()  # the outage starts as the worker is frozen, before the kill and its exit
        if stack.connect.kill_unless_flushed_since(flushed):
            return frozen
    raise RuntimeError(f"no kill fell between two offset flushes in {attempts} attempts: nothing to re-deliver")


REPLAYED_SECONDS = 10.0
"""The restart scenario re-delivers at least this many seconds of changes."""


def _apply_readings(stack: Any) -> tuple[float, float, float] | None:
    """(duplicates counted, when the last batch was applied, its oldest change's commit time by the apply lag)."""
    values = parse(stack.apply.metrics())
    duplicates = total(values, "cdcwatch_spark_duplicates_total")
    progress = total(values, "cdcwatch_spark_last_progress_timestamp_seconds")
    lag = total(values, "cdcwatch_spark_apply_lag_seconds", percentile="max")
    if duplicates is None or progress is None or lag is None:
        return None
    return duplicates, progress, progress - lag


def restart_connect_with_replay(stack: Any) -> float:
    """kill -9 the worker at least REPLAYED_SECONDS after its last offset flush and start it again at once: those
    changes are re-delivered. Watches every batch the apply job reports until the replay is counted as duplicates
    and three batches more: the apply lag of none may reach back to a re-delivered change (committed before the
    kill), only to the changes written since (a change is captured and shipped within seconds)."""
    from devstack.procs import wait_for

    before = _apply_readings(stack)
    duplicates_before = before[0] if before else 0.0
    killed = kill_connect_between_flushes(stack, after_flush=REPLAYED_SECONDS)
    stack.connect.start()
    oldest: dict[float, float] = {}  # batch applied at → its oldest change counted in the apply lag
    counted: list[float] = []

    def replay_applied() -> bool:
        reading = _apply_readings(stack)
        if reading is None:
            return False
        duplicates, progress, oldest_commit = reading
        if progress > killed:
            oldest[progress] = oldest_commit
        if duplicates > duplicates_before and not counted:
            counted.append(progress)
        return bool(counted) and len([p for p in oldest if p > counted[0]]) >= 3

    wait_for(replay_applied, 120, "the replay to be applied", interval=0.1)
    reaching_back = {round(p - killed, 1): round(killed - o, 1) for p, o in oldest.items() if o < killed - REPLAYED_SECONDS / 2}
    if reaching_back:
        raise RuntimeError(f"the apply lag counted re-delivered changes: batches applied (s after the kill) → how far "
                           f"before the kill their oldest counted change was committed (s): {reaching_back}")
    return killed


def _signal_apply(signum: int) -> Callable[[Any], None]:
    def send(stack: Any) -> None:
        os.killpg(stack.apply.process.pid, signum)
    return send


_DEBEZIUM_CONNECTED = f'cdcwatch_debezium_connected{{server="{SERVER}", context="streaming"}} == 1'
_SOURCE_DOWN = 'cdcwatch_up{collector="postgres", target="source"} == 0'


def _stop_source(stack: Any) -> float:
    """Stop the source; the fault starts when the shutdown does (the server refuses new connections from then on),
    not when `pg_ctl stop` returns: that waits for the walsenders to send what is left, seconds on a loaded machine.
    Returns once Prometheus saw Debezium's beans stop saying connected, for `_disconnect_late_seconds` to measure."""
    from devstack.procs import wait_for

    started = time.time()
    stack.source.stop()
    wait_for(lambda: _query(stack.prometheus.url, f"max({_DEBEZIUM_CONNECTED})") is None, 120,
             "Debezium's beans to stop saying connected", interval=0.5)
    return started


def _disconnect_late_seconds(prometheus: str) -> float:
    """Beyond cdcwatch's first failed scrape of the source, the unreachable source's alert holds once Debezium's beans
    stop saying connected: the connector notices the lost connection, and its task restarts, seconds later. That
    delay as Prometheus saw it (from the source's first `up 0` to the first scrape after the last `connected 1`)."""
    interval = float(SCRAPE_INTERVAL.rstrip("s"))
    down = _query(prometheus, f"min_over_time(timestamp({_SOURCE_DOWN})[2m:1s])")
    connected = _query(prometheus, f"max_over_time(timestamp({_DEBEZIUM_CONNECTED})[2m:1s])")
    return 0.0 if down is None or connected is None else max(connected + interval - down, 0.0)


def _stop_apply_after_a_commit(signum: int) -> Callable[[Any], float]:
    """SIGSTOP (freeze) or SIGKILL the apply job as soon as its group's committed offsets move: its offsets stood
    still from that commit. Signalled at an arbitrary moment, the last commit may lie a whole micro-batch before the
    signal (seconds on a loaded machine), and the status window could show the standing offset that much sooner."""
    def stop(stack: Any) -> float:
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka.admin import AdminClient

        from devstack.procs import wait_for

        admin = AdminClient({"bootstrap.servers": stack.broker.bootstrap, "log_level": 0})

        def committed() -> dict[tuple[str, int], int]:
            listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(COMMIT_GROUP)])[COMMIT_GROUP]
            return {(tp.topic, tp.partition): tp.offset for tp in listed.result(timeout=5).topic_partitions}

        before = committed()
        wait_for(lambda: committed() != before, 60, f"the next commit of group {COMMIT_GROUP}", interval=0.05)
        stopped = time.time()
        os.killpg(stack.apply.process.pid, signum)
        if signum == signal.SIGKILL:
            stack.apply.process.wait(30)
        return stopped
    return stop


def _burst(stack: Any) -> None:
    stack.traffic.burst(APPLY_RATE * 40)


# --- snapshot: an incremental snapshot through the signal table ------------------------------------------

_SNAPSHOTTED = SNAPSHOT_TABLE


def _scraped(url: str) -> Values:
    with urllib.request.urlopen(url, timeout=10) as response:
        return parse(response.read().decode())


def _signal(stack: Any, *signals: tuple[str, dict[str, Any]]) -> None:
    """Insert Debezium signals into the signal table, in one transaction: the connector reads them in this order."""
    rows = ", ".join(f"('{kind}-{time.time_ns()}-{i}', '{kind}', '{json.dumps(data)}')" for i, (kind, data) in enumerate(signals))
    stack.source.sql(f"INSERT INTO {SIGNAL_TABLE} VALUES {rows}")


def _start_snapshot(stack: Any) -> float:
    """Signal an incremental snapshot of the orders table and, in the same transaction, its pause: Debezium reads
    the first chunk when it reads the execute-snapshot signal, then pauses before the next one. The snapshot stays
    at its first chunk (SNAPSHOT_CHUNK_ROWS of SNAPSHOT_TABLE_ROWS rows) until the check resumes it, however fast
    or loaded the machine (the traffic writes customers meanwhile)."""
    stack.scenario_baseline = {"rows_scanned": largest(_scraped(stack.info["metrics"]), "cdcwatch_debezium_snapshot_rows_scanned_total",
                                                       server=SERVER, table=_SNAPSHOTTED) or 0.0, "resumed": 0.0}
    _signal(stack, ("execute-snapshot", {"data-collections": [_SNAPSHOTTED], "type": "incremental"}),
            ("pause-snapshot", {"type": "incremental"}))
    stack.scenario_baseline["signalled"] = time.time()
    return stack.scenario_baseline["signalled"]


def _resume_snapshot(stack: Any) -> None:
    if not stack.scenario_baseline.get("resumed"):
        stack.scenario_baseline["resumed"] = time.time()
        _signal(stack, ("resume-snapshot", {"type": "incremental"}))


_PROGRESS = {"progress_ratio": "table:cdcwatch_debezium_snapshot_progress:ratio{%(table)s} > 0 < 1",
             "rows_per_second": "table:cdcwatch_debezium_snapshot_rows_scanned:rate5m{%(table)s} > 0",
             "eta_seconds": "table:cdcwatch_debezium_snapshot_remaining_seconds:estimate{%(table)s} > 0",
             "connector_eta_seconds": "server:cdcwatch_debezium_snapshot_remaining_seconds:estimate{%(server)s} > 0"}
"""What the snapshot's evaluations must show together: progress below 1, a scan rate, the table's and the connector's ETA."""


def _progress_recorded(stack: Any, start: float, end: float) -> list[tuple[float, dict[str, float]]]:
    """Every evaluation from start to end (a range query at the evaluation interval) at which all of _PROGRESS held,
    with their values."""
    from cdcwatch.promapi import PrometheusApi

    api = PrometheusApi(stack.prometheus.url, timeout=10)
    step = float(SCRAPE_INTERVAL.rstrip("s"))
    selectors = {"table": f'server="{SERVER}", table="{_SNAPSHOTTED}"', "server": f'server="{SERVER}"'}
    series: dict[str, dict[float, float]] = {}
    for name, expr in _PROGRESS.items():
        found = api.query_range(expr % selectors, start, max(end, start + step), step)
        series[name] = {float(t): float(v) for result in found[:1] for t, v in result["values"]}
    held = sorted(set.intersection(*(set(values) for values in series.values())))
    return [(t, {name: series[name][t] for name in _PROGRESS}) for t in held]


def check_snapshot(stack: Any) -> dict[str, Any]:
    """The snapshot, paused after its first chunk (and after one more at a time while Prometheus has seen no rise),
    is below 1 with a scan rate and an ETA for the table and the connector in Prometheus (a range query over the
    snapshot so far: any evaluation where all of them held; the pause makes sure there are some). Then it is
    resumed; once Debezium says it completed, the rows it scanned are the table's count(*)."""
    from devstack.procs import wait_for

    started, since = time.monotonic(), stack.scenario_baseline["signalled"]
    metrics, interval = stack.info["metrics"], float(SCRAPE_INTERVAL.rstrip("s"))
    stepped: list[float] = []

    def recorded() -> list[tuple[float, dict[str, float]]] | None:
        held = _progress_recorded(stack, since, time.time())
        if held:
            return held
        # A rate needs the rows scanned to rise between two scrapes. After a worker restart the table's RowsScanned
        # series starts with this snapshot, so its first chunk alone shows none: once Prometheus has scraped the
        # paused count, one more chunk is let through (resume and pause in one transaction: Debezium reads a chunk
        # when it resumes, then pauses again).
        now = largest(_scraped(metrics), "cdcwatch_debezium_snapshot_rows_scanned_total", server=SERVER, table=_SNAPSHOTTED)
        seen = _query(stack.prometheus.url, f'max(cdcwatch_debezium_snapshot_rows_scanned_total{{server="{SERVER}", '
                                            f'table="{_SNAPSHOTTED}"}})')
        if now and seen == now and time.monotonic() - max(stepped, default=0.0) > 2 * interval and len(stepped) < 5:
            _signal(stack, ("resume-snapshot", {"type": "incremental"}), ("pause-snapshot", {"type": "incremental"}))
            stepped.append(time.monotonic())
        return None

    held = wait_for(recorded, 60, "snapshot progress below 1 with a scan rate and an ETA in Prometheus", interval=1)
    paused_scanned = largest(_scraped(metrics), "cdcwatch_debezium_snapshot_rows_scanned_total",
                             server=SERVER, table=_SNAPSHOTTED)
    _resume_snapshot(stack)
    wait_for(lambda: largest(_scraped(metrics), "cdcwatch_debezium_snapshot_state", state="completed", server=SERVER) == 1,
             120, "the incremental snapshot to complete", interval=0.5)
    scanned = largest(_scraped(metrics), "cdcwatch_debezium_snapshot_rows_scanned_total", server=SERVER, table=_SNAPSHOTTED)
    counted = int(stack.source.sql(f"SELECT count(*) FROM {_SNAPSHOTTED}"))
    assert scanned == counted, f"the snapshot scanned {scanned} rows of {_SNAPSHOTTED}; count(*) says {counted}"
    figures = held[0][1]
    held = _progress_recorded(stack, since, time.time()) or held  # over the whole snapshot
    return {**{k: round(v, 3) for k, v in figures.items()}, "evaluations_in_progress": len(held),
            "rows_scanned_before": stack.scenario_baseline["rows_scanned"], "chunks_let_through": len(stepped),
            "rows_scanned_while_paused": paused_scanned,
            "rows_scanned": scanned, "count": counted, "seconds": round(time.monotonic() - started, 1)}


# --- schema-change: a column added to a captured table while traffic flows --------------------------------

_COLUMN = "tier"


def _add_column(stack: Any) -> float:
    stack.scenario_baseline = {"malformed": largest(_scraped(stack.apply.metrics_url), "cdcwatch_spark_malformed_events_total") or 0.0,
                               "erroneous": largest(_scraped(stack.info["metrics"]), "cdcwatch_debezium_erroneous_events_total",
                                                    server=SERVER) or 0.0}
    with stack.traffic.writing:  # no insert between reading the last id and the ALTER
        stack.scenario_baseline["last_id"] = float(stack.source.sql("SELECT max(id) FROM customers"))
        stack.source.sql(f"ALTER TABLE customers ADD COLUMN IF NOT EXISTS {_COLUMN} text DEFAULT 'standard'")
    return time.time()


def _target(stack: Any, statement: str) -> str:
    return str(stack.target.sql(statement))


def check_schema_change(stack: Any) -> dict[str, Any]:
    """The pipeline keeps applying through the ALTER: a row the traffic inserts after it, and a row updated with a
    value of the new column, reach the target with that column; rows not changed since keep their old shape (an
    added column is not a change of every row: it is not backfilled); no event is malformed or erroneous, and the
    connector's task still runs."""
    from devstack.procs import wait_for

    started = time.monotonic()
    stack.source.sql(f"UPDATE customers SET {_COLUMN} = 'gold' WHERE id = (SELECT min(id) FROM customers)")
    updated = stack.source.sql("SELECT min(id) FROM customers")
    # every row reads the default in the source; only those written after the ALTER carry it in their events
    inserted = wait_for(lambda: stack.source.sql(f"SELECT max(id) FROM customers WHERE id > "
                                                 f"{int(stack.scenario_baseline['last_id'])}") or None,
                        30, "the traffic to insert a row after the ALTER", interval=0.5)

    def applied(row_id: str, value: str) -> bool:
        return _target(stack, "SELECT row->>'tier' FROM cdcwatch_apply.rows WHERE table_id = 'postgres.public.customers' "
                              f"AND row_key = '[[\"id\",{row_id}]]'") == value

    wait_for(lambda: applied(updated, "gold") and applied(inserted, "standard"), 60,
             f"rows {updated} (updated) and {inserted} (inserted) with their {_COLUMN} in the target", interval=0.5)
    shapes = _target(stack, "SELECT count(*) FILTER (WHERE row ? 'tier') || ' ' || count(*) FILTER (WHERE NOT row ? 'tier') "
                            "FROM cdcwatch_apply.rows WHERE table_id = 'postgres.public.customers' AND NOT deleted")
    with_column, without = (int(n) for n in shapes.split())
    assert with_column > 0 and without > 0, f"target rows with the column: {with_column}, without: {without}"
    malformed = largest(_scraped(stack.apply.metrics_url), "cdcwatch_spark_malformed_events_total") or 0.0
    erroneous = largest(_scraped(stack.info["metrics"]), "cdcwatch_debezium_erroneous_events_total", server=SERVER) or 0.0
    assert (malformed, erroneous) == (stack.scenario_baseline["malformed"], stack.scenario_baseline["erroneous"]), (
        f"malformed events {stack.scenario_baseline['malformed']} -> {malformed}, "
        f"erroneous {stack.scenario_baseline['erroneous']} -> {erroneous}")
    status = stack.connect.get(f"/connectors/{CONNECTOR}/status")
    assert [t["state"] for t in status["tasks"]] == ["RUNNING"], status
    return {"updated_row": int(updated), "inserted_row": int(inserted), "target_rows_with_column": with_column,
            "target_rows_without_column": without, "malformed_events": malformed, "erroneous_events": erroneous,
            "seconds": round(time.monotonic() - started, 1)}


def _restart_exporter(stack: Any) -> float:
    """Stop `cdcwatch serve` and start it again, as a rollout or a rescheduled pod does."""
    _await_no_page(stack)
    stack.scenario_baseline = {"injected": time.time(), "pid": float(stack.serve.process.pid)}
    stack.serve.stop()
    stack.serve.start()
    return stack.scenario_baseline["injected"]


def _fail_a_scrape(stack: Any) -> float:
    """Freeze `cdcwatch serve` (SIGSTOP) past a scrape's timeout, then let it go on: Prometheus' scrape in between
    fails (`up` 0, and every series of the exporter marked stale) and the next one succeeds."""
    _await_no_page(stack)
    stack.scenario_baseline = {"injected": time.time()}
    interval = float(SCRAPE_INTERVAL.rstrip("s"))
    os.kill(stack.serve.process.pid, signal.SIGSTOP)
    try:
        # a scrape starts within one interval and times out after another (the demo's timeout is its interval); a
        # loaded Prometheus may start it late
        _await_failed_scrape(stack, timeout=10 * interval)
    finally:
        os.kill(stack.serve.process.pid, signal.SIGCONT)
    return stack.scenario_baseline["injected"]


def _await_no_page(stack: Any) -> None:
    """No critical alert pending or firing: what the fault before this one left (a pipeline still catching up after
    an outage) must not count as this fault's."""
    from cdcwatch.promapi import PrometheusApi
    from devstack.procs import wait_for

    api = PrometheusApi(stack.prometheus.url, timeout=10)
    wait_for(lambda: not [a for a in api.alerts() if a["labels"].get("severity") == "critical"], 300,
             "no critical alert pending or firing before the fault", interval=1)


def _failed_scrapes(stack: Any, since: float) -> float:
    """How many of Prometheus' scrapes of the exporter failed since `since` (each an `up` of 0)."""
    up = f'up{{job="cdcwatch"}}[{int(time.time() - since) + 1}s]'
    return _query(stack.prometheus.url, f"count_over_time({up}) - sum_over_time({up})") or 0.0


def _await_failed_scrape(stack: Any, timeout: float) -> None:
    from devstack.procs import wait_for

    wait_for(lambda: _failed_scrapes(stack, stack.scenario_baseline["injected"]) >= 1, timeout,
             "a failed scrape of the exporter", interval=0.2)


def check_no_new_page(stack: Any) -> dict[str, Any]:
    """After a fault of the exporter alone (a restart, a failed scrape), no critical alert that was not already
    active goes pending or fires, through the exporter's return and QUIET_EVALUATIONS evaluations after it. Pending
    counts: the same gap held longer would hold it past its `for` and page for a pipeline that never stopped."""
    from cdcwatch.promapi import PrometheusApi
    from devstack.procs import wait_for

    injected = stack.scenario_baseline["injected"]
    interval = float(SCRAPE_INTERVAL.rstrip("s"))
    api = PrometheusApi(stack.prometheus.url, timeout=10)

    def since(moment: float) -> int:
        return int(time.time() - moment) + 1
    # the exporter is scraped again, then the quiet window's evaluations pass
    back = wait_for(lambda: _query(stack.prometheus.url, 'up{job="cdcwatch"}') == 1.0 and time.time(), 120,
                    "the exporter scraped again", interval=0.5)
    wait_for(lambda: (_query(stack.prometheus.url, f'count_over_time(up{{job="cdcwatch"}}[{since(back)}s])') or 0)
             > QUIET_EVALUATIONS, 60 + QUIET_EVALUATIONS * interval * 4, "the quiet window's scrapes", interval=0.5)
    before = {a["metric"]["alertname"] for a in api.get("/api/v1/query", query='ALERTS{severity="critical"}',
                                                        time=f"{injected - interval:.3f}")["result"]}
    during = {a["metric"]["alertname"] for a in api.query(f'max_over_time(ALERTS{{severity="critical"}}[{since(injected)}s])')}
    assert not during - before, f"critical alerts pending or firing after the fault: {sorted(during - before)}"
    missed = _failed_scrapes(stack, injected)
    restarted = "pid" in stack.scenario_baseline
    if restarted:
        assert stack.serve.process.pid != stack.scenario_baseline["pid"], "the exporter was not restarted"
    else:
        assert missed >= 1, "no scrape failed"
    return {"failed_scrapes": missed, "exporter_restarted": restarted, "critical_alerts_already_active": sorted(before),
            "seconds_until_scraped_again": round(back - injected, 1)}


def _drop_column(stack: Any) -> None:
    stack.source.sql(f"ALTER TABLE customers DROP COLUMN IF EXISTS {_COLUMN}")


# --- slot-runway: the connector paused while WAL is written at a steady rate ------------------------------

_BALLAST = "runway_ballast"
"""A table no publication holds: its WAL is retained by the slot, never streamed."""
_MIB = 1024 * 1024
RUNWAY_WAL_RATE = 2 * _MIB
"""Bytes of WAL a second the slot-runway scenario writes while the connector is paused (the traffic's included)."""
RUNWAY_CAUGHT_UP = 16 * _MIB
"""The slot holds at most this much before the pause (the connector caught up)."""
RUNWAY_CAP = 100 * _MIB
"""The writer holds off while the slot retains this much: far from max_slot_wal_keep_size's 128 MB (`unreserved`, whose
loss alert would inhibit the runway alert), and from filling the disk."""


def _slot_wal(stack: Any) -> tuple[int, int, int]:
    """(current WAL position, WAL the slot retains, its safe_wal_size), in bytes."""
    position, retained, safe = stack.source.sql(
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint || ' ' || "
        "pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint || ' ' || safe_wal_size "
        f"FROM pg_replication_slots WHERE slot_name = '{SLOT}'").split()
    return int(position), int(retained), int(safe)


class _WalWriter:
    """Moves the source's WAL position forward at `rate` bytes a second: every half second, enough 1 kB rows into
    the ballast table to reach where the position is due; idle while the slot retains `cap` or more."""

    ROW_WAL = 1000

    def __init__(self, stack: Any, rate: float, cap: int) -> None:
        import threading

        self.stack, self.rate, self.cap = stack, rate, cap
        self.stop = threading.Event()
        self.readings: list[tuple[float, int, int, int]] = []
        """(when, position, retained, safe) at every tick."""
        self.thread = threading.Thread(target=self.run, name="runway-wal-writer", daemon=True)

    def start(self) -> None:
        position, retained, safe = _slot_wal(self.stack)
        self.readings.append((time.monotonic(), position, retained, safe))
        self.thread.start()

    def run(self) -> None:
        started, origin = self.readings[0][:2]
        while not self.stop.wait(0.5):
            try:
                position, retained, safe = _slot_wal(self.stack)
                self.readings.append((time.monotonic(), position, retained, safe))
                due = origin + self.rate * (time.monotonic() - started) - position
                if retained < self.cap and due > 0:
                    rows = min(int(due // self.ROW_WAL) + 1, int(self.rate // self.ROW_WAL))
                    self.stack.source.sql(f"INSERT INTO {_BALLAST} (body) SELECT repeat('x', 900) "
                                          f"FROM generate_series(1, {rows})")
            except Exception:  # the source is busy or stopping: the next tick catches up
                continue

    def halt(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(10)


def pause_and_write_wal(stack: Any) -> float:
    """Wait until the slot is caught up (it holds at most RUNWAY_CAUGHT_UP), pause the connector (its slot stops
    advancing, still active), and write WAL at RUNWAY_WAL_RATE (2 MiB/s) from then on; returns when the slot holds
    more WAL than it has left (safe_wal_size), the runway alerts' gate.

    What the rules see then, whatever ran before: the WAL position, flat or rising before, rises at 2 MiB/s since
    the pause. The slope of a 5-minute `deriv` over a line that turns to rate R for the last g of its window is at
    least R·(3g² − 2g³) (the WAL before only adds to it). safe_wal_size + retained is 128 to 144 MiB
    (max_slot_wal_keep_size plus the segment in progress), so the gate opens at 64 MiB retained or more, at least
    (64 − 16) / 2 = 24 s into the writing: g ≥ 24/300, a WAL rate of at least 0.018 · 2 MiB/s = 37 KiB/s, and
    safe_wal_size at most 72 MiB: a runway of at most 72 MiB / 37 KiB/s ≈ 2,000 s, below the critical 3,600 s
    (and far below the warning's 6 h). From then on the runway only shortens (safe_wal_size falls, the slope
    grows): CdcPostgresSlotRunwayCritical fires and inhibits the warning. The writer holds off at RUNWAY_CAP
    (about 15 s after the gate), long before `unreserved`; the slope stays for minutes, and so does the alert."""
    from devstack.procs import wait_for

    wait_for(lambda: _slot_wal(stack)[1] <= RUNWAY_CAUGHT_UP, 120, "the slot to hold little WAL before the pause",
             interval=1)
    pause_connector(stack)
    stack.source.sql(f"CREATE TABLE IF NOT EXISTS {_BALLAST} (id bigserial PRIMARY KEY, body text)")
    writer = stack.wal_writer = _WalWriter(stack, RUNWAY_WAL_RATE, RUNWAY_CAP)
    writer.start()

    def gate_open() -> float | None:
        closed = [at for at, _, retained, safe in writer.readings if retained <= safe]
        if writer.readings[-1][2] > writer.readings[-1][3]:
            return time.time() - (time.monotonic() - closed[-1]) if closed else time.time()
        return None

    # the fault's moment: the last reading before the gate opened (Prometheus may read it open just after)
    return float(wait_for(gate_open, 120, "the slot to hold more WAL than it has left", interval=0.25))


def _sink_task_state(stack: Any) -> str:
    return str(stack.connect.get(f"/connectors/{SINK_CONNECTOR}/status")["tasks"][0]["state"])


def _reject_in_target(stack: Any) -> float:
    """A CHECK constraint in the target that a row the source then writes breaks: the JDBC sink tolerates no write
    error (errors.tolerance covers conversion only), so its task fails after its retries; returns a time before it
    did and after the last poll that saw it running began: the fault's start, not the poll's latency."""
    from devstack.procs import wait_until_seen

    stack.target.sql("ALTER TABLE customers ADD CONSTRAINT demo_reject CHECK (name <> 'rejected') NOT VALID")
    written = time.time()
    stack.source.sql("UPDATE customers SET name = 'rejected', updated_at = now() WHERE id = 1")
    failed_after, _ = wait_until_seen(lambda: _sink_task_state(stack) == "FAILED", written, 120, "the sink task to fail",
                                      interval=0.5)
    return failed_after


def _accept_in_target(stack: Any) -> None:
    stack.target.sql("ALTER TABLE customers DROP CONSTRAINT IF EXISTS demo_reject")
    stack.connect.post(f"/connectors/{SINK_CONNECTOR}/tasks/0/restart")


def _pause_sink(stack: Any) -> float:
    """Pause the sink through Connect REST; returns when it was asked to, once its task is PAUSED."""
    from devstack.procs import wait_for

    asked = time.time()
    stack.connect.put(f"/connectors/{SINK_CONNECTOR}/pause")
    wait_for(lambda: _sink_task_state(stack) == "PAUSED", 60, "the sink task to pause", interval=0.5)
    return asked


def _resume_sink(stack: Any) -> None:
    stack.connect.put(f"/connectors/{SINK_CONNECTOR}/resume")


def _poison_pill(stack: Any) -> None:
    """A record no converter reads, produced straight to the change topic the sink reads (a producer's bug)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": stack.broker.bootstrap})
    producer.produce(CHANGES_TOPIC, key=b"not json", value=b"\x00\x01 not json either")
    if producer.flush(10):
        raise RuntimeError(f"the poison pill was not written to {CHANGES_TOPIC}")


_DRIFT_COLUMN = "segment"


def _add_uncarried_column(stack: Any) -> float:
    """A column added at the source, then a change carrying it: the sink (no schema evolution, its field list fixed)
    drops the column's values without a word. Returns when the ALTER began: a pass may see the column from its
    commit on."""
    started = time.time()
    stack.source.sql(f"ALTER TABLE customers ADD COLUMN {_DRIFT_COLUMN} text DEFAULT 'retail'")
    stack.source.sql("UPDATE customers SET updated_at = now() WHERE id = 2")
    return started


def _drop_uncarried_column(stack: Any) -> None:
    stack.source.sql(f"ALTER TABLE customers DROP COLUMN IF EXISTS {_DRIFT_COLUMN}")


def pause_connector(stack: Any) -> None:
    """Pause the connector through Connect REST; the source keeps its traffic."""
    stack.connect.put(f"/connectors/{CONNECTOR}/pause")


def _delete_connector(stack: Any) -> None:
    """Delete the connector through Connect REST (its configuration kept to create it again); the source keeps its
    traffic. Kafka Connect keeps a deleted connector's offsets and the slot waits, so the same name resumes."""
    stack.deleted_connector = stack.connect.get(f"/connectors/{CONNECTOR}/config")
    stack.connect.delete(f"/connectors/{CONNECTOR}")


def _create_connector_again(stack: Any) -> None:
    config, stack.deleted_connector = stack.deleted_connector, None
    stack.connect.post("/connectors", {"name": CONNECTOR, "config": config})


def resume_connector(stack: Any) -> None:
    writer, stack.wal_writer = getattr(stack, "wal_writer", None), None
    if writer is not None:
        writer.halt()
        writing = [r for r in writer.readings if r[2] < writer.cap] or writer.readings
        (first, start, _, _), (last, end, _, _) = writer.readings[0], writing[-1]
        stack.log(f"slot-runway: WAL written at {(end - start) / max(last - first, 1e-3) / _MIB:.2f} MiB/s for "
                  f"{last - first:.0f}s; the slot held at most {max(r[2] for r in writer.readings) / _MIB:.0f} MiB")
    stack.connect.put(f"/connectors/{CONNECTOR}/resume")
    stack.source.sql(f"DROP TABLE IF EXISTS {_BALLAST}")


_DRIFT_TARGET = "cdcwatch_apply.rows WHERE table_id = 'postgres.public.customers' AND row_key IN ({})"
_DRIFTED = {"missing": 1, "different": 1, "extra": 1}
"""What the drift writes, by kind: what the reconcile collector must report, exactly."""


def _row_keys(*keys: int) -> str:
    return ", ".join(f"'[[\"id\",{key}]]'" for key in keys)


def _drift(stack: Any) -> float:
    """Behind the pipeline's back, once it applied rows -1 and -2: delete row -1 from the target, change a column of
    row -2 there, insert row -3 that the source never had."""
    from devstack.procs import wait_for

    stack.source.sql("INSERT INTO customers VALUES (-1, 'drift missing', now()), (-2, 'drift different', now()) "
                     "ON CONFLICT (id) DO UPDATE SET name = excluded.name")
    applied = _DRIFT_TARGET.format(_row_keys(-1, -2))
    wait_for(lambda: stack.target.sql(f"SELECT count(*) FROM {applied} AND NOT deleted") == "2", 120,
             "rows -1 and -2 applied to the target")
    # the pipeline has caught up after the previous scenario: re-checks count again (the freshness gate is open)
    wait_for(lambda: _query(stack.prometheus.url,
                            f'min(cdcwatch_reconcile_freshness_gate_open{{target="{RECONCILE_PAIR}"}})') == 1, 180,
             "the reconciliation's freshness gate to be open", interval=1)
    where = "table_id = 'postgres.public.customers' AND row_key = "
    stack.target.sql(f"DELETE FROM cdcwatch_apply.rows WHERE {where}{_row_keys(-1)};"
                     "UPDATE cdcwatch_apply.rows SET row = jsonb_set(row, '{name}', '\"changed behind the pipeline\"') "
                     f"WHERE {where}{_row_keys(-2)};"
                     "INSERT INTO cdcwatch_apply.rows (table_id, row_key, row, position, deleted) VALUES "
                     f"('postgres.public.customers', {_row_keys(-3)}, '{{\"id\": -3, \"name\": \"extra\"}}', '0', false)")
    return time.time()


def _freshness_seconds(prometheus: str) -> float:
    """The demo pipeline's freshness as Prometheus last saw it (0 without a reading)."""
    return _query(prometheus, f'max(cdcwatch_spark_freshness_seconds{{server="{SERVER}"}})') or 0.0


def _freshness_headroom(prometheus: str) -> float:
    """Beyond its `for`, a frozen apply job's stale-target alert waits for the freshness it last reported to cross
    the threshold: the headroom left at the freeze."""
    return max(SPARK_FRESHNESS_SECONDS - _freshness_seconds(prometheus), 0.0)


def _drift_late_seconds(prometheus: str) -> float:
    """Beyond the confirmation's floor (its re-checks), a divergence written now is first found by the pass under way or
    the next one, and each re-check counts once the pipeline has applied what the source committed after it (the
    freshness gate): two passes, the pause between them and the pipeline's freshness, as Prometheus last saw them."""
    passes = _query(prometheus, f'max(cdcwatch_reconcile_pass_duration_seconds{{target="{RECONCILE_PAIR}"}})') or 0.0
    return 2 * passes + 1 + _freshness_seconds(prometheus)


def _repair_drift(stack: Any) -> None:
    """Once the alert fired (on the first row confirmed): the rows diverged, once every kind is confirmed, must read
    one of each kind, exactly; then the extra row is deleted and the other two are sent again from the source."""
    from devstack.procs import wait_for

    def reported() -> dict[str, float | None]:
        return {kind: _query(stack.prometheus.url, f'sum(cdcwatch_reconcile_rows_diverged{{target="{RECONCILE_PAIR}", '
                                                   f'kind="{kind}"}})') for kind in _DRIFTED}

    wait_for(lambda: all(reported().values()), 60, "every kind of divergence confirmed", interval=1)
    assert reported() == _DRIFTED, f"rows diverged by kind: {reported()}, expected {_DRIFTED}"
    stack.target.sql(f"DELETE FROM {_DRIFT_TARGET.format(_row_keys(-3))}")
    stack.source.sql("UPDATE customers SET updated_at = now() WHERE id IN (-1, -2)")


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("connector-crash",
             "kill -9 the Kafka Connect worker running the Debezium connector, then start it again: the changes "
             "since its last offset flush are re-delivered and counted as duplicates",
             "CdcConnectWorkerDown", {"target": "connect"},
             kill_connect_between_flushes, lambda stack: stack.connect.start(),
             covered=("CdcwatchTargetDown", "CdcSparkFreshnessTooOld", "CdcPipelineStalled")),
    Scenario("source-down", "stop the source PostgreSQL while the connector streams from it, then start it again: "
             "one page (the unreachable source, naming it and its server); the Debezium beans that vanish while "
             "the connector's task restarts do not page (their alert leaves out an exporter that cannot reach a "
             "source); cdcwatch's own `CdcwatchTargetDown` warning may come first, from the scrape before "
             "Debezium's beans say the connection is lost",
             "CdcPostgresSourceUnreachable", {"target": "source", "server": SERVER},
             _stop_source, lambda stack: stack.source.start(), late_seconds=_disconnect_late_seconds,
             covered=("CdcDebeziumMetricsVanished",), sinks=("spark", "jdbc")),
    Scenario("consumer-stall", "freeze the Spark apply job (SIGSTOP), then let it go on (SIGCONT): its listener stops "
             "answering and its consumer group stops committing while changes keep arriving; one page (the stale "
             "target, naming the query); the group's stall does not page, as the listener says the query commits "
             "under that group for lag monitors only",
             "CdcSparkFreshnessTooOld", {"query": "demo_apply"},
             _stop_apply_after_a_commit(signal.SIGSTOP), _signal_apply(signal.SIGCONT), late_seconds=_freshness_headroom,
             states=(("consume", "stalled"), ("apply", "stalled")),
             covered=("CdcSparkDriverAbsent", "CdcKafkaConsumerNotProgressing")),
    Scenario("spark-killed", "kill -9 the Spark apply job, then start it again: its listener's series vanish and "
             "its consumer group stops committing while changes keep arriving; one page (the stale target, naming "
             "the query, from the listener's last reading on); the job stays down until the pipeline's stall at "
             "consume fires too, inhibited by it, as the group's stall is; the job resumes from its checkpoint",
             "CdcSparkFreshnessTooOld", {"query": "demo_apply"},
             _stop_apply_after_a_commit(signal.SIGKILL), lambda stack: stack.apply.start(),
             late_seconds=_freshness_headroom, states=(("consume", "stalled"), ("apply", "stalled")),
             covered=("CdcSparkDriverAbsent", "CdcKafkaConsumerNotProgressing", "CdcPipelineStalled"),
             covered_firing=("CdcPipelineStalled",)),
    Scenario("lag-spike", "a burst of writes 40 times the apply job's rate per batch: apply lag builds up, then drains",
             "CdcSparkApplyLagHigh", {"query": "demo_apply"}, _burst, lambda stack: None,
             settle_seconds=float(APPLY_LAG_THRESHOLD_SECONDS), states=(("apply", "backlogged"),),
             stale_page="CdcSparkFreshnessTooOld"),
    Scenario("restart", "kill -9 the Kafka Connect worker between two offset flushes and start it again at once: the "
             "task restart is counted, the re-delivered changes are counted as duplicates and left out of the apply "
             "lag, no lag, freshness or reconciliation page, and the pipeline flows again",
             None, {}, restart_connect_with_replay, lambda stack: None,
             quiet=("CdcSparkApplyLagHigh", "CdcSparkFreshnessTooOld", "CdcPipelineStageSlow", "CdcPipelineStalled",
                    "CdcReconcileTargetDiverged")),
    Scenario("slot-runway", "pause the connector through Connect REST and write WAL at a steady 2 MiB/s: its slot "
             "holds more WAL than max_slot_wal_keep_size leaves, and at that rate the runway is below an hour; "
             "resume, the slot catches up",
             "CdcPostgresSlotRunwayCritical", {"slot": SLOT}, pause_and_write_wal, resume_connector,
             more_pages="the pause pages first, as in `connector-paused`; and the catch-up through the WAL written "
                        "can outlast `durations.recovery`, after which `CdcSparkFreshnessTooOld` pages"),
    Scenario("connector-paused", "pause the connector through Connect REST while the source keeps writing: Debezium "
             "still reads changes into its queue, nothing reaches Kafka, the apply job waits; one page (the "
             "connector's), the hand-off reads stalled and that stall and the staleness behind it are inhibited; "
             "resume", "CdcConnectTaskNotRunning", {"connector": CONNECTOR}, pause_connector, resume_connector,
             states=(("publish", "stalled"),),
             covered=("CdcPipelineStalled", "CdcSparkFreshnessTooOld", "CdcCanaryStale", "CdcDebeziumQueueSaturated"),
             covered_firing=("CdcPipelineStalled",)),
    Scenario("connector-deleted", "delete the connector through Connect REST while the source keeps writing: "
             "its Debezium beans vanish and nothing reaches Kafka; one page (the vanished connector's, naming it and "
             "its worker), the Debezium and staleness alerts behind it inhibited; create it again with the same "
             "name, it resumes from its offsets", "CdcConnectConnectorVanished", {"connector": CONNECTOR},
             _delete_connector, _create_connector_again,
             covered=("CdcDebeziumMetricsVanished", "CdcPipelineStalled", "CdcSparkFreshnessTooOld", "CdcCanaryStale"),
             covered_firing=("CdcPipelineStalled",)),
    Scenario("snapshot", f"an incremental snapshot of {SNAPSHOT_TABLE} through the signal table while traffic flows, "
             "paused after its first chunk: progress and ETA in Prometheus, then resumed: rows scanned = count(*)",
             None, {}, _start_snapshot, _resume_snapshot, check=check_snapshot),
    Scenario("target-drift", "write to the target behind the pipeline's back: a row deleted, a column changed, a row "
             "the source never had inserted; the reconcile collector must report one row of each kind, then the rows "
             "are repaired and the alert resolves",
             "CdcReconcileTargetDiverged", {"target": RECONCILE_PAIR}, _drift, _repair_drift,
             settle_seconds=float(RECONCILE_SETTLE_SECONDS * RECONCILE_CONFIRM_RECHECKS), late_seconds=_drift_late_seconds),
    Scenario("schema-change", f"ALTER TABLE customers ADD COLUMN {_COLUMN} while traffic flows: the pipeline keeps "
             "applying and the target gets the new column's values",
             None, {}, _add_column, _drop_column, check=check_schema_change),
    Scenario("exporter-restart", "stop cdcwatch serve and start it again, as a rollout does: the pipeline never "
             "stopped, so no critical alert goes pending or fires (a topic's server is known from the first scrape, "
             "even where a delete's tombstone is its newest message)", None, {}, _restart_exporter, lambda stack: None,
             check=check_no_new_page, sinks=("spark", "jdbc")),
    Scenario("scrape-failed", "freeze cdcwatch serve past a scrape's timeout, then let it go on: one scrape fails "
             "(up 0, every series of the exporter stale for a moment); no critical alert goes pending or fires",
             None, {}, _fail_a_scrape, lambda stack: None, check=check_no_new_page, sinks=("spark", "jdbc")),
    # the JDBC-sink shape (scripts/demo --sink jdbc)
    Scenario("sink-failed", "a CHECK constraint in the target rejects a row the source writes: the JDBC sink's task "
             "fails (it tolerates no write error) while the connector keeps delivering; the constraint dropped and the "
             "task restarted, the sink catches up", "CdcConnectTaskFailed", {"connector": SINK_CONNECTOR},
             _reject_in_target, _accept_in_target, sinks=("jdbc",)),
    Scenario("sink-paused", "pause the JDBC sink through Connect REST while the source keeps writing: Kafka holds "
             "newer canaries than the target, whose canary ages, and the sink's consumer group stops committing; one "
             "page (the paused sink's, naming it), the stale canary and the group's stall behind it inhibited; resume",
             "CdcConnectTaskNotRunning", {"connector": SINK_CONNECTOR}, _pause_sink, _resume_sink, sinks=("jdbc",),
             covered=("CdcCanaryStale", "CdcKafkaConsumerNotProgressing", "CdcKafkaConsumerLagHigh")),
    Scenario("dead-letter", f"a record no converter reads in {CHANGES_TOPIC}: the sink (errors.tolerance=all) sends "
             "it to its dead letter queue and commits on, its consumer lag 0; the alert resolves once no more come",
             "CdcConnectSinkDeadLettering", {"connector": SINK_CONNECTOR}, _poison_pill, lambda stack: None,
             sinks=("jdbc",)),
    Scenario("schema-drift", f"ALTER TABLE customers ADD COLUMN {_DRIFT_COLUMN} at the source: the sink (no schema "
             "evolution, a fixed field list) drops its values; reconciliation reports the column missing in the target "
             "and the alert fires after its settle time; the column dropped, it resolves", "CdcReconcileSchemaDrift",
             {"target": RECONCILE_PAIR}, _add_uncarried_column, _drop_uncarried_column,
             settle_seconds=float(SCHEMA_DRIFT_SECONDS), sinks=("jdbc",)),
)}


def fault_matrix() -> list[str]:
    """The runbook's table of the faults the demo injects, each with the one page it sends (or none), the warnings
    left to say more, and the alerts it would raise too that are kept from paging: what `tests/integration/
    test_demo.py` and `test_demo_jdbc.py` check on every run, notification by notification."""
    lines = ["| fault | demo shape | pages | kept from paging |", "|---|---|---|---|"]
    for scenario in SCENARIOS.values():
        if scenario.check is check_no_new_page:
            pages = "nothing: no critical alert even goes pending"
        elif scenario.check is not None:
            continue
        elif scenario.alert is None:
            pages = "nothing (ridden out)"
        elif scenario.pages:
            pages = f"`{scenario.alert}`"
        else:
            pages = f"nothing: `{scenario.alert}` warns"
        if scenario.stale_page:
            pages += f"; `{scenario.stale_page}` pages once the delay outlasts the freshness threshold"
        if scenario.more_pages:
            pages += f"; not yet one page: {scenario.more_pages}"
        kept = ", ".join(f"`{name}`" for name in sorted({*scenario.covered, *scenario.quiet})) or "-"
        lines.append(f"| `{scenario.name}` | {', '.join(scenario.sinks)} | {pages} | {kept} |")
    return lines


@dataclass
class ScenarioReport:
    scenario: str
    alert: str | None
    floor_seconds: float
    earliest_seconds: float = 0.0
    """The alert cannot fire sooner: its `for` plus the fault's settle time."""
    latest_seconds: float = 0.0
    """It must fire by then: the floor, the rounding of `for` up to evaluation ticks, and SLACK_SECONDS."""
    fired_after: float | None = None
    resolved_after: float | None = None
    notifications: list[dict[str, Any]] | None = None
    duplicates_counted: float | None = None
    checks: dict[str, Any] | None = None
    """What a scenario without an alert checked, with the figures (None: not checked)."""
    seconds: float | None = None
    """From inject to recovered (a scenario without an alert)."""
    restarts_counted: float | None = None
    states_seen: dict[str, str] | None = None
    """stage → the freshness state it took during the fault (the scenario's `states`)."""
    flowing_after: float | None = None
    """Seconds from the fault until the pipeline's freshness state read flowing again (a scenario without an alert)."""

    @property
    def ok(self) -> bool:
        if self.alert is None:
            return self.checks is not None or self.flowing_after is not None
        return self.fired_after is not None and self.resolved_after is not None


def _severity(name: str) -> str:
    from cdcwatch.mixin.alerts import ALERTS

    return next(a.severity for a in ALERTS if a.name == name)


def _alert_for(name: str) -> float:
    from cdcwatch.mixin import MixinConfig
    from cdcwatch.mixin.alerts import ALERTS

    config = MixinConfig.model_validate(MIXINS["spark"])  # the `for`s are the same in every shape
    text = next(a for a in ALERTS if a.name == name).for_(config)
    return float(text[:-1]) * {"s": 1, "m": 60}[text[-1]]


def _notifications(log: Path, since: float) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    found = []
    for line in log.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if entry["received"] >= since:
            found.append(entry)
    return found


def _matching(entries: list[dict[str, Any]], scenario: Scenario, status: str) -> dict[str, Any] | None:
    return next((e for e in entries if e["status"] == status and e["labels"].get("alertname") == scenario.alert
                 and all(e["labels"].get(k) == v for k, v in scenario.labels.items())), None)


def _post(control: str, path: str) -> float:
    """Ask the demo; returns when it acted."""
    return float(_ask(control, path).get("at") or time.time())


def _ask(control: str, path: str) -> dict[str, Any]:
    request = urllib.request.Request(control + path, data=b"", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=180) as response:
            answer: dict[str, Any] = json.loads(response.read() or b"{}")
            return answer
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"the demo could not {path}: {exc.read().decode() or exc}") from None


def _run_check(info: dict[str, Any], scenario: Scenario, say: Callable[[str], None]) -> ScenarioReport:
    """Inject, let the demo check what must be seen, recover (also when the check failed)."""
    report = ScenarioReport(scenario.name, None, 0.0)
    say(f"{scenario.name}: {scenario.description}")
    started = time.monotonic()
    _post(info["control"], f"/inject/{scenario.name}")
    try:
        report.checks = _ask(info["control"], f"/check/{scenario.name}")["check"]
    except Exception:
        try:
            _post(info["control"], f"/recover/{scenario.name}")
        except Exception as again:  # the check's failure is the one to report
            say(f"  recovering failed too: {again}")
        raise
    _post(info["control"], f"/recover/{scenario.name}")
    report.seconds = round(time.monotonic() - started, 1)
    for key, value in (report.checks or {}).items():
        say(f"    {key}: {value}")
    say(f"  checked and recovered in {report.seconds:.1f}s")
    return report


def _query(prometheus: str, expr: str) -> float | None:
    from cdcwatch.promapi import PrometheusApi

    result = PrometheusApi(prometheus, timeout=5).query(expr)
    return float(result[0]["value"][1]) if result else None


def _firing(prometheus: str, alert: str) -> bool:
    """Whether `alert` fires in Prometheus for the demo's pipeline."""
    from cdcwatch.promapi import PrometheusApi

    return any(a["labels"].get("alertname") == alert and a["state"] == "firing" and a["labels"].get("server") == SERVER
               for a in PrometheusApi(prometheus, timeout=5).alerts())


def _firing_now(prometheus: str, scenario: Scenario) -> bool:
    from cdcwatch.promapi import PrometheusApi

    alerts = PrometheusApi(prometheus, timeout=5).alerts()
    return any(a["labels"].get("alertname") == scenario.alert and a["state"] in ("pending", "firing") and
               all(a["labels"].get(k) == v for k, v in scenario.labels.items()) for a in alerts)


def run_scenario(state_dir: str, name: str, fire_timeout: float = 180, resolve_timeout: float = 300,
                 say: Callable[[str], None] = print) -> ScenarioReport:
    """Inject, wait for the alert, recover, wait for its resolution; raise RuntimeError when the demo is not there."""
    import urllib.error

    from devstack.procs import wait_for

    scenario = SCENARIOS[name]
    state = Path(state_dir).resolve() / "demo.json"
    if not state.exists():
        raise RuntimeError(f"no demo state in {state.parent}: start `scripts/demo` first (same --state-dir)")
    info = json.loads(state.read_text(encoding="utf-8"))
    try:
        urllib.request.urlopen(info["prometheus"] + "/-/ready", timeout=5).close()
    except (OSError, urllib.error.URLError):
        raise RuntimeError(f"the demo of {state.parent} is not running: start `scripts/demo` first") from None
    shape = info.get("sink", "spark")
    if shape not in scenario.sinks:
        raise RuntimeError(f"{name} breaks the demo started with --sink {' or --sink '.join(scenario.sinks)}; this one "
                           f"runs --sink {shape}")
    if scenario.check is not None:
        return _run_check(info, scenario, say)
    if scenario.alert is None:
        return _ride_out(info, scenario, say)
    interval, held = info["scrape_interval_seconds"], _alert_for(scenario.alert)
    waits = held + scenario.settle_seconds
    floor = interval * 2 + waits
    ticks = math.ceil(held / interval) * interval - held  # `for` is checked at evaluation ticks: it may hold longer
    report = ScenarioReport(name, scenario.alert, floor, earliest_seconds=waits - EARLY_SLACK_SECONDS,
                            latest_seconds=floor + ticks + SLACK_SECONDS)
    say(f"{name}: {scenario.description}")
    say(f"  waiting until {scenario.alert} is quiet ...")
    wait_for(lambda: not _firing_now(info["prometheus"], scenario), 300, f"{scenario.alert} to be quiet", interval=1)
    duplicates_before = _query(info["prometheus"], "sum(cdcwatch_spark_duplicates_total)") or 0.0
    log = Path(info["alerts_log"])
    since = time.time()
    injected = _post(info["control"], f"/inject/{name}")
    if scenario.late_seconds is not None:
        report.latest_seconds += scenario.late_seconds(info["prometheus"])
    say(f"  injected at {time.strftime('%H:%M:%S', time.localtime(injected))}; waiting for {scenario.alert} (floor {floor:.0f}s) ...")
    fired = wait_for(lambda: _matching(_notifications(log, since), scenario, "firing"), fire_timeout,
                     f"the {scenario.alert} notification", interval=0.5)
    report.fired_after = fired["received"] - injected
    say(f"  {scenario.alert} notified {report.fired_after:.1f}s after the fault "
        f"(floor {floor:.0f}s: {report.fired_after - floor:+.1f}s)")
    report.states_seen = _states_seen(info, scenario, injected)
    for covered in scenario.covered_firing:
        say(f"  waiting for {covered} to fire in Prometheus (its notification inhibited) ...")
        wait_for(partial(_firing, info["prometheus"], covered), 240, f"{covered} to fire", interval=1)
    recovered = _post(info["control"], f"/recover/{name}")
    resolved = wait_for(lambda: _matching(_notifications(log, recovered), scenario, "resolved"), resolve_timeout,
                        f"the resolved {scenario.alert} notification", interval=0.5)
    report.resolved_after = resolved["received"] - recovered
    say(f"  resolved {report.resolved_after:.1f}s after recovery")
    report.notifications = [{"alert": e["labels"].get("alertname"), "severity": e["labels"].get("severity"),
                             "status": e["status"],
                             "after_seconds": round(e["received"] - injected, 1),
                             "runbook_url": e.get("annotations", {}).get("runbook_url")}
                            for e in _notifications(log, since)]
    if name == "connector-crash":
        def counted() -> float | None:
            value = _query(info["prometheus"], "sum(cdcwatch_spark_duplicates_total)") or 0.0
            return value - duplicates_before if value > duplicates_before else None
        try:
            report.duplicates_counted = wait_for(counted, 60, "re-delivered changes to be counted", interval=1)
        except Exception:
            report.duplicates_counted = 0.0
        say(f"  duplicates counted after the replay: {report.duplicates_counted:.0f}")
    for entry in report.notifications:
        say(f"    +{entry['after_seconds']:>6.1f}s  {entry['status']:<8} {entry['alert']}")
    return report


def _freshness(stage: str, state: str) -> str:
    from cdcwatch.mixin.alerts.pipeline import STATE

    return f'{STATE}{{server="{SERVER}", stage="{stage}", state="{state}"}}'


def _states_seen(info: dict[str, Any], scenario: Scenario, since: float) -> dict[str, str]:
    """Each (stage, state) of the scenario, awaited from the fault on (range queries: a short state is not missed)."""
    from devstack.procs import wait_for

    seen = {}
    for stage, state in scenario.states:
        def taken(stage: str = stage, state: str = state) -> bool:
            window = max(int(time.time() - since) + 1, 1)
            return (_query(info["prometheus"], f"max_over_time({_freshness(stage, state)}[{window}s])") or 0.0) == 1.0
        wait_for(taken, 60, f"the {stage} stage to read {state}", interval=1)
        seen[stage] = state
    return seen


def _ride_out(info: dict[str, Any], scenario: Scenario, say: Callable[[str], None]) -> ScenarioReport:
    """A fault without an alert: inject it, await the task restart, the duplicates and the pipeline flowing again,
    then none of the quiet alerts may have notified or be pending."""
    from cdcwatch.promapi import PrometheusApi
    from devstack.procs import wait_for

    prometheus = info["prometheus"]
    restarts = "sum(cdcwatch_connect_task_restarts_total)"
    duplicates = "sum(cdcwatch_spark_duplicates_total)"
    report = ScenarioReport(scenario.name, None, 0.0)
    say(f"{scenario.name}: {scenario.description}")

    def quiet_alerts() -> list[str]:
        alerts = PrometheusApi(prometheus, timeout=5).alerts()
        return sorted({a["labels"]["alertname"] for a in alerts if a["labels"].get("alertname") in scenario.quiet
                       and a["labels"].get("server", SERVER) == SERVER})

    say("  waiting until the alerts it must not raise are quiet ...")
    wait_for(lambda: not quiet_alerts(), 300, f"{', '.join(scenario.quiet)} to be quiet", interval=1)
    before = {expr: _query(prometheus, expr) or 0.0 for expr in (restarts, duplicates)}
    log = Path(info["alerts_log"])
    since = time.time()
    injected = _post(info["control"], f"/inject/{scenario.name}")
    say(f"  injected at {time.strftime('%H:%M:%S', time.localtime(injected))}; the replay left the apply lag alone")

    def counted(expr: str) -> float | None:
        value = (_query(prometheus, expr) or 0.0) - before[expr]
        return value if value > 0 else None

    report.restarts_counted = wait_for(partial(counted, restarts), 60, "the task restart to be counted", interval=1)
    report.duplicates_counted = wait_for(partial(counted, duplicates), 60, "the replay to be counted", interval=1)
    wait_for(lambda: _query(prometheus, f"{_freshness('pipeline', 'flowing')} == 1"), 120, "the pipeline to flow again",
             interval=1)
    report.flowing_after = time.time() - injected
    settled = time.time() + 2 * info["scrape_interval_seconds"]  # an evaluation after the last reading of the fault
    wait_for(lambda: time.time() >= settled, 10, "one more evaluation", interval=0.5)
    pending = quiet_alerts()
    report.notifications = [{"alert": e["labels"].get("alertname"), "severity": e["labels"].get("severity"),
                             "status": e["status"],
                             "after_seconds": round(e["received"] - injected, 1),
                             "runbook_url": e.get("annotations", {}).get("runbook_url")}
                            for e in _notifications(log, since)]
    paged = sorted({e["alert"] for e in report.notifications if e["alert"] in scenario.quiet and e["status"] == "firing"})
    say(f"  restarts counted: {report.restarts_counted:.0f}, duplicates counted: {report.duplicates_counted:.0f}, "
        f"flowing again {report.flowing_after:.1f}s after the fault")
    if pending or paged:
        raise RuntimeError(f"{scenario.name} must not page: notified {paged}, pending or firing now {pending}")
    return report
