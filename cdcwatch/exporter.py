"""Runs every target's collector under its own deadline and reports on itself.

A target that is down, refuses, hangs or answers garbage gives `cdcwatch_up 0` and one more
scrape error; the other targets are still served and the scrape returns within the largest
target deadline. A collection still running (a concurrent scrape, or a hung target) is joined
rather than started twice, so concurrent scrapes coalesce onto one collection. Within a scrape whose
client says its own timeout (Prometheus' X-Prometheus-Scrape-Timeout-Seconds: `scrape_budget`), no target is
waited for past that timeout less `SCRAPE_TIMEOUT_OFFSET_SECONDS`: a slow target is `up 0` in an answer Prometheus
still takes, not a failed scrape of every target.

A reload never lets the collections of a target's old and new collector overlap where state is handed on: the new
collector inherits once the old one's collection under way has ended, and collects only after that (see
`Exporter.replace`).
"""

from __future__ import annotations

import logging
import math
import platform
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.metrics_core import Metric

from cdcwatch import __version__
from cdcwatch.collection import Collection, TargetCollector
from cdcwatch.collectors import COLLECTORS, Registry, registered
from cdcwatch.config import Config
from cdcwatch.failures import FailureKind, TargetFailure, describe
from cdcwatch.families import FamilyBuilder, head, merged, sample_count
from cdcwatch.self_metrics import (
    BUILD_INFO,
    CONFIG_LAST_RELOAD_SUCCESS_TIMESTAMP_SECONDS,
    CONFIG_LAST_RELOAD_SUCCESSFUL,
    CONFIG_RELOAD_FAILURES_TOTAL,
    METRICS_RESPONSE_SECONDS_TOTAL,
    METRICS_RESPONSES_TOTAL,
    SCRAPE_DURATION_SECONDS,
    SCRAPE_ERRORS_TOTAL,
    SELF_METRICS,
    SERIES_DROPPED_TOTAL,
    TARGET_FAILURE_INFO,
    UP,
)

# the self metrics' specs are cdcwatch.self_metrics'; named here too for the code that reads them with the exporter
__all__ = ["METRICS_RESPONSES_TOTAL", "METRICS_RESPONSE_SECONDS_TOTAL", "SCRAPE_TIMEOUT_OFFSET_SECONDS", "SELF_METRICS",
           "Exporter", "ReloadStats", "ScheduledCollector", "TargetResult", "build_collectors", "budget_of",
           "scrape_budget"]

log = logging.getLogger("cdcwatch")

SCRAPE_TIMEOUT_OFFSET_SECONDS = 0.5
"""What a scrape keeps of its client's timeout to render and send the answer (blackbox_exporter's default offset), or
a tenth of the timeout where that is less (a 1 s timeout leaves the targets 0.9 s)."""
_budget: ContextVar[float | None] = ContextVar("cdcwatch_scrape_budget", default=None)


def budget_of(timeout_header: str | None) -> float | None:
    """How long a scrape may wait for its targets, from the timeout its client sent (Prometheus'
    X-Prometheus-Scrape-Timeout-Seconds, in seconds): that less the offset. None, no budget, without a header or
    with one that is not a positive number: a bad header must not cost the scrape."""
    try:
        timeout = float(timeout_header) if timeout_header else math.nan
    except ValueError:
        return None
    if not (0 < timeout < math.inf):
        return None
    return timeout - min(SCRAPE_TIMEOUT_OFFSET_SECONDS, timeout / 10)


@contextmanager
def scrape_budget(seconds: float | None) -> Iterator[None]:
    """Within: the collections of this thread's scrapes wait at most `seconds` for any target (below each
    target's own `timeout_seconds`; None leaves those alone). The web app sets it around a /metrics answer."""
    token = _budget.set(seconds)
    try:
        yield
    finally:
        _budget.reset(token)


