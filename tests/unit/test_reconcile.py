"""The comparison's own logic on in-memory sides: chunking, narrowing, confirmation by re-checks, the budget."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from cdcwatch.config import ReconcileConfig
from cdcwatch.reconcile.compare import LEAF_KEYS, Budget, Reconciler, classify
from cdcwatch.reconcile.freshness import FreshnessReader
from cdcwatch.tables.image import Column
from cdcwatch.tables.side import Digest, Key, Shape


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
def test_a_recheck_counts_only_once_the_pipeline_applied_what_the_source_held_when_the_rows_were_found(
        applied_through: float | None) -> None:
    clock = Clock()
    through: list[float | None] = [applied_through]
    r = Reconciler(config(), MemorySide({1: 1}), MemorySide({}), lambda seconds: False, clock, clock,
                   applied_through=lambda: through[0])
    r.run_pass()  # found at 1000: the source's row was committed before then
    for _ in range(4):
        clock.now += 10
        r.recheck_due()
    assert r.suspects[1].rechecks == 0 and r.rechecks_held == 4  # the pipeline's freshness unknown, or behind
    assert not r.state().gate_open
    through[0] = 999.0  # applied up to just before the source was read: the row may still be on its way
    clock.now += 10
    r.recheck_due()
    assert r.suspects[1].rechecks == 0 and r.rechecks_held == 5
    through[0] = 1000.0  # applied up to the moment the source was read
    clock.now += 10
    r.recheck_due()
    assert r.suspects[1].rechecks == 1
    clock.now += 10
    r.recheck_due()  # the moment compared with stays put: the pipeline, 70 s behind now, need not catch up again
    assert r.suspects[1].confirmed and r.rechecks_held == 5
    through[0] = clock.now - 10
    assert r.state().gate_open  # applied through settle_seconds ago: a re-check falling due now counts


class Listener:
    """The apply job's listener as the gate reads it: the newest applied change's source commit time, and a freshness
    that counts the newest applied heartbeat too (`spark_listeners.metrics`)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.newest_change: float | None = None
        self.newest_heartbeat: float | None = None
        self.down = False

    def change(self, commit_time: float) -> None:
        self.newest_change = max(self.newest_change or 0.0, commit_time)

    def heartbeat(self, emitted: float) -> None:
        self.newest_heartbeat = max(self.newest_heartbeat or 0.0, emitted)

    def page(self, url: str, timeout: float) -> str:
        if self.down:
            raise TimeoutError("timed out")
        labels = '{query="apply",server="shop"}'
        stamps = [s for s in (self.newest_change, self.newest_heartbeat) if s is not None]
        lines = [f"cdcwatch_spark_freshness_seconds{labels} {max(self.clock.now - max(stamps), 0.0)}"] if stamps else []
        if self.newest_change is not None:
            lines.append(f"cdcwatch_spark_newest_applied_change_timestamp_seconds{labels} {self.newest_change}")
        return "".join(f"{line}\n" for line in lines)


def reader(listener: Listener, clock: Clock, metric: str = "cdcwatch_spark_freshness_seconds",
           fetch: Callable[[str, float], str] | None = None,
           spawn: Callable[[Callable[[], None]], None] | None = None) -> FreshnessReader:
    """A reader of `listener` whose reads run at once, on the caller's thread, unless `spawn` says otherwise."""
    return FreshnessReader("t", "http://listener:4041/metrics", metric, {"server": "shop"}, clock=clock, wall=clock,
                           fetch=fetch or listener.page, spawn=spawn or (lambda read: read()))


def test_a_heartbeat_ahead_of_undelivered_changes_never_confirms_a_divergence() -> None:
    """After a restart the connector streams its backlog, committed seconds ago, and emits heartbeats stamped with
    its clock between those changes: the listener's freshness reads 0 while a change committed before the check is
    still to come. The gate must wait for the change's source commit time, not the beat's."""
    clock = Clock()
    source: dict[Key, int] = {1: 10, 2: 20}
    target: dict[Key, int] = {1: 10, 2: 20}
    listener = Listener(clock)
    listener.change(990.0)  # the pipeline applied everything committed up to 990
    r = Reconciler(config(), MemorySide(source), MemorySide(target), lambda seconds: False, clock, clock,
                   applied_through=reader(listener, clock).applied_through)
    source[1] = 11  # committed at 1000, while the connector is down
    clock.now = 1001.0
    r.run_pass()  # row 1 found different: its change is in the backlog
    assert kinds(r, confirmed=False) == {1: "different"}
    for _ in range(3):  # the restarted connector emits beats, stamped now, ahead of the backlog it streams
        clock.now += 10
        listener.heartbeat(clock.now - 0.5)
        r.recheck_due()
        assert r.state().diverged == dict.fromkeys(("missing", "extra", "different"), 0), "confirmed on a beat"
    assert r.rechecks_held == 3 and not r.state().gate_open
    target[1] = 11  # the backlog reaches row 1's change
    listener.change(1000.0)
    clock.now += 10
    r.recheck_due()
    assert r.suspects == {}


