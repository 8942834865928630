"""Consumer status without thresholds, Burrow-style, over a sliding window of samples per group partition.

| status | when (evaluated in this order over the window) |
|---|---|
| REWIND | the committed offset went backwards between two samples |
| OK | the latest lag is 0, or fewer than 3 samples are known |
| STOP | the committed offset did not move over the whole window, lag > 0, and the group has no live member |
| STALL | the committed offset did not move over the whole window, lag > 0, and members are connected |
| WARN | the lag grew at every sample of the window (never shrank) |
| OK | otherwise |
"""

from __future__ import annotations

import enum
from collections import deque
from typing import NamedTuple

__all__ = ["ConsumerStatus", "WindowSample", "StatusWindow"]


class ConsumerStatus(enum.Enum):
    OK = "OK"
    WARN = "WARN"
    STALL = "STALL"
    STOP = "STOP"
    REWIND = "REWIND"


SEVERITY = {ConsumerStatus.OK: 0, ConsumerStatus.WARN: 1, ConsumerStatus.STALL: 2, ConsumerStatus.STOP: 3,
            ConsumerStatus.REWIND: 4}
"""Severity order (a topic's status is the worst of its partitions); also the exported status code."""


class WindowSample(NamedTuple):
    at: float
    committed: int
    lag: int


class StatusWindow:
    """The last `size` samples of one group partition, no older than `max_age` seconds.

    The adjacent pairs where the committed offset went back (`rewinds`) and where the lag shrank (`shrinks`) are
    counted as samples come and go, so `status` is constant time: it runs for every group partition on every
    scrape."""

    def __init__(self, size: int, max_age: float) -> None:
        self.samples: deque[WindowSample] = deque()
        self.size = size
        self.max_age = max_age
        self.rewinds = 0
        self.shrinks = 0

    def _count(self, older: WindowSample, newer: WindowSample, sign: int) -> None:
        self.rewinds += sign * (newer.committed < older.committed)
        self.shrinks += sign * (newer.lag < older.lag)

    def _drop_oldest(self) -> None:
        oldest = self.samples.popleft()
        if self.samples:
            self._count(oldest, self.samples[0], -1)

    def add(self, sample: WindowSample) -> None:
        samples = self.samples
        if samples:
            self._count(samples[-1], sample, 1)
        samples.append(sample)
        while len(samples) > self.size or sample.at - samples[0].at > self.max_age:
            self._drop_oldest()

    def status(self, has_members: bool) -> ConsumerStatus:
        """The table above, over the window: with no rewind the committed offsets never decrease, so the
        offset moved if and only if the last differs from the first."""
        samples = self.samples
        if not samples:
            return ConsumerStatus.OK
        if self.rewinds:
            return ConsumerStatus.REWIND
        first, last = samples[0], samples[-1]
        if len(samples) < 3 or last.lag == 0:
            return ConsumerStatus.OK
        if last.committed == first.committed:
            return ConsumerStatus.STALL if has_members else ConsumerStatus.STOP
        if not self.shrinks and last.lag > first.lag:
            return ConsumerStatus.WARN
        return ConsumerStatus.OK