@dataclass
class ReloadStats:
    """How configuration reloads went, for the self metrics."""

    failures: int = 0
    last_successful: bool = True
    last_success_time: float = field(default_factory=time.time)


@dataclass(frozen=True)
class ScheduledCollector:
    """A target's collector with its deadline."""

    collector: TargetCollector
    timeout_seconds: float
    config: object = None
    """The target's configuration section: a reload hands the collector's learned state on only while it is unchanged."""


@dataclass
class TargetResult:
    """The outcome of one collection from one target."""

    kind: str
    target: str
    up: bool
    duration_seconds: float
    error: str | None = None
    collection: Collection = field(default_factory=Collection)
    failure: FailureKind | None = None
    """What failed (refused, unknown host, timeout, TLS, authentication, ...), when up is False."""


def build_collectors(config: Config, registry: Registry = COLLECTORS) -> list[ScheduledCollector]:
    """One collector per configured target of every registered kind (cdcwatch/collectors.py), in the registry's
    order."""
    scheduled: list[ScheduledCollector] = []
    jmx_settings = [(t.jmx, t.timeout_seconds) for t in config.targets("debezium")] + [
        (c.jmx, c.timeout_seconds) for c in config.targets("connect") if c.jmx is not None]
    if jmx_settings:
        from cdcwatch.jmx.jvm import ensure_jvm, set_response_timeout, trust_ca_files  # jpype

        set_response_timeout(max(timeout for _, timeout in jmx_settings))
        if any(settings.backend == "jpype" for settings, _ in jmx_settings):
            ensure_jvm()  # start-up cost of the process, not of the first scrape's deadline
            trust_ca_files(settings.ca_file for settings, _ in jmx_settings if settings.ca_file is not None)
    for entry in registry:
        scheduled += [ScheduledCollector(entry.build(target), entry.timeout(target), target)
                      for target in config.targets(entry.section)]
    return scheduled


