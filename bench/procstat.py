"""What the benchmarks read about their processes from /proc: CPU time used, peak resident memory, and a trace of CPU
time over a run, to tell what a process spent within a span (one Prometheus scrape, or a run of them)."""

from __future__ import annotations

import bisect
import os
import threading
import time
from pathlib import Path


def stat_cpu_seconds(stat: str) -> float:
    """User plus system CPU time in a /proc/.../stat line (fields 14 and 15, counted after the name's ')')."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int | None]) -> float:
    """User plus system CPU time the processes (and their threads) have used so far."""
    return sum(stat_cpu_seconds(Path(f"/proc/{pid}/stat").read_text()) for pid in pids if pid is not None)


def peak_rss_mib(pid: int) -> float:
    """The most resident memory the process has had (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


class CpuTrace:
    """The CPU time each of some processes has used, sampled from /proc every `every` seconds in a thread of its own,
    with the wall-clock time of each sample (as Prometheus stamps its scrapes), so that the CPU a process spent
    between two moments can be read afterwards (`spent`), interpolated between the samples on either side.

    /proc counts in clock ticks (10 ms); over a run of scrapes the rounding evens out, over one short span it does
    not. A process that has exited keeps its last figure."""

    def __init__(self, pids: dict[str, int], every: float = 0.02) -> None:
        self.pids = dict(pids)
        self.every = every
        self.times: list[float] = []
        self.cpu: dict[str, list[float]] = {who: [] for who in self.pids}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-trace", daemon=True)

    def start(self) -> CpuTrace:
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def sample(self) -> None:
        """One sample now (the trace reaches the present: call it before reading spans that end just now)."""
        before = time.time()
        read: dict[str, float] = {}
        for who, pid in list(self.pids.items()):
            try:
                read[who] = cpu_seconds([pid])
            except (OSError, IndexError, ValueError):  # exited
                read[who] = self.cpu[who][-1] if self.cpu[who] else 0.0
        moment = (before + time.time()) / 2
        with self._lock:
            self.times.append(moment)
            for who, figures in self.cpu.items():  # one watched since the reading: its last figure again
                figures.append(read.get(who, figures[-1] if figures else 0.0))

    def watch(self, pids: dict[str, int]) -> None:
        """Trace these processes too from now on (the trace before now says they spent nothing)."""
        read = {who: cpu_seconds([pid]) for who, pid in pids.items()}
        with self._lock:
            self.pids.update(pids)
            for who, seconds in read.items():
                self.cpu[who] = [seconds] * len(self.times)

    def at(self, who: str, moment: float) -> float:
        """The CPU seconds `who` had used at `moment` (Unix seconds), interpolated between the samples around it."""
        with self._lock:
            times, cpu = self.times, self.cpu[who]
            if not times:
                raise ValueError("no sample taken yet")
            if moment <= times[0]:
                return cpu[0]
            if moment >= times[-1]:
                if moment > times[-1] + 2 * self.every + 1:
                    raise ValueError(f"{moment:.3f} is beyond the trace (last sample {times[-1]:.3f})")
                return cpu[-1]
            after = bisect.bisect_right(times, moment)
            t0, t1 = times[after - 1], times[after]
            c0, c1 = cpu[after - 1], cpu[after]
            return c0 + (c1 - c0) * (moment - t0) / (t1 - t0) if t1 > t0 else c1

    def spent(self, who: str | list[str], start: float, end: float) -> float:
        """The CPU seconds `who` (one process, or several summed) used between `start` and `end`."""
        names = [who] if isinstance(who, str) else who
        return sum(self.at(name, end) - self.at(name, start) for name in names)
