"""The comparison's own logic on in-memory sides: chunking, narrowing, confirmation by re-checks, the budget."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from cdcwatch.config import ReconcileConfig
from cdcwatch.reconcile.compare import LEAF_KEYS, Budget, Reconciler, classify
from cdcwatch.reconcile.image import Column
from cdcwatch.reconcile.side import Digest, Key, Shape


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.now += seconds
        return False


class MemorySide:
    """A table as key → row hash."""

    def __init__(self, rows: dict[Key, int]) -> None:
        self.rows = rows
        self.rows_read = 0
        self.fetched = 0
        self.calls = 0

    def describe(self) -> Shape:
        return Shape("id", {"id": Column("id", "integer"), "v": Column("v", "text")})

    def use(self, key: Column, columns: Sequence[Column]) -> None:
        pass

    def keys_after(self, after: Key | None, limit: int) -> list[Key]:
        keys = sorted(k for k in self.rows if after is None or k > after)[:limit]  # type: ignore[operator]
        self.rows_read += len(keys)
        return keys

    def digest(self, keys: Sequence[Key]) -> Digest:
        found = [self.rows[k] for k in keys if k in self.rows]
        self.rows_read += len(found)
        self.calls += 1
        return Digest(len(found), sum(found))

    def row_hashes(self, keys: Sequence[Key]) -> dict[Key, int]:
        found = {k: self.rows[k] for k in keys if k in self.rows}
        self.rows_read += len(found)
        self.fetched += len(keys)
        return found

    def close(self) -> None:
        pass


def config(**settings: object) -> ReconcileConfig:
    side = {"engine": "postgres", "user": "u", "table": "public.t", "rows_per_second": 1e9}
    return ReconcileConfig.model_validate({"name": "t", "source": side, "target": side, "chunk_rows": 100,
                                           "settle_seconds": 10, "confirm_rechecks": 2, **settings})


def reconciler(source: MemorySide, target: MemorySide, clock: Clock, /, budgeted: bool = False,
               **settings: object) -> Reconciler:
    """Reads take no time unless `budgeted` (then the budget's waits advance the clock)."""
    wait = clock.wait if budgeted else (lambda seconds: False)
    return Reconciler(config(**settings), source, target, wait, clock, clock)  # type: ignore[arg-type]


def kinds(r: Reconciler, confirmed: bool) -> dict[Key, str]:
    return {s.key: s.kind for s in r.suspects.values() if s.confirmed == confirmed}


def test_classify() -> None:
    assert classify(1, None) == "missing"
    assert classify(None, 1) == "extra"
    assert classify(1, 2) == "different"
    assert classify(1, 1) is None and classify(None, None) is None


def test_a_pass_narrows_differing_chunks_to_the_rows_that_differ() -> None:
    rows = {k: k * 7919 for k in range(1, 1001)}
    target = dict(rows)
    del target[17]
    target[503] += 1
    target[5000] = 1
    clock = Clock()
    source_side, target_side = MemorySide(rows), MemorySide(target)
    r = reconciler(source_side, target_side, clock)
    r.run_pass()
    assert kinds(r, confirmed=False) == {17: "missing", 503: "different", 5000: "extra"}
    # 10 source chunks and 10 target chunks compared; only the differing ones bisected, down to LEAF_KEYS rows each
    assert r.chunks_checked == 20
    assert source_side.fetched <= 4 * LEAF_KEYS


def test_a_suspect_is_confirmed_only_after_its_rechecks_with_both_sides_unchanged() -> None:
    rows = {k: k for k in range(1, 51)}
    target = {k: k for k in range(1, 51) if k != 5}
    clock = Clock()
    source_side, target_side = MemorySide(rows), MemorySide(target)
    r = reconciler(source_side, target_side, clock)
    r.run_pass()
    assert kinds(r, confirmed=False) == {5: "missing"}
    clock.now += 10
    r.recheck_due()
    assert kinds(r, confirmed=True) == {}  # one re-check of two
    rows[5] = 55  # the source changes it: in flight again, the count starts over
    clock.now += 10
    r.recheck_due()
    clock.now += 10
    r.recheck_due()
    assert kinds(r, confirmed=True) == {}
    clock.now += 10
    r.recheck_due()
    assert kinds(r, confirmed=True) == {5: "missing"}
    assert r.state().diverged == {"missing": 1, "extra": 0, "different": 0}
    assert r.state().oldest_divergence == 1000.0
    target[5] = 55  # repaired
    clock.now += 10
    r.recheck_due()
    assert r.suspects == {}
    assert r.state().diverged == {"missing": 0, "extra": 0, "different": 0}


def test_a_suspect_is_not_rechecked_before_it_settled() -> None:
    clock = Clock()
    r = reconciler(MemorySide({1: 1}), MemorySide({}), clock)
    r.run_pass()
    for _ in range(5):
        clock.now += 4
        r.recheck_due()
    assert r.suspects[1].rechecks == 1  # at +12 only: the next falls due at +22


@pytest.mark.parametrize("applied_through", [None, 0.0])
def test_a_recheck_counts_only_once_the_pipeline_caught_up_with_the_previous_check(applied_through: float | None) -> None:
    clock = Clock()
    through: list[float | None] = [applied_through]
    r = Reconciler(config(), MemorySide({1: 1}), MemorySide({}), lambda seconds: False, clock, clock,  # type: ignore[arg-type]
                   applied_through=lambda: through[0])
    r.run_pass()
    for _ in range(4):
        clock.now += 10
        r.recheck_due()
    assert r.suspects[1].rechecks == 0  # the pipeline's freshness unknown, or behind the first check
    through[0] = clock.now  # caught up with this moment, the time of the previous check at the next
    clock.now += 10
    r.recheck_due()
    clock.now += 10
    r.recheck_due()
    assert r.suspects[1].rechecks == 1  # the second needs the pipeline past the check just made
    through[0] = clock.now
    clock.now += 10
    r.recheck_due()
    assert r.suspects[1].confirmed


def test_the_budget_spaces_reads_to_the_rows_per_second() -> None:
    clock = Clock()
    budget = Budget(1000, clock.wait, clock)
    start = clock.now
    for _ in range(10):
        budget.before()
        budget.spend(500)
    budget.before()
    assert clock.now - start == pytest.approx(5.0)


def test_a_pass_reads_within_its_budget() -> None:
    clock = Clock()
    rows = {k: k for k in range(1, 2001)}
    source_side = MemorySide(rows)
    r = reconciler(source_side, MemorySide(dict(rows)), clock, budgeted=True, chunk_rows=200,
                   source={"engine": "postgres", "user": "u", "table": "public.t", "rows_per_second": 500})
    start = clock.now
    r.run_pass()
    # the last read is paid after it: the pass took at least the rows read before it, at 500 rows/s
    assert clock.now - start >= (source_side.rows_read - 200) / 500


def test_the_key_must_be_an_integer_or_text_column() -> None:
    class NoKey(MemorySide):
        def describe(self) -> Shape:
            return Shape(None, {"id": Column("id", "integer")})

    r = reconciler(NoKey({}), MemorySide({}), Clock())
    with pytest.raises(RuntimeError, match="no single-column primary key: set `key`"):
        r.prepare()


@pytest.mark.parametrize(("side", "problem"), [
    ("{engine: mysql, user: u, format: apply}",
     "format apply needs engine postgres (the reference apply job writes PostgreSQL)"),
    ("{engine: postgres, user: u, table: customers}", "table: give `schema.table` (postgres) or `database.table` (mysql)"),
    ("{engine: postgres, user: u, format: apply, table: public.t}",
     "format apply reads <apply_schema>.rows: give table_id, not table"),
])
def test_a_bad_side_is_named_with_what_to_do(side: str, problem: str) -> None:
    from cdcwatch.config import ConfigError, parse_config

    text = f"reconcile:\n  - name: p\n    source: {{engine: postgres, user: u, table: public.t}}\n    target: {side}\n"
    with pytest.raises(ConfigError) as error:
        parse_config(text, env={})
    assert error.value.problems == [f"reconcile[0].target: {problem}"]


def test_a_failing_side_keeps_the_pair_down_until_both_answer() -> None:
    """The collector's thread retries a failed pass; between the retries the pair stays down (no divergence figure),
    and it is up again once both sides answer."""
    import time as clock

    from cdcwatch.reconcile.collector import ReconcileCollector
    from cdcwatch.reconcile.side import SideError
    from devstack.procs import wait_for

    class Down(MemorySide):
        down = True

        def keys_after(self, after: Key | None, limit: int) -> list[Key]:
            if self.down:
                clock.sleep(0.05)  # a connection attempt takes a while to fail
                raise SideError("target", "connection refused")
            return super().keys_after(after, limit)

        def digest(self, keys: Sequence[Key]) -> Digest:
            if self.down:
                clock.sleep(0.05)
                raise SideError("target", "connection refused")
            return super().digest(keys)

    target = Down({1: 1})
    collector = ReconcileCollector(config(settle_seconds=0.05, pass_interval_seconds=0.05), MemorySide({1: 1}), target)
    try:
        collector.start()
        wait_for(lambda: collector.error, 5, "the side's failure")
        for _ in range(50):  # several retries
            with pytest.raises(RuntimeError, match="target: connection refused"):
                collector.collect()
            clock.sleep(0.01)
        target.down = False
        wait_for(lambda: collector.error is None, 5, "both sides answering")
        assert collector.collect().summary.startswith("0 rows diverged")
    finally:
        collector.close()


def test_a_side_down_from_the_start_reads_down_on_the_first_scrape() -> None:
    """The first scrape waits for the thread's first try of both sides, so a side down from the start is never up."""
    import time as clock

    from cdcwatch.reconcile.collector import ReconcileCollector
    from cdcwatch.reconcile.side import SideError

    class Refused(MemorySide):
        def describe(self) -> Shape:
            clock.sleep(0.2)  # a connection attempt takes a while to fail
            raise SideError("target", "connection refused")

    collector = ReconcileCollector(config(), MemorySide({1: 1}), Refused({1: 1}))
    try:
        with pytest.raises(RuntimeError, match="target: connection refused"):
            collector.collect()
    finally:
        collector.close()


def test_a_side_that_does_not_answer_times_the_first_scrape_out_within_its_deadline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    import time as clock

    from cdcwatch.reconcile import collector as module

    answer = threading.Event()

    class Hanging(MemorySide):
        def describe(self) -> Shape:
            answer.wait(10)
            return super().describe()

    monkeypatch.setattr(module, "FIRST_ANSWER_SECONDS", 0.3)
    collector = module.ReconcileCollector(config(), MemorySide({1: 1}), Hanging({1: 1}))
    try:
        started = clock.monotonic()
        with pytest.raises(TimeoutError, match=r"the target \(postgres at [^)]+:5432\) has not answered within 0\.3s"):
            collector.collect()
        assert clock.monotonic() - started < module.SCRAPE_TIMEOUT_SECONDS
        answer.set()
        assert collector.collect().families  # up once both answer
    finally:
        collector.close()
