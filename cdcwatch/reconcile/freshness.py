"""How far the target is known to have caught up with the source, for the re-checks' freshness gate: the source commit
time up to which the target holds every change (`applied_through`), read from a /metrics endpoint (the apply job's
listener: `FreshnessReader`) or from the pipeline's canary where it lands in the target (`CanaryFreshness`: the time
the source wrote the newest canary the target holds).

Only a source position proves delivery. A Debezium heartbeat carries the connector's clock when it emitted the beat,
not a position in the source's log: a connector reading WAL late (after a restart with a backlog, or WAL the server
ships late) emits beats stamped "now" ahead of changes committed before them. The listener's
`cdcwatch_spark_freshness_seconds` counts those beats (it must: on an idle source they are its only sign of life), so
for it the gate reads the same endpoint's `cdcwatch_spark_newest_applied_change_timestamp_seconds`, the source commit
time of the newest change applied (changes are applied in commit order). A metric named `*_timestamp_seconds` is
read as that time itself; any other as an age measured from source commit times.

Reads run off the comparison's thread, one at a time and at most every `refresh` seconds while asked: a slow or
hanging endpoint never holds up a pass, the comparison uses the last reading. A reading is a time the target had
caught up with when it was taken; the target only moves on, so an older reading says less, never more. It stands in
while reads fail for `keep` seconds at most; after that the freshness is unknown and no re-check counts.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from cdcwatch.spark import FRESHNESS_SECONDS, NEWEST_APPLIED_CHANGE_TIMESTAMP_SECONDS
from cdcwatch.tables.side import Side

__all__ = ["KEEP_SECONDS", "POSITION_SERIES", "READ_TIMEOUT_SECONDS", "REFRESH_SECONDS", "CanaryFreshness",
           "FreshnessReader", "Reading"]

log = logging.getLogger("cdcwatch.reconcile")

READ_TIMEOUT_SECONDS = 3.0
"""A read of `freshness_url` gives up after this long (it runs off the comparison's thread, which never waits for it)."""
REFRESH_SECONDS = 1.0
"""By default a new read starts at most this often, when the comparison asks for the freshness (the collector reads
less often for a long `settle_seconds`)."""
KEEP_SECONDS = 30.0
"""How long the last good reading stands in while reads fail."""
POSITION_SERIES = {FRESHNESS_SECONDS.name: NEWEST_APPLIED_CHANGE_TIMESTAMP_SECONDS.name}
"""Freshness metrics that count heartbeats (a connector's clock, not a source position) → the series of the same
endpoint dating the newest applied change by its source commit time, which the gate reads instead."""


class _Unreadable(Exception):
    """The endpoint answered without a usable reading."""


@dataclass(frozen=True)
class Reading:
    through: float
    """Source commit time up to which the target held every change when the reading was taken."""
    taken: float
    """Monotonic time the read started."""


def _get(url: str, timeout: float) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (configured URL)
        return str(response.read().decode("utf-8"))


class _Reader:
    """`applied_through()`: the source commit time up to which the target is known to hold every change, from the last
    reading; None when there is none younger than `keep` (then no re-check counts: not knowing how far the pipeline
    has got never confirms a divergence). Never waits for a read: `_take` runs on a thread of its own."""

    def __init__(self, name: str, *, refresh: float = REFRESH_SECONDS, keep: float = KEEP_SECONDS,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 spawn: Callable[[Callable[[], None]], None] | None = None) -> None:
        self.name = name
        self.refresh, self.keep = refresh, keep
        self.clock, self.wall = clock, wall
        self._spawn = spawn or self._thread
        self._lock = threading.Lock()
        self._reading: Reading | None = None
        self._asked: float | None = None
        """Monotonic time the last read was started."""
        self._busy = False
        self._closed = False
        self.readable: bool | None = None
        """Whether the last read gave a reading (None before the first read ended)."""
        self.failing = False

    def applied_through(self) -> float | None:
        with self._lock:
            now = self.clock()
            start = not (self._busy or self._closed) and (self._asked is None or now - self._asked >= self.refresh)
            if start:
                self._busy, self._asked = True, now
        if start:
            try:
                self._spawn(self._read)
            except Exception:  # a thread that could not start: the next ask tries again
                with self._lock:
                    self._busy = False
                raise
        with self._lock:
            reading = self._reading
        if reading is None or self.clock() - reading.taken > self.keep:
            return None
        return reading.through

    def close(self) -> None:
        """No read starts any more (one under way ends by its timeout)."""
        self._closed = True

    def _thread(self, read: Callable[[], None]) -> None:
        threading.Thread(target=read, name=f"cdcwatch-freshness-{self.name}", daemon=True).start()

    def _read(self) -> None:
        taken, started = self.clock(), self.wall()
        through: float | None = None
        problem = ""
        try:
            through = self._take(started)
        except _Unreadable as exc:
            problem = str(exc)
        except Exception as exc:  # off the comparison's thread: whatever went wrong, the gate stays closed
            problem = f"cannot read {self.where}: {str(exc) or type(exc).__name__}"
        with self._lock:
            self._busy = False
            if through is not None:
                self._reading = Reading(through, taken)
            self.readable = through is not None
        if through is None:
            if not self.failing:
                log.warning("%s: %s; no divergence is confirmed until it is", self.name, problem)
                self.failing = True
        elif self.failing:
            log.info("%s: the pipeline's freshness is read again", self.name)
            self.failing = False

    where = ""
    """What is read, as a failure names it."""

    def _take(self, started: float) -> float:
        """A reading's time (source commit time), for a read started at wall-clock `started`."""
        raise NotImplementedError


class FreshnessReader(_Reader):
    """The freshness a /metrics endpoint serves (`freshness_url`)."""

    def __init__(self, name: str, url: str, metric: str, labels: Mapping[str, str], *,
                 timeout: float = READ_TIMEOUT_SECONDS, fetch: Callable[[str, float], str] = _get, **timing: Any) -> None:
        super().__init__(name, **timing)
        self.url, self.metric, self.labels, self.where = url, metric, dict(labels), url
        self.series = POSITION_SERIES.get(metric, metric)
        """The series read: the metric itself, or the source-position series standing in for it."""
        self.timeout = timeout
        self._fetch = fetch

    def _take(self, started: float) -> float:
        return self._through(self._fetch(self.url, self.timeout), started)

    def _through(self, text: str, started: float) -> float:
        """The reading's time: of a timestamp, the smallest matching value (the pipeline furthest behind); of an age,
        the moment the read started minus the largest (the listener measured it later, so this says no more)."""
        values = [sample.value for family in text_string_to_metric_families(text) for sample in family.samples
                  if sample.name == self.series and self.labels.items() <= sample.labels.items()
                  and math.isfinite(sample.value)]
        if not values:
            instead = (f" (the source commit time of the newest applied change: {self.metric} counts heartbeats, "
                       "which prove no delivery)" if self.series != self.metric else "")
            raise _Unreadable(f"{self.url} has no {self.series} series with labels {self.labels}{instead}")
        if self.series.endswith("_timestamp_seconds"):
            return min(min(values), started)
        return started - max(max(values), 0.0)


class CanaryFreshness(_Reader):
    """The freshness the pipeline's canary shows where it lands (`freshness_canary`): the time the source wrote the
    newest canary row the target holds. The canary travels its own topic: it proves the sink that applies it is
    through that time, and so the target's other tables only where one sink applies them in step (one connector
    task, or one Spark query, reading every topic)."""

    def __init__(self, name: str, side: Side, column: str, **timing: Any) -> None:
        super().__init__(name, **timing)
        self.side, self.column, self.where = side, column, f"the target's canary ({column})"

    def _take(self, started: float) -> float:
        newest = self.side.newest_time(self.column)
        if newest is None:
            raise _Unreadable(f"{self.where} has no row yet: is the source writing it?")
        return min(newest, started)

    def close(self) -> None:
        super().close()
        self.side.close()