class Exporter:
    """A prometheus_client collector that scrapes every target at collection time.

    At most `max_concurrency` collections run at once (the rest queue, within their own deadline);
    a target exporting more than `max_series` series has the rest dropped and counted.
    """

    def __init__(self, collectors: Sequence[ScheduledCollector], max_concurrency: int = 16,
                 max_series: int = 250000) -> None:
        self._collectors = list(collectors)
        self._max_concurrency = max_concurrency
        self._max_series = max_series
        self._pool = self._new_pool()
        self._in_flight: dict[tuple[str, str], Future[tuple[Collection, float]]] = {}
        self._errors: dict[tuple[str, str], int] = {(s.collector.kind, s.collector.target): 0 for s in self._collectors}
        self._dropped: dict[tuple[str, str], int] = {}
        self._last_up: dict[tuple[str, str], bool] = {}
        self._handovers: dict[tuple[str, str], Future[None]] = {}
        """Target → its hand-over at the last reload, while that waits for the replaced collector's collection."""
        self._lock = threading.Lock()
        self.reloads = ReloadStats()

    @classmethod
    def from_config(cls, config: Config) -> Exporter:
        return cls(build_collectors(config), config.limits.max_concurrent_collections, config.limits.max_series_per_target)

    def replace(self, collectors: Sequence[ScheduledCollector], max_concurrency: int | None = None,
                max_series: int | None = None) -> None:
        """Collect from `collectors` (with new limits, if given) from the next scrape on; the old ones close
        once their collections end.

        Error counters of targets that stay carry on (counters never reset while cdcwatch runs), and so does what
        a collector learned itself (its counters, status windows, last-advance times, caches): a new collector
        with an `inherit(previous)` method is handed the one of the same kind and target it replaces, when that
        target's configuration is unchanged (a changed one may point at another server, whose state this is not).

        The hand-over never races a collection: where the old collector is not collecting, it happens here; where
        a collection of it is under way (a slow scrape), it happens in the background as soon as that collection
        ends, and the new collector's first collection waits for it (holding no worker meanwhile). So the old
        collection's readings and counts reach the new collector exactly once, the new collector's state is never
        written by the old one, and a scrape after the reload never serves the old collection. An old collection
        still running at its target's deadline from the reload hands nothing on: that collector starts afresh,
        as at a start of cdcwatch (and the warning says so).
        """
        with self._lock:
            old, in_flight, old_pool = self._collectors, dict(self._in_flight), self._pool
            previous = {_key(s): s for s in old}
            handovers: dict[tuple[str, str], Future[None]] = {}
            deferred: list[_Handover] = []
            for scheduled in collectors:
                key = _key(scheduled)
                prior = previous.get(key)
                if getattr(scheduled.collector, "inherit", None) is None or prior is None or prior.config != scheduled.config:
                    continue
                busy = [f for f in (in_flight.get(key), self._handovers.get(key)) if f is not None and not f.done()]
                if not busy:
                    _inherit(scheduled, prior)
                    continue
                handovers[key] = Future()
                log.info("target %s (%s): the collector replaced is still collecting; what it learned is handed on "
                         "once that collection ends", scheduled.collector.target, scheduled.collector.kind)
                # a predecessor itself waiting for its own hand-over collects only after it: allow for both
                patience = scheduled.timeout_seconds * (2 if self._handovers.get(key) in busy else 1)
                deferred.append(_Handover(scheduled, prior, busy, handovers[key], time.monotonic() + patience))
            self._collectors = list(collectors)
            self._max_concurrency = max_concurrency or self._max_concurrency
            self._max_series = max_series or self._max_series
            self._in_flight = {}
            self._handovers = handovers
            self._pool = self._new_pool()
            for scheduled in self._collectors:
                self._errors.setdefault(_key(scheduled), 0)

        def retire() -> None:
            try:
                _hand_over(deferred)
            finally:  # whatever happened, the new collectors must not wait forever
                for handover in deferred:
                    if not handover.done.done():
                        handover.done.set_result(None)
            for future in in_flight.values():
                try:
                    future.result(timeout=120)
                except Exception:  # its scrape already reported it
                    pass
            _close_all(old)  # after the hand-overs: a collector may have been handed its predecessor's clients
            old_pool.shutdown(wait=False)

        threading.Thread(target=retire, name="cdcwatch-retire", daemon=True).start()

    def _new_pool(self) -> ThreadPoolExecutor:
        workers = max(min(len(self._collectors), self._max_concurrency), 1)
        return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cdcwatch-collect")

    def scrape(self) -> list[TargetResult]:
        """Collect every target concurrently, each under its own deadline (or the scrape's budget, if shorter)."""
        started, budget = time.monotonic(), _budget.get()
        pending: list[tuple[ScheduledCollector, Future[tuple[Collection, float]]]] = []
        with self._lock:
            for scheduled in self._collectors:
                key = (scheduled.collector.kind, scheduled.collector.target)
                future = self._in_flight.get(key)
                if future is None or future.done():
                    future = self._in_flight[key] = self._start(key, scheduled.collector)
                pending.append((scheduled, future))
        return [self._await(scheduled, future, started, budget) for scheduled, future in pending]

    def _start(self, key: tuple[str, str], collector: TargetCollector) -> Future[tuple[Collection, float]]:
        """A collection of `collector`, started now, or once it has been handed its predecessor's state (called
        under the lock)."""
        handover = self._handovers.get(key)
        if handover is None or handover.done():
            self._handovers.pop(key, None)
            return self._pool.submit(_timed, collector)
        started: Future[tuple[Collection, float]] = Future()
        pool = self._pool

        def submit(_: Future[None]) -> None:
            try:
                submitted = pool.submit(_timed, collector)
            except RuntimeError as exc:  # closed (or replaced again) meanwhile
                started.set_exception(exc)
                return
            submitted.add_done_callback(lambda done: _settle(started, done))

        handover.add_done_callback(submit)
        return started

    def _await(self, scheduled: ScheduledCollector, future: Future[tuple[Collection, float]], started: float,
               budget: float | None) -> TargetResult:
        name, target = scheduled.collector.kind, scheduled.collector.target
        address = getattr(scheduled.collector, "address", target)
        entry = registered(name)
        service = entry.service if entry is not None else "the target"
        deadline = scheduled.timeout_seconds if budget is None else min(budget, scheduled.timeout_seconds)
        remaining = deadline - (time.monotonic() - started)
        try:
            collection, took = future.result(timeout=max(remaining, 0.0))
            result = TargetResult(name, target, True, took, None, self._capped(name, target, collection))
        except FutureTimeout:
            if deadline < scheduled.timeout_seconds:  # the scraper's timeout ended the wait: the fix is on its side
                failure = TargetFailure(FailureKind.TIMEOUT, address, (
                    f"no answer within {deadline:g}s, what the scraper's own timeout leaves (the target's "
                    f"timeout_seconds is {scheduled.timeout_seconds:g})"), service, hint=(
                    "raise Prometheus' scrape_timeout above the target's timeout_seconds (the collection goes on "
                    "meanwhile, and the next scrape waits for it)"))
            else:
                failure = describe(TimeoutError(f"no answer within {deadline:g}s"), address, service)
            result = TargetResult(name, target, False, time.monotonic() - started, failure.line, failure=failure.kind)
        except Exception as exc:  # a collector failure must never fail the scrape
            failure = describe(exc, address, service)
            result = TargetResult(name, target, False, time.monotonic() - started, failure.line, failure=failure.kind)
        self._record(result)
        return result

    def _capped(self, name: str, target: str, collection: Collection) -> Collection:
        """The collection, or a copy cut to max_series samples; the cut ones are counted."""
        total = sum(sample_count(f) for f in collection.families)
        if total <= self._max_series:
            return collection
        room, families = self._max_series, []
        for family in collection.families:
            kept = head(family, room)
            count = sample_count(kept)
            room -= count
            if count:
                families.append(kept)
        with self._lock:
            first = (name, target) not in self._dropped
            self._dropped[(name, target)] = self._dropped.get((name, target), 0) + total - self._max_series
        if first:
            log.warning("target %s (%s) exported %d series, more than limits.max_series_per_target (%d): the rest are "
                        "left out (cdcwatch_series_dropped_total); raise the limit or narrow what the target reports",
                        target, name, total, self._max_series)
        return Collection(families, collection.summary)

    def _record(self, result: TargetResult) -> None:
        key = (result.kind, result.target)
        with self._lock:
            if not result.up:
                self._errors[key] = self._errors.get(key, 0) + 1
            previous = self._last_up.get(key)
            self._last_up[key] = result.up
        if not result.up and previous is not False:
            log.warning("target %s (%s) is down: %s", result.target, result.kind, result.error)
        elif previous is False and result.up:
            log.info("target %s (%s) is up again", result.target, result.kind)

    def self_families(self, results: Iterable[TargetResult]) -> list[Metric]:
        """cdcwatch's own metrics for a set of results."""
        builder = FamilyBuilder()
        for r in results:
            key = (r.kind, r.target)
            builder.add_spec(UP, 1.0 if r.up else 0.0, collector=r.kind, target=r.target)
            if not r.up:
                builder.add_spec(TARGET_FAILURE_INFO, 1.0, collector=r.kind, target=r.target,
                                 failure=(r.failure or FailureKind.OTHER).label)
            builder.add_spec(SCRAPE_DURATION_SECONDS, r.duration_seconds, collector=r.kind, target=r.target)
            builder.add_spec(SCRAPE_ERRORS_TOTAL, float(self._errors.get(key, 0)), collector=r.kind,
                             target=r.target)
            builder.add_spec(SERIES_DROPPED_TOTAL, float(self._dropped.get(key, 0)), collector=r.kind,
                             target=r.target)
        builder.add_spec(BUILD_INFO, 1.0, version=__version__, python_version=platform.python_version())
        builder.add_spec(CONFIG_LAST_RELOAD_SUCCESSFUL, float(self.reloads.last_successful))
        builder.add_spec(CONFIG_LAST_RELOAD_SUCCESS_TIMESTAMP_SECONDS, self.reloads.last_success_time)
        builder.add_spec(CONFIG_RELOAD_FAILURES_TOTAL, float(self.reloads.failures))
        return builder.families()

    # prometheus_client collector protocol
    def describe(self) -> list[Metric]:
        """Nothing: registering the exporter must not touch the network."""
        return []

    def collect(self) -> Iterable[Metric]:
        results = self.scrape()
        by_name: dict[str, list[Metric]] = {}  # a coalesced collection is shared: merged into new families
        for result in results:
            for family in result.collection.families:
                by_name.setdefault(family.name, []).append(family)
        yield from (merged(families) for families in by_name.values())
        yield from self.self_families(results)

    def close(self) -> None:
        _close_all(self._collectors)
        self._pool.shutdown(wait=False, cancel_futures=True)


