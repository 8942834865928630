"""The row estimate of a published table: reltuples once counted, else the live-row count."""

from __future__ import annotations

import pytest

from cdcwatch.postgres.slots import _estimate


@pytest.mark.parametrize(("reltuples", "live", "expected"), [
    (1200.0, 1500, 1200.0),  # analyzed: the planner's estimate, even when the live count has moved on
    (-1.0, 1500, 1500.0),  # PostgreSQL 14+: never vacuumed or analyzed
    (0.0, 1500, 1500.0),  # before 14 never analyzed, or analyzed empty and filled since
    (0.0, None, 0.0),  # analyzed empty, no statistics entry
    (-1.0, None, None),  # nothing known: no sample rather than a made-up 0
])
def test_estimate(reltuples: float, live: int | None, expected: float | None) -> None:
    assert _estimate(reltuples, live) == expected
