"""The `reconcile` collector: one background thread per table pair compares source and target continuously
(`compare.Reconciler`); a scrape only reads the state it has reached, never waits for a pass.

A side that fails (down, timed out, refused, misconfigured) makes the pair's `cdcwatch_up{collector="reconcile"}`
0 with the side named in the error, and no divergence figures are exported until both sides answer again: a pass
that could not read a side reports nothing rather than a wrong figure. Until the thread has first reached both sides
(read their catalogs) or failed, a scrape waits for that, within its deadline: a pair is never up before it has
been heard from.
"""

from __future__ import annotations

import logging
import threading
import time

from cdcwatch.collection import Collection
from cdcwatch.config import ReconcileConfig
from cdcwatch.families import FamilyBuilder
from cdcwatch.reconcile.compare import KINDS, Reconciler, Stopped
from cdcwatch.reconcile.freshness import REFRESH_SECONDS, CanaryFreshness, FreshnessReader
from cdcwatch.specs import MetricSpec, metric_specs
from cdcwatch.tables import make_side
from cdcwatch.tables.side import Side, SideError

__all__ = ["FIRST_ANSWER_SECONDS", "RECONCILE_METRICS", "RETRY_SECONDS", "SCRAPE_TIMEOUT_SECONDS", "ReconcileCollector"]

log = logging.getLogger("cdcwatch.reconcile")

RETRY_SECONDS = 10.0
"""Pause before a failed pass is started again (never longer than the pair's settle time)."""
SCRAPE_TIMEOUT_SECONDS = 2.0
"""Deadline of one collection: a scrape reads the pair's state, whatever its passes take."""
FIRST_ANSWER_SECONDS = 1.5
"""How long a scrape waits for the thread's first answer from both sides (or its failure): within the deadline, so
a side that hangs reads as a timeout of the sides, not of cdcwatch."""

RECONCILE_ROWS_DIVERGED = MetricSpec("cdcwatch_reconcile_rows_diverged", "gauge", (
    "Rows whose target copy disagrees with the source, confirmed: still differing after confirm_rechecks "
    "re-checks settle_seconds apart with neither side's row changed. kind: missing (in the target), extra (in "
    "the target), different."), ("kind",))
RECONCILE_ROWS_SUSPECT = MetricSpec("cdcwatch_reconcile_rows_suspect", "gauge", (
    "Rows found differing but not confirmed (yet): changes in flight, waiting for their re-checks."))
RECONCILE_OLDEST_DIVERGENCE_AGE_SECONDS = MetricSpec("cdcwatch_reconcile_oldest_divergence_age_seconds", "gauge", (
    "Age of the oldest confirmed divergence still unresolved (since it was first found differing); 0 without "
    "one."))
RECONCILE_CHUNKS_CHECKED_TOTAL = MetricSpec("cdcwatch_reconcile_chunks_checked_total", "counter", (
    "Chunks (chunk_rows keys each) whose count and checksum were compared on both sides."))
RECONCILE_ROWS_READ_TOTAL = MetricSpec("cdcwatch_reconcile_rows_read_total", "counter", (
    "Rows the comparison read on each side (keys walked, rows hashed): its cost, held to rows_per_second."),
    ("side",))
RECONCILE_ROWS_PER_SECOND_BUDGET = MetricSpec("cdcwatch_reconcile_rows_per_second_budget", "gauge", (
    "The side's configured budget (rows_per_second)."), ("side",))
RECONCILE_LAST_PASS_TIMESTAMP_SECONDS = MetricSpec("cdcwatch_reconcile_last_pass_timestamp_seconds", "gauge", (
    "When the last full pass over both sides ended (absent before the first)."))
RECONCILE_PASS_DURATION_SECONDS = MetricSpec("cdcwatch_reconcile_pass_duration_seconds", "gauge", (
    "How long the last full pass took: with settle_seconds × confirm_rechecks, how long a divergence can go "
    "unreported."))
RECONCILE_FRESHNESS_GATE_OPEN = MetricSpec("cdcwatch_reconcile_freshness_gate_open", "gauge", (
    "1 while a re-check falling due counts: the target is known (freshness_url, freshness_canary) to hold every change committed at "
    "the source up to settle_seconds ago, or neither is set; 0 while the pipeline is not known to be that "
    "far (behind, stalled, nothing applied lately, its freshness unreadable): differing rows then stay suspects, "
    "none is confirmed."))
RECONCILE_FRESHNESS_READABLE = MetricSpec("cdcwatch_reconcile_freshness_readable", "gauge", (
    "With freshness_url or freshness_canary: 1 if its last read gave the source commit time the target is applied through, 0 if it "
    "failed (unreachable, timed out, no matching series); absent before the first read ends."))