def _timed(collector: TargetCollector) -> tuple[Collection, float]:
    """The collection and the time it took itself (not the time spent waiting for other targets)."""
    started = time.monotonic()
    collection = collector.collect()
    return collection, time.monotonic() - started


def _key(scheduled: ScheduledCollector) -> tuple[str, str]:
    return scheduled.collector.kind, scheduled.collector.target


def _settle(proxy: Future[tuple[Collection, float]], done: Future[tuple[Collection, float]]) -> None:
    exc = done.exception()
    if exc is not None:
        proxy.set_exception(exc)
    else:
        proxy.set_result(done.result())


def _inherit(scheduled: ScheduledCollector, prior: ScheduledCollector) -> None:
    """`scheduled`'s collector takes over what `prior`'s learned; a failure of that leaves it to start afresh."""
    try:
        scheduled.collector.inherit(prior.collector)  # type: ignore[attr-defined]
    except Exception:
        log.exception("target %s (%s): what its collector learned could not be handed on at the reload; it "
                      "starts afresh", scheduled.collector.target, scheduled.collector.kind)


@dataclass
class _Handover:
    """A hand-over that waits for the replaced collector's collection (and its own hand-over) to end."""

    scheduled: ScheduledCollector
    prior: ScheduledCollector
    busy: list[Future[Any]]
    done: Future[None]
    """Set once handed over (or given up): the new collector's first collection waits for it."""
    until: float