def test_the_pipeline_read_after_the_target_never_counts_a_recheck() -> None:
    """A reading taken after the check read the target could count a change applied in between, which that read did
    not see: the gate reads the pipeline before the check's reads."""
    clock = Clock()
    source: dict[Key, int] = {1: 11}
    target: dict[Key, int] = {1: 10}
    applied: list[float] = [990.0]

    class Delivering(MemorySide):
        """Just after the check read the target, the pipeline applies a batch: row 1's change (committed at 999) and
        a change of another table committed at 1005."""

        def row_hashes(self, keys: Sequence[Key]) -> dict[Key, int]:
            found = super().row_hashes(keys)
            if clock.now > 1000:
                target[1], applied[0] = 11, 1005.0
            return found

    r = Reconciler(config(confirm_rechecks=1), MemorySide(source), Delivering(target), lambda seconds: False,
                   clock, clock, applied_through=lambda: applied[0])
    r.run_pass()
    clock.now += 10
    r.recheck_due()
    assert not any(s.confirmed for s in r.suspects.values())
    clock.now += 10
    r.recheck_due()
    assert r.suspects == {}


def test_a_pipeline_lagging_longer_than_settle_delays_the_confirmation_without_preventing_it() -> None:
    """The pipeline 15 s behind, re-checks 10 s apart: each re-check's own moment is never caught up with, the moment
    the rows were found is, 15 s later."""
    clock = Clock()
    r = Reconciler(config(), MemorySide({1: 1}), MemorySide({}), lambda seconds: False, clock, clock,
                   applied_through=lambda: clock.now - 15)
    r.run_pass()
    clock.now += 10
    r.recheck_due()
    assert r.suspects[1].rechecks == 0 and r.rechecks_held == 1
    for _ in range(2):
        clock.now += 10
        r.recheck_due()
    assert r.suspects[1].confirmed and r.state().diverged["missing"] == 1
    assert not r.state().gate_open  # 15 s behind, settle_seconds 10: a row found now waits longer than its settle


def test_the_freshness_is_read_off_the_comparisons_thread_and_a_stale_reading_never_opens_the_gate() -> None:
    clock = Clock()
    listener = Listener(clock)
    listener.change(995.0)
    reads: list[Callable[[], None]] = []
    freshness = reader(listener, clock, spawn=reads.append)  # a read starts, and runs only when the test says
    assert freshness.applied_through() is None and len(reads) == 1  # nothing read yet: the gate closed, no wait
    assert freshness.applied_through() is None and len(reads) == 1  # one read at a time
    reads.pop()()
    assert freshness.applied_through() == 995.0 and freshness.readable is True
    clock.now += 0.5
    assert freshness.applied_through() == 995.0 and not reads  # read at most once a second
    clock.now += 0.5
    freshness.applied_through()
    listener.change(999.0)
    reads.pop()()
    assert freshness.applied_through() == 999.0
    clock.now += 1
    freshness.applied_through()
    listener.down = True  # this read times out: the last reading stands in (it says less than a new one would)
    reads.pop()()
    assert (freshness.applied_through(), freshness.readable) == (999.0, False)
    clock.now += 31  # for 30 s at most
    assert freshness.applied_through() is None


@pytest.mark.parametrize(("metric", "page", "through"), [
    ("cdcwatch_spark_freshness_seconds",  # counts heartbeats: the newest applied change's commit time is read instead
     'cdcwatch_spark_freshness_seconds{server="shop"} 0\n'
     'cdcwatch_spark_newest_applied_change_timestamp_seconds{server="shop",query="a"} 990\n'
     'cdcwatch_spark_newest_applied_change_timestamp_seconds{server="shop",query="b"} 980\n'
     'cdcwatch_spark_newest_applied_change_timestamp_seconds{server="other"} 900\n', 980.0),
    ("cdcwatch_spark_freshness_seconds", 'cdcwatch_spark_freshness_seconds{server="shop"} 0\n', None),
    ("my_job_applied_timestamp_seconds", 'my_job_applied_timestamp_seconds{server="shop"} 2000\n', 1000.0),
    ("my_job_lag_seconds", 'my_job_lag_seconds{server="shop"} 3\nmy_job_lag_seconds{server="shop",p="x"} 7\n', 993.0),
])
def test_a_reading_is_a_source_commit_time_never_more_than_the_read_can_know(metric: str, page: str,
                                                                          through: float | None) -> None:
    """The most behind of the matching series; an age from the moment the read started (a slow answer proves
    nothing later); never past that moment; the listener's heartbeat-counting freshness never read at all."""
    clock = Clock()

    def slow(url: str, timeout: float) -> str:
        clock.now += 2  # the answer takes 2 s
        return page

    freshness = reader(Listener(clock), clock, metric, fetch=slow)
    assert freshness.applied_through() == through and freshness.readable is (through is not None)