RECONCILE_APPLIED_THROUGH_TIMESTAMP_SECONDS = MetricSpec("cdcwatch_reconcile_applied_through_timestamp_seconds", "gauge", (
    "With freshness_url or freshness_canary: the source commit time up to which the target is known to hold every change (the newest "
    "applied change's); absent without a reading of the last 30 s."))
RECONCILE_RECHECKS_HELD_TOTAL = MetricSpec("cdcwatch_reconcile_rechecks_held_total", "counter", (
    "Re-checks of a row still differing, neither side changed, that did not count because the pipeline was not "
    "known to have applied the source's row yet (the freshness gate closed): they neither confirm nor start over."))
RECONCILE_SCHEMA_DRIFT_COLUMNS = MetricSpec("cdcwatch_reconcile_schema_drift_columns", "gauge", (
    "Columns the two tables do not share as they were at the last pass (exclude_columns left out). kind: source_only "
    "(never reach the target: a sink that does not evolve its table; no row comparison can show it), target_only, "
    "type_differs (compared across different types: type classes, or declared types on one engine). Absent with a "
    "target of format apply (its row images hold every source column)."), ("kind",))
RECONCILE_OLDEST_MISSING_COLUMN_AGE_SECONDS = MetricSpec("cdcwatch_reconcile_oldest_missing_column_age_seconds", "gauge", (
    "How long the longest-missing source column has been missing in the target (since a pass first found it so); 0 "
    "without one. A sink that evolves its table adds a column with the first change that carries it."))
RECONCILE_METRICS = metric_specs(
    RECONCILE_ROWS_DIVERGED,
    RECONCILE_ROWS_SUSPECT,
    RECONCILE_OLDEST_DIVERGENCE_AGE_SECONDS,
    RECONCILE_CHUNKS_CHECKED_TOTAL,
    RECONCILE_ROWS_READ_TOTAL,
    RECONCILE_ROWS_PER_SECOND_BUDGET,
    RECONCILE_LAST_PASS_TIMESTAMP_SECONDS,
    RECONCILE_PASS_DURATION_SECONDS,
    RECONCILE_FRESHNESS_GATE_OPEN,
    RECONCILE_FRESHNESS_READABLE,
    RECONCILE_APPLIED_THROUGH_TIMESTAMP_SECONDS,
    RECONCILE_RECHECKS_HELD_TOTAL,
    RECONCILE_SCHEMA_DRIFT_COLUMNS,
    RECONCILE_OLDEST_MISSING_COLUMN_AGE_SECONDS,
)