def _hand_over(pending: list[_Handover]) -> None:
    """Each hand-over as soon as what it waits for has ended; at its deadline, none (its collector starts
    afresh: the old collection may still write what it learned, so none of that can be handed on)."""
    waiting = list(pending)
    while waiting:
        now = time.monotonic()
        left = min(h.until for h in waiting) - now
        if left > 0:  # (each one waiting has something not done yet)
            wait([f for h in waiting for f in h.busy if not f.done()], timeout=left, return_when=FIRST_COMPLETED)
        now = time.monotonic()
        for handover in list(waiting):
            if all(f.done() for f in handover.busy):
                _inherit(handover.scheduled, handover.prior)
            elif now >= handover.until:
                log.warning("target %s (%s): the collector replaced at the reload was still collecting at its "
                            "deadline; the new one starts afresh (its counters, windows and caches too)",
                            handover.scheduled.collector.target, handover.scheduled.collector.kind)
            else:
                continue
            handover.done.set_result(None)
            waiting.remove(handover)


def _close_all(collectors: Iterable[ScheduledCollector]) -> None:
    for scheduled in collectors:
        try:
            scheduled.collector.close()
        except Exception:  # closing must not stop the others from closing
            log.debug("closing %s failed", scheduled.collector.target, exc_info=True)