def test_the_freshness_gate_is_exported_per_pair() -> None:
    import time

    from cdcwatch.reconcile.collector import ReconcileCollector

    clock = Clock()
    listener = Listener(clock)
    collector = ReconcileCollector(config(freshness_url="http://listener:4041/metrics"), MemorySide({1: 1}),
                                   MemorySide({1: 1}))
    try:
        collector.freshness = reader(listener, clock)
        collector.reconciler.applied_through = collector.freshness.applied_through
        clock.now = time.time()
        values = {(f.name, s.name): s.value for f in collector.collect().families for s in f.samples}
        assert values[("cdcwatch_reconcile_freshness_gate_open", "cdcwatch_reconcile_freshness_gate_open")] == 0.0
        assert values[("cdcwatch_reconcile_freshness_readable", "cdcwatch_reconcile_freshness_readable")] == 0.0
        assert ("cdcwatch_reconcile_applied_through_timestamp_seconds",) * 2 not in values
        assert "freshness gate closed" in collector.collect().summary
        listener.change(clock.now - 1)
        clock.now += 1
        values = {(f.name, s.name): s.value for f in collector.collect().families for s in f.samples}
        assert values[("cdcwatch_reconcile_freshness_gate_open", "cdcwatch_reconcile_freshness_gate_open")] == 1.0
        assert values[("cdcwatch_reconcile_freshness_readable", "cdcwatch_reconcile_freshness_readable")] == 1.0
        assert values[("cdcwatch_reconcile_applied_through_timestamp_seconds",) * 2] == listener.newest_change
        assert values[("cdcwatch_reconcile_rechecks_held", "cdcwatch_reconcile_rechecks_held_total")] == 0.0
    finally:
        collector.close()


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
    from cdcwatch.config import ConfigError
    from cdcwatch.validation import parse_config

    text = f"reconcile:\n  - name: p\n    source: {{engine: postgres, user: u, table: public.t}}\n    target: {side}\n"
    with pytest.raises(ConfigError) as error:
        parse_config(text, env={})
    assert error.value.problems == [f"reconcile[0].target: {problem}"]


def test_a_failing_side_keeps_the_pair_down_until_both_answer() -> None:
    """The collector's thread retries a failed pass; between the retries the pair stays down (no divergence figure),
    and it is up again once both sides answer."""
    import time as clock

    from cdcwatch.reconcile.collector import ReconcileCollector
    from cdcwatch.tables.side import SideError
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
    from cdcwatch.tables.side import SideError

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


class ShapedSide(MemorySide):
    """A table whose columns (name → declared type) can change between passes."""

    def __init__(self, rows: dict[Key, int], columns: dict[str, str]) -> None:
        super().__init__(rows)
        self.columns = columns
        self.compared: list[str] = []

    def describe(self) -> Shape:
        from cdcwatch.tables.image import type_class

        return Shape("id", {name: Column(name, type_class(kind), 6, kind) for name, kind in self.columns.items()})

    def use(self, key: Column, columns: Sequence[Column]) -> None:
        self.compared = [c.name for c in columns]