class ReconcileCollector:
    """Reports one table pair's comparison; the comparison runs on its own thread from the first scrape on."""

    kind = "reconcile"

    def __init__(self, config: ReconcileConfig, source: Side | None = None, target: Side | None = None,
                 reconciler: type[Reconciler] = Reconciler) -> None:
        self.config = config
        self.target = config.name
        self._stop = threading.Event()
        # read about four times per settle_seconds (once a second at most, every 15 s at least): readings that recent
        # delay a confirmation by little, and many pairs on one listener do not crowd it
        refresh = min(max(config.settle_seconds / 4, REFRESH_SECONDS), 15.0)
        self.freshness: FreshnessReader | CanaryFreshness | None = None
        if config.freshness_url:
            self.freshness = FreshnessReader(config.name, config.freshness_url, config.freshness_metric,
                                             config.freshness_labels, refresh=refresh)
        elif config.freshness_canary is not None:
            canary = config.freshness_canary
            where = config.target.model_copy(update={"table": canary.table, "table_id": canary.table_id})
            self.freshness = CanaryFreshness(config.name, make_side("target", where, config.source), canary.column,
                                             refresh=refresh)
        self.reconciler = reconciler(config, source or make_side("source", config.source, config.source),
                                     target or make_side("target", config.target, config.source), self._stop.wait)
        if self.freshness is not None:
            self.reconciler.applied_through = self.freshness.applied_through
        self.reconciler.both_answered = self._answered
        self.error: str | None = None
        self._first_answer = threading.Event()
        """Set once both sides have answered (their catalogs read) or one failed."""
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"cdcwatch-reconcile-{self.target}", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        retry = min(RETRY_SECONDS, self.config.settle_seconds)
        while not self._stop.is_set():
            try:
                if not self.reconciler.prepared:
                    self.reconciler.prepare()
                    self._first_answer.set()
                self.reconciler.run_pass()
                self._idle(self.config.pass_interval_seconds)
            except Stopped:
                return
            except SideError as exc:
                self._failed(str(exc))
                self._stop.wait(retry)
            except Exception as exc:  # a bug must not end the thread silently
                log.exception("%s: the comparison failed", self.target)
                self._failed(f"{type(exc).__name__}: {exc}")
                self._stop.wait(retry)

    def _answered(self) -> None:
        """Both sides answered: up again (a side that failed is up only once a read of both has succeeded)."""
        if self.error is not None:
            log.info("%s: both sides answer again", self.target)
            self.error = None

    def _failed(self, message: str) -> None:
        if self.error != message:
            log.warning("%s: %s", self.target, message)
        self.error = message
        self._first_answer.set()
        for side in self.reconciler.sides.values():
            side.close()

    def _idle(self, seconds: float) -> None:
        """The pause between passes, re-checking suspects as they fall due."""
        until = time.monotonic() + seconds
        while not self._stop.wait(min(1.0, max(until - time.monotonic(), 0.0))) and time.monotonic() < until:
            self.reconciler.recheck_due()

    def collect(self) -> Collection:
        self.start()
        if not self._first_answer.wait(FIRST_ANSWER_SECONDS):
            side = self.reconciler.asking or "source"
            settings = self.config.source if side == "source" else self.config.target
            raise TimeoutError(f"the {side} ({settings.location}) has not answered "
                               f"within {FIRST_ANSWER_SECONDS:g}s: the comparison is still connecting to it")
        if self.error is not None:
            raise RuntimeError(self.error)
        state = self.reconciler.state()
        builder = FamilyBuilder()
        common = {"target": self.target, **self.config.series_labels}
        for kind in KINDS:
            builder.add_spec(RECONCILE_ROWS_DIVERGED, state.diverged[kind], common, kind=kind)
        builder.add_spec(RECONCILE_ROWS_SUSPECT, state.suspects, common)
        now = time.time()
        builder.add_spec(RECONCILE_OLDEST_DIVERGENCE_AGE_SECONDS,
                         0.0 if state.oldest_divergence is None else max(now - state.oldest_divergence, 0.0), common)
        builder.add_spec(RECONCILE_CHUNKS_CHECKED_TOTAL, state.chunks_checked, common)
        for side, rows in state.rows_read.items():
            builder.add_spec(RECONCILE_ROWS_READ_TOTAL, rows, common, side=side)
        for side, settings in (("source", self.config.source), ("target", self.config.target)):
            builder.add_spec(RECONCILE_ROWS_PER_SECOND_BUDGET, settings.rows_per_second, common, side=side)
        if state.last_pass_end is not None and state.last_pass_seconds is not None:
            builder.add_spec(RECONCILE_LAST_PASS_TIMESTAMP_SECONDS, state.last_pass_end, common)
            builder.add_spec(RECONCILE_PASS_DURATION_SECONDS, state.last_pass_seconds, common)
        if state.drift is not None:
            for drift, columns in state.drift.counts().items():
                builder.add_spec(RECONCILE_SCHEMA_DRIFT_COLUMNS, columns, common, kind=drift)
            builder.add_spec(RECONCILE_OLDEST_MISSING_COLUMN_AGE_SECONDS, 0.0 if state.oldest_missing_column is None
                             else max(now - state.oldest_missing_column, 0.0), common)
        builder.add_spec(RECONCILE_FRESHNESS_GATE_OPEN, float(state.gate_open), common)
        builder.add_spec(RECONCILE_RECHECKS_HELD_TOTAL, state.rechecks_held, common)
        if self.freshness is not None:
            if self.freshness.readable is not None:
                builder.add_spec(RECONCILE_FRESHNESS_READABLE, float(self.freshness.readable), common)
            if state.applied_through is not None:
                builder.add_spec(RECONCILE_APPLIED_THROUGH_TIMESTAMP_SECONDS, state.applied_through, common)
        diverged = sum(state.diverged.values())
        gate = "" if state.gate_open else "; freshness gate closed: nothing is confirmed"
        if state.chunks_checked == 0 and state.last_pass_end is None:
            return Collection(builder.families(), f"comparison started: no chunk compared yet{gate}")
        return Collection(builder.families(), f"{diverged} rows diverged, {state.suspects} suspect, "
                                              f"{state.chunks_checked} chunks checked{gate}")

    def inherit(self, previous: ReconcileCollector) -> None:
        """Carry on the comparison of the collector this one replaces at a reload: its counters, its suspects with
        their re-checks and its confirmed divergences (else each would have to settle and be confirmed again). The old
        comparison is told to stop first: it ends at its next read, so it neither reads the sides beside this one nor
        learns anything after the copy (what it was reading is read again here)."""
        previous._stop.set()
        self.reconciler.carry_on(previous.reconciler)

    def close(self) -> None:
        self._stop.set()
        if self.freshness is not None:
            self.freshness.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for side in self.reconciler.sides.values():
            side.close()
