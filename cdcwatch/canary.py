"""The `canary` collector: how fresh a pipeline's target is, whatever applies the changes (a sink connector, Spark,
a service of your own), from a row the source writes on a fixed interval and the pipeline delivers like any change.

Each scrape reads, on one read-only connection per side kept between scrapes, the newest canary time in the target
(the sink's copy of the canary table, or the reference apply job's rows) and, where configured, at the source: one
aggregate each (`max(column)`), which a one-row canary table (an upsert) or an index on the column answers without
a scan. A side that fails reads `cdcwatch_canary_readable{side} 0` and the other side is still reported: a source
that is down is itself the answer to "why is the target stale?". Only when every side fails is the collection
failed (`cdcwatch_up{collector="canary"} 0`, both errors named).

Who writes the canary is the deployment's choice (docs/without-spark.md): Debezium's `heartbeat.action.query` (the
connector writes it with each heartbeat: no role for cdcwatch, which stays read-only; a stopped connector stops the
canary at the source too) or a job scheduled in the source database (pg_cron, MySQL's event scheduler: independent
of the connector, so a stopped connector shows as the connector's stop).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

from cdcwatch.collection import Collection
from cdcwatch.config import CanaryConfig, TableConfig
from cdcwatch.families import FamilyBuilder
from cdcwatch.specs import MetricSpec, metric_specs
from cdcwatch.tables import make_side

__all__ = ["CANARY_METRICS", "CanaryCollector", "CanaryReader"]

log = logging.getLogger("cdcwatch.canary")

CANARY_TARGET_TIMESTAMP_SECONDS = MetricSpec("cdcwatch_canary_target_timestamp_seconds", "gauge", (
    "The time the source wrote the newest canary the target holds: the target holds the pipeline's changes up to "
    "about then. Absent until a canary has landed."))
CANARY_TARGET_AGE_SECONDS = MetricSpec("cdcwatch_canary_target_age_seconds", "gauge", (
    "Age of the newest canary the target holds (now minus cdcwatch_canary_target_timestamp_seconds): the target's "
    "staleness, at most one canary interval more than the pipeline's end-to-end lag."))
CANARY_SOURCE_TIMESTAMP_SECONDS = MetricSpec("cdcwatch_canary_source_timestamp_seconds", "gauge", (
    "The time of the newest canary at the source: older than a few intervals, the source (or the connector running "
    "heartbeat.action.query) has stopped writing it. Absent without a `source`."))
CANARY_INTERVAL_SECONDS = MetricSpec("cdcwatch_canary_interval_seconds", "gauge", (
    "How often the source writes the canary (interval_seconds): a fresh target's canary age stays below it plus the "
    "pipeline's lag."))
CANARY_READABLE = MetricSpec("cdcwatch_canary_readable", "gauge", (
    "1 if the side's last read gave a canary time, 0 if it failed (down, refused, no such table or column) or found "
    "no canary row."), ("side",))
CANARY_READ_DURATION_SECONDS = MetricSpec("cdcwatch_canary_read_duration_seconds", "gauge", (
    "How long the side's last canary read took (one aggregate on a kept connection): what a scrape costs the "
    "database."), ("side",))
CANARY_METRICS = metric_specs(
    CANARY_TARGET_TIMESTAMP_SECONDS,
    CANARY_TARGET_AGE_SECONDS,
    CANARY_SOURCE_TIMESTAMP_SECONDS,
    CANARY_INTERVAL_SECONDS,
    CANARY_READABLE,
    CANARY_READ_DURATION_SECONDS,
)


class CanaryReader(Protocol):
    """What the canary reads of a side (`cdcwatch.tables.side.Side` has it)."""

    def newest_time(self, column: str) -> float | None: ...

    def close(self) -> None: ...


class CanaryCollector:
    """Reads one pipeline's canary at both ends."""

    kind = "canary"

    def __init__(self, config: CanaryConfig, sides: dict[str, CanaryReader] | None = None) -> None:
        """`sides`: the readers of `target` and, with a `source`, `source`; by default those of SQL tables (a canary
        in a Delta table is given its reader by the registry, `cdcwatch.collectors`)."""
        self.config = config
        self.target = config.name
        if sides is None:
            if not isinstance(config.target, TableConfig):
                raise ValueError(f"{config.name}: a canary in a {config.target.engine} table needs its reader")
            sides = {"target": make_side("target", config.target, config.source or config.target)}
            if config.source is not None:
                sides["source"] = make_side("source", config.source, config.source)
        self.sides = sides
        self.common = {"target": config.name, **config.labels, "server": config.server, "topic": config.kafka_topic}
        self._said: dict[str, str] = {}
        self._lock = threading.Lock()

    def collect(self) -> Collection:
        with self._lock:
            readings = {side: self._read(side) for side in self.sides}
        failed = {side: error for side, (_, _, error) in readings.items() if error}
        if len(failed) == len(readings):
            raise RuntimeError("; ".join(failed.values()))
        builder = FamilyBuilder()
        now = time.time()
        builder.add_spec(CANARY_INTERVAL_SECONDS, self.config.interval_seconds, self.common)
        for side, (newest, seconds, _) in readings.items():
            builder.add_spec(CANARY_READABLE, float(newest is not None), self.common, side=side)
            builder.add_spec(CANARY_READ_DURATION_SECONDS, seconds, self.common, side=side)
        target, _, _ = readings["target"]
        if target is not None:
            builder.add_spec(CANARY_TARGET_TIMESTAMP_SECONDS, target, self.common)
            builder.add_spec(CANARY_TARGET_AGE_SECONDS, max(now - target, 0.0), self.common)
        source = readings.get("source", (None, 0.0, ""))[0]
        if source is not None:
            builder.add_spec(CANARY_SOURCE_TIMESTAMP_SECONDS, source, self.common)
        summary = "no canary in the target yet" if target is None else f"target canary {now - target:.1f}s old"
        if source is not None:
            summary += f", source canary {now - source:.1f}s old"
        return Collection(builder.families(), summary + "".join(f"; {error}" for error in failed.values()))

    def _read(self, side: str) -> tuple[float | None, float, str]:
        """The side's newest canary time (None: failed, or no row yet), the read's duration, and its error (a side
        without a canary row answered: that is no failure of the collection, only an unreadable canary)."""
        started = time.perf_counter()
        error = said = ""
        try:
            newest = self.sides[side].newest_time(self.config.column)
            if newest is None:
                said = f"{side}: no canary row yet (is the source writing it?)"
        except Exception as exc:  # down, refused, no such table: the other side still tells something
            newest, error = None, str(exc) if str(exc).startswith(side) else f"{side}: {exc}"
            said = error
        if said != self._said.get(side, ""):
            if said:
                log.warning("%s: %s", self.target, said)
            else:
                log.info("%s: the %s's canary is read again", self.target, side)
            self._said[side] = said
        return newest, time.perf_counter() - started, error

    def close(self) -> None:
        for side in self.sides.values():
            side.close()
