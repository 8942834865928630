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
    """The last `size` samples of one group partition, no older than `max_age` seconds."""

    def __init__(self, size: int, max_age: float) -> None:
        self.samples: deque[WindowSample] = deque(maxlen=size)
        self.max_age = max_age

    def add(self, sample: WindowSample) -> None:
        self.samples.append(sample)
        while self.samples and sample.at - self.samples[0].at > self.max_age:
            self.samples.popleft()

    def status(self, has_members: bool) -> ConsumerStatus:
        """One pass over the window (this runs for every group partition on every scrape)."""
        samples = self.samples
        if not samples:
            return ConsumerStatus.OK
        first = previous = samples[0]
        moved, lag_never_shrank = False, True
        for sample in samples:
            if sample.committed < previous.committed:
                return ConsumerStatus.REWIND
            moved = moved or sample.committed != first.committed
            lag_never_shrank = lag_never_shrank and sample.lag >= previous.lag
            previous = sample
        last = previous
        if len(samples) < 3 or last.lag == 0:
            return ConsumerStatus.OK
        if not moved:
            return ConsumerStatus.STALL if has_members else ConsumerStatus.STOP
        if lag_never_shrank and last.lag > first.lag:
            return ConsumerStatus.WARN
        return ConsumerStatus.OK