def test_schema_drift_is_read_at_every_pass_and_a_missing_source_column_ages() -> None:
    """A column added at the source that the sink never adds: reported as source_only from the pass that first sees it
    on, its age counted from then; compared only once the target has it too. Types are compared by class and, on one
    engine, by their declared name."""
    clock = Clock()
    source = ShapedSide({1: 1}, {"id": "integer", "v": "text", "amount": "numeric"})
    target = ShapedSide({1: 1}, {"id": "integer", "v": "text", "amount": "numeric", "note": "text"})
    r = reconciler(source, target, clock, exclude_columns=["note"])
    r.run_pass()
    assert r.state().drift is not None and r.state().drift.counts() == {  # type: ignore[union-attr]
        "source_only": 0, "target_only": 0, "type_differs": 0}
    assert r.state().oldest_missing_column is None
    source.columns["email"] = "text"  # ALTER TABLE ADD COLUMN at the source
    target.columns["amount"] = "double precision"
    clock.now += 60
    r.run_pass()
    drift = r.state().drift
    assert drift is not None
    assert (drift.source_only, drift.target_only, drift.type_differs) == (
        ("email",), (), ("amount: numeric -> double precision",))
    assert r.state().oldest_missing_column == 1060.0
    assert source.compared == ["id", "v", "amount"]
    clock.now += 60
    r.run_pass()
    assert r.state().oldest_missing_column == 1060.0  # still the time it was first found missing
    target.columns["email"] = "text"  # the sink evolves its table
    r.run_pass()
    assert r.state().oldest_missing_column is None
    assert source.compared == ["id", "v", "amount", "email"]


def test_one_type_class_across_engines_is_no_drift() -> None:
    clock = Clock()
    source = ShapedSide({1: 1}, {"id": "integer", "at": "timestamp with time zone"})
    target = ShapedSide({1: 1}, {"id": "int", "at": "datetime"})
    side = {"engine": "mysql", "user": "u", "table": "db.t", "rows_per_second": 1e9}
    r = Reconciler(config(target=side), source, target, lambda seconds: False, clock, clock)  # type: ignore[arg-type]
    r.run_pass()
    assert r.state().drift is not None and r.state().drift.type_differs == ()  # type: ignore[union-attr]


def test_schema_drift_is_exported_per_pair_and_its_age_carries_over_a_reload() -> None:
    from cdcwatch.reconcile.collector import ReconcileCollector

    source = ShapedSide({1: 1}, {"id": "integer", "v": "text", "email": "text"})
    target = ShapedSide({1: 1}, {"id": "integer", "v": "text"})
    first = ReconcileCollector(config(), source, target)
    try:
        first.reconciler.run_pass()
        since = first.reconciler.missing_since["email"]
        second = ReconcileCollector(config(), source, target)
        second.inherit(first)
        assert second.reconciler.missing_since == {"email": since}
        second._first_answer.set()
        second.reconciler.run_pass()
        samples = {(s.name, s.labels.get("kind")): s.value for f in second.collect().families for s in f.samples}
        assert samples[("cdcwatch_reconcile_schema_drift_columns", "source_only")] == 1
        assert samples[("cdcwatch_reconcile_schema_drift_columns", "type_differs")] == 0
        assert samples[("cdcwatch_reconcile_oldest_missing_column_age_seconds", None)] >= 0
    finally:
        first.close()


class CanaryTable(MemorySide):
    """A target whose canary's newest time can be set (None: no row yet)."""

    def __init__(self, newest: float | None) -> None:
        super().__init__({})
        self.newest = newest
        self.asked: list[str] = []

    def newest_time(self, column: str) -> float | None:
        self.asked.append(column)
        return self.newest


def test_the_canary_in_the_target_opens_the_gate_only_once_it_is_newer_than_the_rows_found() -> None:
    """Without a listener, the gate reads the newest canary the target holds (the time the source wrote it): a re-check
    counts once the canary shows the target is through the moment the rows were found."""
    from cdcwatch.reconcile.freshness import CanaryFreshness

    clock = Clock()
    canary = CanaryTable(990.0)
    freshness = CanaryFreshness("t", canary, "ts", clock=clock, wall=clock, spawn=lambda read: read(), refresh=0)
    source, target = MemorySide({1: 10, 2: 20}), MemorySide({1: 10})
    r = Reconciler(config(), source, target, lambda seconds: False, clock, clock,  # type: ignore[arg-type]
                   applied_through=freshness.applied_through)
    r.run_pass()  # key 2 missing, found at 1000
    for _ in range(3):
        clock.now += 10
        r.recheck_due()
    assert kinds(r, confirmed=True) == {} and r.rechecks_held == 3
    canary.newest = clock.now - 1  # the canary written a second ago has landed
    for _ in range(2):
        clock.now += 10
        r.recheck_due()
    assert kinds(r, confirmed=True) == {2: "missing"}
    assert canary.asked and set(canary.asked) == {"ts"}


def test_a_target_without_a_canary_row_keeps_the_gate_closed() -> None:
    from cdcwatch.reconcile.freshness import CanaryFreshness

    clock = Clock()
    freshness = CanaryFreshness("t", CanaryTable(None), "ts", clock=clock, wall=clock, spawn=lambda read: read())
    assert freshness.applied_through() is None and freshness.readable is False
