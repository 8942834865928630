"""A whole-table pass: each side digests all its rows by bucket (`cdcwatch.tables.buckets`) in one pass, where the
rows are; the buckets whose counts or checksums differ have their rows read back and classified, and the rows found
differing become suspects, re-checked and confirmed exactly as `compare.Reconciler` does (the freshness gate, rows
unchanged at the source, `confirm_rechecks`).

This is how the Spark job (`cdcwatch-reconcile`) compares a table of any size: a chunk walk costs a round trip per
chunk and side, which a Delta table read by Spark cannot afford, while one distributed aggregation per side reads
every row once. The SQL sides answer the same pass with paged aggregate queries, paid from their row budgets page
by page.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar, cast

from cdcwatch.reconcile.compare import Reconciler, classify
from cdcwatch.tables.buckets import Buckets, BucketSide, plan_buckets
from cdcwatch.tables.side import SideError

__all__ = ["BUCKETS_READ_BACK", "BucketedReconciler"]

log = logging.getLogger("cdcwatch.reconcile")

T = TypeVar("T")

BUCKETS_READ_BACK = 64
"""Differing buckets whose rows are read back in one query per side."""


class BucketedReconciler(Reconciler):
    """A table pair compared by whole-table passes; both sides must be `BucketSide`s."""

    rows_last_pass = 0
    """The larger side's rows at the last pass: the next pass's buckets are planned from it."""

    def _side(self, side: str) -> BucketSide:
        return cast(BucketSide, self.sides[side])

    def _paced(self, side: str, call: Callable[[Callable[[], None]], T]) -> T:
        """`call(pace)`, the side's budget paid each time it calls `pace` (after each query) and at the end."""
        reader, budget = self.sides[side], self.budgets[side]
        budget.before()
        paid = reader.rows_read

        def pace() -> None:
            nonlocal paid
            budget.spend(reader.rows_read - paid)
            paid = reader.rows_read
            budget.before()

        try:
            return call(pace)
        finally:
            budget.spend(reader.rows_read - paid)

    def prepare(self) -> None:
        super().prepare()
        assert self._compared is not None
        key, _, target_key, _ = self._compared
        if key.type_class != target_key.type_class:
            raise SideError("target", f"key {target_key.name!r} is {target_key.data_type or target_key.type_class} in "
                                      f"the target and {key.data_type or key.type_class} at the source: both sides must "
                                      "hold it as an integer, or both as text")

    def plan(self) -> Buckets:
        """Buckets of about `chunk_rows` rows for the larger side as it was last seen."""
        assert self._compared is not None
        integer = self._compared[0].type_class == "integer"
        source, target = self._side("source"), self._side("target")
        rows = max(self.rows_last_pass, self._read("source", source.estimated_rows),
                   self._read("target", target.estimated_rows))
        # the source's keys spread the buckets (a stray key in the target must not widen them all); keys outside
        # fall in the open-ended first and last buckets
        bounds = None
        if integer:
            bounds = self._read("source", source.key_bounds) or self._read("target", target.key_bounds)
        return plan_buckets(rows, self.config.chunk_rows, bounds, integer)

    def run_pass(self) -> None:
        if not self.shape_current:
            self.prepare()
        started_clock = self.clock()
        plan = self.plan()
        source, target = self._side("source"), self._side("target")
        source_digests = self._paced("source", lambda pace: source.bucket_digests(plan, pace))
        target_digests = self._paced("target", lambda pace: target.bucket_digests(plan, pace))
        self.both_answered()
        buckets = set(source_digests) | set(target_digests)
        with self._lock:
            self.chunks_checked += len(buckets)
        self.rows_last_pass = max(sum(d.rows for d in source_digests.values()),
                                  sum(d.rows for d in target_digests.values()))
        differing = sorted(b for b in buckets if source_digests.get(b) != target_digests.get(b))
        for start in range(0, len(differing), BUCKETS_READ_BACK):
            if len(self.suspects) >= self.config.max_suspects:
                break  # the rest are found by later passes, once these are settled
            group = differing[start:start + BUCKETS_READ_BACK]
            source_rows = self._read("source", lambda: source.bucket_rows(plan, group))  # noqa: B023
            source_read = self.wall()
            target_rows = self._read("target", lambda: target.bucket_rows(plan, group))  # noqa: B023
            self.both_answered()
            for key in source_rows.keys() | target_rows.keys():
                kind = classify(source_rows.get(key), target_rows.get(key))
                if kind is not None:
                    self._suspect(key, kind, source_rows.get(key), target_rows.get(key), source_read)
            self.recheck_due()
        log.debug("%s: %d buckets, %d differing", self.name, len(buckets), len(differing))
        self._end_pass(started_clock)
