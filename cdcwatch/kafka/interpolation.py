"""Lag in seconds where the broker keeps no message timestamps (Kafka < 0.10): interpolate the time
the next message was written from (time, end offset) samples of its partition.
"""

from __future__ import annotations

from collections import deque

__all__ = ["EndOffsetHistory"]


class EndOffsetHistory:
    """When a partition's end offset reached which value, sampled once per scrape."""

    def __init__(self, size: int = 120) -> None:
        self.samples: deque[tuple[float, int]] = deque(maxlen=size)

    def add(self, at: float, end_offset: int) -> None:
        """Keep the first time each end offset was seen; a smaller end (the topic was recreated) starts over."""
        if self.samples and end_offset < self.samples[-1][1]:
            self.samples.clear()
        if not self.samples or end_offset != self.samples[-1][1]:
            self.samples.append((at, end_offset))

    def written_at(self, offset: int) -> float | None:
        """Estimated time the message at `offset` was written; None if it is not written yet.

        Between two samples the end offset is taken to grow linearly. A message older than every
        sample gets the oldest sample's time, so the lag is a lower bound until history builds up.
        """
        if not self.samples or offset >= self.samples[-1][1]:
            return None
        previous_at, previous_end = self.samples[0]
        if offset < previous_end:
            return previous_at
        for at, end in list(self.samples)[1:]:
            if offset < end:  # written between the previous sample and this one
                return previous_at + (at - previous_at) * (offset - previous_end + 1) / (end - previous_end)
            previous_at, previous_end = at, end
        return None
