"""One micro-batch's observation, merged from the partial aggregates `decode_events` makes of each Arrow batch.

The decoder aggregates every Arrow batch it decodes, vectorized, into one `batch_summary` (null on every other
row); `instrument` observes only the list of those summaries, which costs the JVM next to nothing per row, and
the listener merges them here into the mapping `SparkMetrics.progress` takes: counts and sums added, minima and
maxima taken, per-code change counts added, and the commit-time percentiles read off the union of each
summary's commit points (each point stands for an equal share of its batch's changes: exact up to 100 changes
a batch, within 1 % of the rank beyond, as `percentile_approx` with accuracy 100 is).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from spark_listeners.latency import MEASURED_STAGES, PER_CHANGE_STAGES, stage_codes, stage_sum

__all__ = ["COMMIT_POINTS", "PERCENTILES", "merge_summaries"]

COMMIT_POINTS = 100
"""At most this many commit times per summary: all of them up to 100 changes, else the 1st … 100th percentile."""
PERCENTILES = {"p01_commit": 0.01, "p50_commit": 0.5}
"""The commit-time percentiles the listener reports apply lag at (99th and 50th of lag)."""
_ADDED = ("events", "changes", "malformed")
_LOWEST = ("oldest_commit", "server_min")
_HIGHEST = ("newest_commit", "newest_heartbeat", "server_max", "batch_time")


def _percentile(points: list[tuple[float, float]], total: float, fraction: float) -> float | None:
    """The smallest point whose points at most it weigh at least `fraction` of `total` (the inverted CDF)."""
    needed, seen = fraction * total, 0.0
    for value, weight in points:
        seen += weight
        if seen >= needed - 1e-9 * total:
            return value
    return points[-1][0] if points else None


def merge_summaries(summaries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The observation of a micro-batch (events, changes, malformed, oldest/newest commit, p01/p50 commit, newest
    heartbeat, server min/max, batch_time, and per measured stage its (code, changes) pairs and latency sum) from
    its Arrow batches' summaries."""
    merged: dict[str, Any] = {name: 0 for name in _ADDED}
    merged.update({name: None for name in (*_LOWEST, *_HIGHEST, *PERCENTILES)})
    codes: dict[str, dict[int, int]] = {stage: {} for stage in PER_CHANGE_STAGES}
    sums = {stage_sum(stage, timestamp_type): 0.0 for stage, timestamp_type in MEASURED_STAGES}
    points: list[tuple[float, float]] = []
    for summary in summaries:
        for name in _ADDED:
            merged[name] += summary[name] or 0
        for names, pick in ((_LOWEST, min), (_HIGHEST, max)):
            for name in names:
                if summary[name] is not None:
                    merged[name] = summary[name] if merged[name] is None else pick(merged[name], summary[name])
        for stage in PER_CHANGE_STAGES:
            for code, count in enumerate(summary[stage_codes(stage)] or ()):
                if count:
                    codes[stage][code] = codes[stage].get(code, 0) + count
        for name in sums:
            sums[name] += summary[name] or 0.0
        commits = summary["commit_points"] or ()
        if commits:
            share = (summary["changes"] or 0) / len(commits)
            points.extend((value, share) for value in commits)
    points.sort()
    for name, fraction in PERCENTILES.items():
        merged[name] = _percentile(points, merged["changes"], fraction)
    merged.update({stage_codes(stage): sorted(found.items()) for stage, found in codes.items()})
    merged.update(sums)
    return merged
