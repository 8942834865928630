"""The benchmarks' endpoints scraped by a real Prometheus (the Debian package, started by devstack/prometheus.py) with
its default scrape settings but for the interval, the figures read back from Prometheus itself.

Prometheus asks as it asks any target: its own Accept header (OpenMetrics first), gzip, a kept-alive connection, its
default scrape timeout (10 s, which Prometheus caps at the interval: with the 5 s interval here, 5 s). For each scrape
it writes `up`, `scrape_duration_seconds` (the request until the answer is read, decompressed, parsed and its samples
appended: Prometheus reports it once the append is done, so it grows with the samples however fast the target
answers; bench/replay.py measures that share) and `scrape_samples_scraped`; the benchmarks read those over the HTTP API
(`PrometheusServer.scrapes`).

The benchmarks scrape in windows: Prometheus' configuration holds only the jobs being measured (reloaded between
windows), and a window lasts until every target of those jobs has been scraped `scrapes` + 1 times. The first scrape
of each target in a window is not counted: it is the first after the exporter was continued (or after the
configuration changed) and its new connection.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from cdcwatch.promapi import PrometheusApi
from devstack.procs import wait_for
from devstack.prometheus import PrometheusServer, Scrape

INTERVAL = "5s"
"""The scrape interval: short, to get many scrapes in a run (Prometheus' own default is 1 minute)."""

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_seconds(text: str) -> float:
    """A Prometheus duration such as `5s`, `500ms` or `1m30s`, in seconds."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(number) * _UNITS[unit] for number, unit in parts)


def job_name(name: str) -> str:
    """A job name for an exporter's name in the tables (`cdcwatch, lag in messages only`: `cdcwatch_lag_in_messages_only`)."""
    return re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_") or "job"


def percentile(samples: list[float], fraction: float) -> float:
    return sorted(samples)[int(fraction * (len(samples) - 1))]


@dataclass
class Window:
    """The counted scrapes of one window, by job, each job's oldest first."""

    scrapes: dict[str, list[Scrape]]
    started: float
    """When the window began (Unix seconds): the configuration was reloaded just after."""


class PrometheusScraper:
    """A Prometheus that scrapes only the jobs of the window being measured."""

    def __init__(self, work: Path, interval: str = INTERVAL) -> None:
        self.server = PrometheusServer(work / "prometheus", {}, interval=interval, default_timeout=True)
        self.interval = duration_seconds(interval)
        self.settings = ""

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def pid(self) -> int:
        pid = self.server.server.pid if self.server.server else None
        if pid is None:
            raise RuntimeError("Prometheus is not running")
        return pid

    def start(self) -> None:
        self.server.start()
        api = PrometheusApi(self.server.url)
        version = api.get("/api/v1/status/buildinfo")["version"]
        loaded = yaml.safe_load(api.get("/api/v1/status/config")["yaml"])["global"]
        self.settings = (f"Prometheus {version} (Debian's package), its default scrape settings (Accept header, gzip) "
                         f"but the interval: scrape_interval {loaded['scrape_interval']}, scrape_timeout "
                         f"{loaded['scrape_timeout']} (its default 10s, capped at the interval)")

    def stop(self) -> None:
        self.server.stop()

    def window(self, jobs: dict[str, list[str]], scrapes: int, counting: Callable[[], None] | None = None) -> Window:
        """Scrape only `jobs` (job → host:port targets) until every target has been scraped `scrapes` + 1 times;
        the counted scrapes: every target's but its first. `counting` is called once every target's first scrape is
        stored. Prometheus scrapes nothing once the window is over."""
        started = time.time()
        self.server.set_jobs(jobs)
        try:
            return self._counted(jobs, scrapes, started, counting)
        finally:
            self.server.set_jobs({})  # nothing scraped between windows

    def _counted(self, jobs: dict[str, list[str]], scrapes: int, started: float,
                 counting: Callable[[], None] | None) -> Window:
        def stored(wanted: int) -> bool:
            for job, targets in jobs.items():
                counts: dict[str, int] = {}
                for labels, points in self.server.raw(f'up{{job="{job}"}}', started).items():
                    counts[dict(labels)["instance"]] = len(points)
                if any(counts.get(target, 0) < wanted for target in targets):
                    return False
            return True

        wait_for(lambda: stored(1), 2 * self.interval + 60, f"Prometheus' first scrape of {', '.join(jobs)}", interval=0.25)
        if counting is not None:
            counting()
        wait_for(lambda: stored(scrapes + 1), (scrapes + 2) * self.interval + 120,
                 f"{scrapes + 1} scrapes of {', '.join(jobs)} by Prometheus", interval=0.25)
        counted: dict[str, list[Scrape]] = {}
        for job in jobs:
            by_target: dict[str, list[Scrape]] = {}
            for scrape in self.server.scrapes(job, started):
                by_target.setdefault(scrape.instance, []).append(scrape)
            counted[job] = sorted((s for found in by_target.values() for s in found[1:scrapes + 1]),
                                  key=lambda s: (s.timestamp, s.instance))
        return Window(counted, started)

    def raw(self, selector: str, since: float) -> dict[frozenset[tuple[str, str]], list[tuple[float, float]]]:
        return self.server.raw(selector, since)


def summary(scrapes: list[Scrape]) -> str:
    """p50 / p95 of the scrapes' durations, how many were up, and the samples they scraped (median)."""
    seconds = [s.duration for s in scrapes]
    up = sum(1 for s in scrapes if s.up == 1)
    return (f"p50 {statistics.median(seconds):.3f}s p95 {percentile(seconds, 0.95):.3f}s, up {up}/{len(scrapes)}, "
            f"samples {statistics.median([s.samples for s in scrapes]):.0f}")
