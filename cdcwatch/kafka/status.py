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
    scrape. The samples are kept flat, three items each in one list (a tenth of the memory of a deque of tuples:
    a cluster has tens of thousands of windows)."""

    __slots__ = ("_flat", "max_age", "rewinds", "shrinks", "size")

    def __init__(self, size: int, max_age: float) -> None:
        self._flat: list[float] = []
        """at, committed, lag of each sample, oldest first."""
        self.size = size
        self.max_age = max_age
        self.rewinds = 0
        self.shrinks = 0

    @property
    def samples(self) -> list[WindowSample]:
        flat = self._flat
        return [WindowSample(flat[i], int(flat[i + 1]), int(flat[i + 2])) for i in range(0, len(flat), 3)]

    def add(self, sample: WindowSample) -> None:
        self.observe(*sample)

    def observe(self, at: float, committed: int, lag: int) -> None:
        """`add` of a sample given as its fields (it runs for every group partition on every scrape)."""
        flat = self._flat
        if flat:
            self.rewinds += committed < flat[-2]
            self.shrinks += lag < flat[-1]
        flat += (at, committed, lag)
        while len(flat) > 3 * self.size or at - flat[0] > self.max_age:
            if len(flat) > 3:
                self.rewinds -= flat[4] < flat[1]
                self.shrinks -= flat[5] < flat[2]
            del flat[:3]

    def status(self, has_members: bool) -> ConsumerStatus:
        return STATUS_BY_CODE[self.code(has_members)]

    def code(self, has_members: bool) -> int:
        """The status by the table above, as its code (SEVERITY), over the window: with no rewind the committed
        offsets never decrease, so the offset moved if and only if the last differs from the first."""
        flat = self._flat
        if not flat:
            return _OK
        if self.rewinds:
            return _REWIND
        if len(flat) < 9 or flat[-1] == 0:
            return _OK
        if flat[-2] == flat[1]:
            return _STALL if has_members else _STOP
        if not self.shrinks and flat[-1] > flat[2]:
            return _WARN
        return _OK
