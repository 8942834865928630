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

__all__ = ["STATUS_BY_CODE", "ConsumerStatus", "StatusWindow", "WindowSample"]


class ConsumerStatus(enum.Enum):
    OK = "OK"
    WARN = "WARN"
    STALL = "STALL"
    STOP = "STOP"
    REWIND = "REWIND"


SEVERITY = {ConsumerStatus.OK: 0, ConsumerStatus.WARN: 1, ConsumerStatus.STALL: 2, ConsumerStatus.STOP: 3,
            ConsumerStatus.REWIND: 4}
"""Severity order (a topic's status is the worst of its partitions); also the exported status code."""
STATUS_BY_CODE = tuple(sorted(SEVERITY, key=SEVERITY.__getitem__))
_OK, _WARN, _STALL, _STOP, _REWIND = range(5)


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
        self.samples: deque[tuple[float, int, int]] = deque()
        """(at, committed, lag), oldest first: a WindowSample's fields."""
        self.size = size
        self.max_age = max_age
        self.rewinds = 0
        self.shrinks = 0

    def add(self, sample: WindowSample) -> None:
        self.observe(*sample)

    def observe(self, at: float, committed: int, lag: int) -> None:
        """`add` of a sample given as its fields (it runs for every group partition on every scrape)."""
        samples = self.samples
        if samples:
            last = samples[-1]
            self.rewinds += committed < last[1]
            self.shrinks += lag < last[2]
        samples.append((at, committed, lag))  # a plain tuple: WindowSample's fields, built faster
        while len(samples) > self.size or at - samples[0][0] > self.max_age:
            oldest = samples.popleft()
            if samples:
                following = samples[0]
                self.rewinds -= following[1] < oldest[1]
                self.shrinks -= following[2] < oldest[2]

    def status(self, has_members: bool) -> ConsumerStatus:
        return STATUS_BY_CODE[self.code(has_members)]

    def code(self, has_members: bool) -> int:
        """The status by the table above, as its code (SEVERITY), over the window: with no rewind the committed
        offsets never decrease, so the offset moved if and only if the last differs from the first."""
        samples = self.samples
        if not samples:
            return _OK
        if self.rewinds:
            return _REWIND
        first, last = samples[0], samples[-1]
        if len(samples) < 3 or last[2] == 0:
            return _OK
        if last[1] == first[1]:
            return _STALL if has_members else _STOP
        if not self.shrinks and last[2] > first[2]:
            return _WARN
        return _OK
