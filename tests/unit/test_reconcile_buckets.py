"""The whole-table pass's own logic on in-memory sides (`cdcwatch.reconcile.bucketed`): bucket planning, digests
by bucket, reading back only the differing buckets, confirmation as the chunk walk confirms; and the Spark job's
configuration (`ReconcileJobConfig`) and its refusal of a bad file."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from cdcwatch.config import ConfigError, ReconcileJobConfig, SparkReconcileConfig, parse_yaml_model
from cdcwatch.reconcile.bucketed import BucketedReconciler
from cdcwatch.tables.buckets import Buckets, plan_buckets
from cdcwatch.tables.image import Column
from cdcwatch.tables.side import Digest, Key, Shape, SideError
from tests.unit.test_reconcile import Clock, MemorySide, kinds


def bucket_of(plan: Buckets, key: Key) -> int:
    """What the engines' bucket expressions compute (`pg_bucket`, `spark_bucket`), here for integer keys; text keys
    by Python's own hash (any function both sides share)."""
    if plan.low is not None:
        assert isinstance(key, int)
        return (key - plan.low) // plan.width
    return hash(key) % plan.count


class BucketMemorySide(MemorySide):
    def __init__(self, rows: dict[Key, int], key_type: str = "integer") -> None:
        super().__init__(rows)
        self.key_type = key_type
        self.read_back: list[list[int]] = []
        self.paced = 0

    def describe(self) -> Shape:
        return Shape("id", {"id": Column("id", self.key_type), "v": Column("v", "text")})  # type: ignore[arg-type]

    def estimated_rows(self) -> int:
        return len(self.rows)

    def key_bounds(self) -> tuple[int, int] | None:
        keys = [k for k in self.rows if isinstance(k, int)]
        return (min(keys), max(keys)) if keys else None

    def bucket_digests(self, plan: Buckets, pace: Callable[[], None]) -> dict[int, Digest]:
        found: dict[int, Digest] = {}
        for key, row in self.rows.items():
            b = bucket_of(plan, key)
            before = found.get(b, Digest(0, 0))
            found[b] = Digest(before.rows + 1, before.checksum + row)
        self.rows_read += len(self.rows)
        self.paced += 1
        pace()
        return found

    def bucket_rows(self, plan: Buckets, buckets: Sequence[int]) -> dict[Key, int]:
        self.read_back.append(sorted(buckets))
        found = {k: v for k, v in self.rows.items() if bucket_of(plan, k) in buckets}
        self.rows_read += len(found)
        return found


def job_pair(**settings: object) -> SparkReconcileConfig:
    side = {"engine": "postgres", "user": "u", "table": "public.t", "rows_per_second": 1e9}
    return SparkReconcileConfig.model_validate({"name": "t", "source": side, "target": side, "chunk_rows": 100,
                                                "settle_seconds": 10, "confirm_rechecks": 2, **settings})


def bucketed(source: BucketMemorySide, target: BucketMemorySide, clock: Clock, **settings: object) -> BucketedReconciler:
    return BucketedReconciler(job_pair(**settings), source, target, lambda seconds: False, clock, clock)  # type: ignore[arg-type]


def test_integer_buckets_spread_the_sources_keys_about_chunk_rows_each() -> None:
    plan = plan_buckets(10_000, 100, (1, 10_000), integer=True)
    assert (plan.count, plan.low, plan.width) == (100, 1, 100)
    sparse = plan_buckets(1_000, 100, (0, 10**12 - 1), integer=True)  # sparse keys: as many buckets, wider
    assert sparse.count == 10 and sparse.width == 10**11
    assert plan_buckets(5, 100, None, integer=True).count == 1
    assert plan_buckets(1_001, 100, None, integer=False) == Buckets(11, rows_per_bucket=100)


def test_a_pass_reads_back_only_the_buckets_that_differ_and_classifies_their_rows() -> None:
    rows: dict[Key, int] = {k: k * 7 for k in range(1, 1001)}
    target = dict(rows)
    del target[10]
    target[505] = 1
    target[5000] = 3
    source_side, target_side = BucketMemorySide(rows), BucketMemorySide(target)
    clock = Clock()
    r = bucketed(source_side, target_side, clock)
    r.run_pass()
    assert kinds(r, confirmed=False) == {10: "missing", 505: "different", 5000: "extra"}
    # 10 buckets of 100 keys from 1; 5000 lies beyond the source's largest key, in a bucket of its own
    assert source_side.read_back == target_side.read_back == [[0, 5, 49]]
    assert r.chunks_checked == 11
    for _ in range(2):
        clock.now += 10
        r.recheck_due()
    assert kinds(r, confirmed=True) == {10: "missing", 505: "different", 5000: "extra"}


