"""Merging the Arrow batches' summaries into a micro-batch's observation: the commit-time percentiles of the
union are those of all its changes, exactly up to 100 changes a batch and within 1 % of the rank beyond."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.spark  # the decoder's side needs numpy (the spark extra)


def exact(values: list[float], fraction: float) -> float:
    """The smallest value with at least `fraction` of the values at most it."""
    ordered = sorted(values)
    return ordered[max(math.ceil(fraction * len(ordered) - 1e-9) - 1, 0)]


def rank(values: list[float], value: float) -> int:
    """How many values are at most `value`."""
    return sum(1 for v in values if v <= value)


def summaries(batches: list[list[float]]) -> list[dict]:
    """What the decoder summarises of batches of changes with these commit times (the rest left empty)."""
    import numpy as np

    from spark_listeners.decode import _commit_points
    from spark_listeners.latency import MEASURED_STAGES, PER_CHANGE_STAGES, stage_codes, stage_sum

    return [{"events": len(batch), "changes": len(batch), "malformed": 0, "oldest_commit": min(batch),
             "newest_commit": max(batch), "commit_points": _commit_points(np.array(batch)), "newest_heartbeat": None,
             "server_min": "shop", "server_max": "shop", "batch_time": 1.0,
             **{stage_codes(stage): [] for stage in PER_CHANGE_STAGES},
             **{stage_sum(stage, kind): 0.0 for stage, kind in MEASURED_STAGES}} for batch in batches]


commits = st.lists(st.integers(0, 10_000).map(float), min_size=1, max_size=100)


@settings(max_examples=200, deadline=None)
@given(st.lists(commits, min_size=1, max_size=6))
def test_small_batches_merge_to_the_exact_percentiles(batches: list[list[float]]) -> None:
    from spark_listeners.observation import PERCENTILES, merge_summaries

    merged = merge_summaries(summaries(batches))
    every = [value for batch in batches for value in batch]
    assert (merged["changes"], merged["oldest_commit"], merged["newest_commit"]) == (len(every), min(every), max(every))
    for name, fraction in PERCENTILES.items():
        assert merged[name] == exact(every, fraction), name


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 10_000).map(float), min_size=101, max_size=3000), min_size=1, max_size=4))
def test_large_batches_merge_within_one_percent_of_the_rank(batches: list[list[float]]) -> None:
    from spark_listeners.observation import PERCENTILES, merge_summaries

    merged = merge_summaries(summaries(batches))
    every = sorted(value for batch in batches for value in batch)
    for name, fraction in PERCENTILES.items():
        wanted = fraction * len(every)
        # the merged value's rank range (values below it, values at most it) comes within 1 % of the wanted rank
        below, at_most = rank(every, merged[name] - 0.5), rank(every, merged[name])
        assert below - 0.01 * len(every) <= wanted <= at_most + 0.01 * len(every), (name, below, at_most, wanted)


def test_per_code_counts_and_sums_add_up_and_absent_stages_stay_absent() -> None:
    from spark_listeners.latency import stage_codes, stage_sum
    from spark_listeners.observation import merge_summaries

    first, second = summaries([[5.0, 6.0], [7.0]])
    first[stage_codes("capture")] = [0, 2, 0, 1]
    second[stage_codes("capture")] = [1, 1]
    first[stage_sum("capture", "")], second[stage_sum("capture", "")] = 1500.0, 250.0
    second["server_max"], second["newest_heartbeat"], second["malformed"] = "zoo", 9.0, 2
    merged = merge_summaries([first, second])
    assert merged[stage_codes("capture")] == [(0, 1), (1, 3), (3, 1)]
    assert merged[stage_codes("produce")] == []
    assert merged[stage_sum("capture", "")] == 1750.0
    assert (merged["server_min"], merged["server_max"], merged["newest_heartbeat"], merged["malformed"]) == (
        "shop", "zoo", 9.0, 2)
    assert merged["events"] == 3


def test_no_summaries_is_an_empty_batch() -> None:
    from spark_listeners.observation import merge_summaries

    merged = merge_summaries([])
    assert (merged["events"], merged["changes"], merged["p50_commit"], merged["oldest_commit"]) == (0, 0, None, None)