def test_text_keys_are_bucketed_by_hash_and_read_back_the_same_way() -> None:
    rows: dict[Key, int] = {f"k{n}": n for n in range(500)}
    target = {**rows, "k7": 0}
    r = bucketed(BucketMemorySide(rows, "text"), BucketMemorySide(target, "text"), Clock())
    r.run_pass()
    assert kinds(r, confirmed=False) == {"k7": "different"}


def test_agreeing_sides_read_nothing_back() -> None:
    rows: dict[Key, int] = {k: k for k in range(1, 301)}
    source_side, target_side = BucketMemorySide(rows), BucketMemorySide(dict(rows))
    r = bucketed(source_side, target_side, Clock())
    r.run_pass()
    assert r.suspects == {} and source_side.read_back == [] and r.last_pass_end is not None


def test_the_next_pass_plans_from_the_rows_the_last_one_counted() -> None:
    rows: dict[Key, int] = {k: k for k in range(1, 2001)}
    source_side = BucketMemorySide(rows)
    source_side.estimated_rows = lambda: 0  # type: ignore[method-assign]  # statistics not gathered yet
    target_side = BucketMemorySide({})
    r = bucketed(source_side, target_side, Clock())
    r.run_pass()  # planned as one bucket: every row differs in it
    assert r.rows_last_pass == 2000
    assert r.plan().count == 20


def test_the_budget_is_paid_per_query_of_a_pass() -> None:
    rows: dict[Key, int] = {k: k for k in range(1, 1001)}
    clock = Clock()
    r = BucketedReconciler(job_pair(source={"engine": "postgres", "user": "u", "table": "public.t",
                                            "rows_per_second": 100}),
                           BucketMemorySide(rows), BucketMemorySide(dict(rows)), clock.wait, clock, clock)  # type: ignore[arg-type]
    start = clock.now
    r.run_pass()
    r.run_pass()
    # the first pass's 1,000 source rows (and its 2 key reads) are paid before the second pass reads the source
    assert clock.now - start >= 10


def test_keys_of_different_classes_on_the_two_sides_are_refused() -> None:
    r = bucketed(BucketMemorySide({1: 1}), BucketMemorySide({"1": 1}, "text"), Clock())
    with pytest.raises(SideError, match="both sides must hold it as an integer, or both as text"):
        r.run_pass()


def test_the_jobs_pairs_may_have_a_delta_target_the_exporters_may_not() -> None:
    pair = job_pair(target={"engine": "delta", "uri": "/data/cdc/postgres.public.t"})
    assert pair.target.location == "delta at /data/cdc/postgres.public.t"
    with pytest.raises(ValueError, match="freshness_url"):
        job_pair(target={"engine": "delta", "uri": "/x"}, freshness_canary={"table": "public.c"})
    from cdcwatch.config import ReconcileConfig

    with pytest.raises(ValueError, match="engine"):
        ReconcileConfig.model_validate(job_pair().model_dump() | {"target": {"engine": "delta", "uri": "/x"}})


def test_a_job_configuration_names_each_pair_once() -> None:
    text = ("reconcile:\n"
            "  - {name: a, source: {engine: postgres, user: u, table: public.t}, target: {engine: delta, uri: /d}}\n"
            "  - {name: a, source: {engine: postgres, user: u, table: public.t}, target: {engine: delta, uri: /e}}\n")
    with pytest.raises(ConfigError, match="a given more than once"):
        parse_yaml_model(text, ReconcileJobConfig, "job.yml")


@pytest.mark.spark
def test_the_job_exits_2_on_a_bad_configuration_before_starting_spark(tmp_path, capsys) -> None:
    from spark_listeners.reconcile import main

    bad = tmp_path / "job.yml"
    bad.write_text("reconcile:\n  - {name: a, source: {engine: postgres, user: u, table: t}, target: {engine: delta}}\n")
    assert main(["--config.file", str(bad)]) == 2
    error = capsys.readouterr().err
    assert "job.yml" in error and "target.delta.uri: required key is missing" in error and "table" in error


def test_the_job_configuration_shown_in_its_page_loads() -> None:
    from tests.unit.test_docs import ROOT, blocks

    [shown] = [b for b in blocks(ROOT / "docs" / "reconcile-spark.md", "yaml") if b.startswith("reconcile:")]
    config = parse_yaml_model(shown, ReconcileJobConfig, "docs/reconcile-spark.md", env={"RECONCILE_SOURCE_PASSWORD": "x"})
    assert config.reconcile[0].target.location == "delta at s3a://lake/cdc/shop.public.customers"
