"""Scrapes of the kafka collector on 50 groups x 200 partitions of a Kafka 4 broker, beside kminion, Burrow, kafka_exporter.

The peer exporters run when their binaries are given; Apache Kafka's own `kafka-consumer-groups --describe
--all-groups` runs on the same broker too (in the Python scraper's rounds).

Two phases: offsets static, then moving (a producer writes and every group commits further, once a second, in the
background, so the caches cannot turn it into a static best case). Each phase is scraped by one or two scrapers
(`--scraper`, default both), whose figures are printed and plotted Prometheus' first:

- **prometheus**: a real Prometheus (the Debian package) with its default scrape settings but the interval
  (`--interval`, 5 s; its default timeout is then capped at 5 s): its own Accept header, which asks for OpenMetrics
  first, gzip, a kept-alive connection. Each exporter is scraped in windows of `--window` scrapes (Prometheus'
  configuration holds that exporter's job only; the windows rotate over the exporters until each has `--scrapes`
  counted), and `up`, `scrape_duration_seconds` and `scrape_samples_scraped` are read from Prometheus itself. The
  first scrape of each window is not counted (bench/prometheus_scrape.py). CPU per scrape: the process's CPU time
  from its first counted scrape of a window to its last, background work included, over the scrapes between.
- **python**: this process scrapes, as Prometheus would but asking for the text format 0.0.4 (no Accept header):
  gzip, a kept-alive connection, the whole answer read and decompressed (its parsing here is not timed); exporters
  in turn, interleaved (the first of each round rotating); CPU over the phase, background work included.

With `--replay`, Prometheus also scrapes bench/replay.py answering with cdcwatch's and kminion's recorded answers
(the same bytes and headers from a server that does nothing else): `scrape_duration_seconds` includes Prometheus'
parsing and appending of the samples, and a replay's p50 is that share alone.

Either way, while one exporter is scraped the others are paused (SIGSTOP, then SIGCONT), so that one exporter's
background work (Burrow reads every commit) does not load another's scrape; `--side-by-side` leaves them running
(Prometheus then scrapes every exporter at once, each at its own offset in the interval). Printed per exporter and
phase: p50/p95 scrape time, series (samples), bytes (Python scraper: as sent, gzip, and as text), CPU seconds of its
process, its peak RSS, and (Prometheus) the CPU Prometheus spent per scrape of it.

Before anything moves, every exporter's lag per group partition is compared with the broker's own answer (the
AdminClient's committed and end offsets), each exporter's known differences named. Group 0 leaves partition 0 without
a commit, so what each one answers for such a partition shows.

cdcwatch runs twice: with its defaults, and configured for what kminion exports (lag in messages per partition:
`lag_seconds`, `freshness` and `retention` off).

Goals, on the figures Prometheus measured: cdcwatch with its defaults p50 <= kminion's; configured for kminion's
output, p50 and CPU per scrape <= 0.7 x kminion's; cdcwatch's peak RSS <= 64 MiB at 10,000 group partitions; at
100,000 group partitions (`--scale`: 500 groups x 200 partitions), p50 < 2 s with its defaults and peak RSS < 300
MiB. Targets on the Python scraper's figures (text 0.0.4), as before: cdcwatch p50 <= 250 ms at partition
granularity; with kminion in the run, cdcwatch (lag in messages only) p50 and CPU per scrape <= kminion's, and
cdcwatch with its defaults p50 <= 1.5 x kminion's. Each is printed MET or NOT MET.

    CDCWATCH_PEERS_BIN=.cdcwatch/peers/bin .venv/bin/python bench/kafka_lag.py [--scraper prometheus|python|both]
        [--interval 5s] [--window 5] [--groups 50] [--partitions 200] [--scale] [--scrapes 25]
        [--granularity topic] [--peers-bin DIR] [--peers kminion,Burrow,kafka_exporter] [--no-tool]
        [--side-by-side] [--replay] [--profile]
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml  # noqa: E402
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import OffsetSpec  # noqa: E402

from bench.kafka_peers import KMINION, PEERS, Exporter, GroupPartition, peer_binaries, start_cdcwatch, start_peer, start_replay  # noqa: E402
from bench.plots import save_percentile_panels, save_timing_panels  # noqa: E402
from bench.procstat import CpuTrace, cpu_seconds, peak_rss_mib  # noqa: E402
from bench.prometheus_scrape import INTERVAL, PrometheusScraper, Window, job_name  # noqa: E402
from bench.scrape import Scraper  # noqa: E402
from cdcwatch.config import KafkaClusterConfig  # noqa: E402
from devstack.kafka import KafkaBroker  # noqa: E402
from devstack.procs import StackError, exit_on_sigterm, wait_for  # noqa: E402
from devstack.prometheus import Scrape  # noqa: E402
from devstack.samples import Values, parse, value  # noqa: E402

TOPIC = "benchsrv.public.rows"
TARGET_P50_SECONDS = 0.25
"""The Python scraper's target (text 0.0.4): cdcwatch's p50 at partition granularity."""
GOAL_AS_KMINION_SHARE = 0.7
"""Prometheus-measured goal: cdcwatch configured for kminion's output, p50 and CPU per scrape at most this share of
kminion's."""
GOAL_RSS_MIB = {10_000: 64.0, 100_000: 300.0}
"""Prometheus-measured goals: cdcwatch's peak RSS (with its defaults) at most this at so many group partitions."""
GOAL_SCALE_P50_SECONDS = 2.0
"""Prometheus-measured goal at 100,000 group partitions: cdcwatch's p50 with its defaults under this."""
SCALE = (500, 200)
"""`--scale`: groups x partitions, 100,000 group partitions."""
PROMETHEUS = "Prometheus"
PYTHON = "python"
CDCWATCH = "cdcwatch"
CDCWATCH_AS_KMINION = "cdcwatch, lag in messages only"
CDCWATCH_EVERY_PARTITION = "cdcwatch, every group partition"
"""`--scale`: cdcwatch with its defaults but the caps raised to report all: `max_partitions` (by default 50,000) to
100,000 and `limits.max_series_per_target` (by default 250,000) to EVERY_PARTITION_SERIES."""
EVERY_PARTITION_SERIES = 500_000
"""Room for 4 series per group partition at 100,000 and the topic and group series."""
DEFAULT_CAP = KafkaClusterConfig.model_fields["max_partitions"].default
"""The group partitions cdcwatch reports at most with its defaults (the rest are counted as dropped)."""
AS_KMINION: dict[str, Any] = {"lag_seconds": False, "freshness": False, "retention": False, "committed_offsets": False,
              "status": {"enabled": False}}
"""What leaves cdcwatch with kminion's information: lag in messages per group partition, and the topics' offsets."""
TEXT_0_0_4 = "text/plain;version=0.0.4"
UNCOMMITTED: tuple[int, int] = (0, 0)
"""(group number, partition) left without a commit."""


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def percentile(samples: list[float], fraction: float) -> float:
    return sorted(samples)[int(fraction * (len(samples) - 1))]


def commits(group_number: int, partitions: int, step: int) -> list[TopicPartition]:
    """The fixture's commit of one group: its partitions lag 0-4 messages behind `step`, one left without a commit."""
    return [TopicPartition(TOPIC, p, (group_number + p) % 5 + step - 5) for p in range(partitions)
            if (group_number, p) != UNCOMMITTED]


def retriable(error: KafkaError) -> bool:
    """An error a commit meets while the group coordinator moves or loads (librdkafka does not mark them retriable in
    an admin request's answer)."""
    return error.retriable() or error.code() in (KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                                                 KafkaError.COORDINATOR_LOAD_IN_PROGRESS)


def commit_all(admin: Any, groups: list[str], partitions: int, step: int, timeout: float = 120) -> None:
    """Every group's commit of the fixture at `step`, through one AdminClient: an offset commit per group, all in
    flight at once (the groups have no members, as a consumer's commit without a subscription leaves them); a group
    whose commit meets a retriable error (the coordinator not ready yet, as on a new broker) is committed again."""
    deadline = time.monotonic() + timeout
    pending = dict(enumerate(groups))
    while pending:
        futures = {n: future for n, group in pending.items() for future in admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, commits(n, partitions, step))], request_timeout=timeout).values()}
        retry: dict[int, str] = {}
        for n, future in futures.items():
            try:
                failed = [tp.error for tp in future.result().topic_partitions if tp.error is not None]
            except KafkaException as exc:
                failed = [exc.args[0]]
            if failed and all(retriable(error) for error in failed) and time.monotonic() < deadline:
                retry[n] = pending[n]
            elif failed:
                raise RuntimeError(f"commit of {pending[n]} failed: {failed[0]} (and {len(failed) - 1} more)")
        pending = retry
        if pending:
            time.sleep(0.2)  # the coordinator moving or loading: ask again shortly


def keep_moving(kafka: KafkaBroker, groups: list[str], partitions: int, stop: threading.Event,
                moved: threading.Event, rounds: list[float]) -> None:
    """Writes a message to every partition and moves every group's commit one further, then waits a second, over and
    over (setting `moved` after each round, and adding how long it took to `rounds`)."""
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "log_level": "0"})
    admin = kafka.admin()
    step = 5
    while not stop.wait(1.0):
        started = time.perf_counter()
        for partition in range(partitions):
            producer.produce(TOPIC, partition=partition, value=b'{"op":"c","ts_ms":1,"source":{"ts_ms":1}}')
        producer.flush(30)
        step += 1
        commit_all(admin, groups, partitions, step)
        rounds.append(time.perf_counter() - started)
        moved.set()


def broker_lag(kafka: KafkaBroker, groups: list[str], partitions: int) -> dict[GroupPartition, int | None]:
    """The broker's own answer: end offset minus committed offset per group partition (None: no commit), from the
    AdminClient."""
    admin = kafka.admin()
    wanted = [TopicPartition(TOPIC, p) for p in range(partitions)]
    ends = {tp.partition: info.result().offset
            for tp, info in admin.list_offsets({tp: OffsetSpec.latest() for tp in wanted}).items()}
    lag: dict[GroupPartition, int | None] = {}
    for group in groups:
        answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, wanted)])[group].result()
        for tp in answer.topic_partitions:
            lag[(group, tp.topic, tp.partition)] = ends[tp.partition] - tp.offset if tp.offset >= 0 else None
    return lag


@dataclass
class Phase:
    """One exporter's figures over one phase, scraped by the Python scraper."""

    seconds: list[float] = field(default_factory=list)
    series: int = 0
    text_bytes: int = 0
    sent_bytes: int = 0
    cpu_seconds: float = 0.0


@dataclass
class PrometheusPhase:
    """One exporter's figures over one phase, scraped by Prometheus: its counted scrapes as Prometheus recorded them,
    the CPU time the exporter (and Prometheus) used from the first counted scrape of each window to its last, and
    over how many scrapes; for cdcwatch, its kafka collection's time in each counted scrape, and the counted scrapes
    whose collection was not up."""

    scrapes: list[Scrape] = field(default_factory=list)
    cpu_seconds: float = 0.0
    prometheus_cpu_seconds: float = 0.0
    cpu_scrapes: int = 0
    collections: list[float] = field(default_factory=list)
    collection_down: int = 0

    @property
    def seconds(self) -> list[float]:
        return [s.duration for s in self.scrapes]

    @property
    def up(self) -> int:
        return sum(1 for s in self.scrapes if s.up == 1)

    @property
    def cpu_per_scrape(self) -> float:
        return self.cpu_seconds / self.cpu_scrapes if self.cpu_scrapes else float("nan")


class Contender:
    """An exporter as the benchmark scrapes it: kept-alive, gzip, with its figures per phase (`phases`: the Python
    scraper's; `prometheus`: Prometheus')."""

    def __init__(self, exporter: Exporter) -> None:
        self.exporter = exporter
        self.name = exporter.name
        self.job = job_name(exporter.name)
        self.target = exporter.url.removeprefix("http://").removesuffix("/metrics")
        self.fetch = Scraper(exporter.url, compressed=True)  # as Prometheus: gzip, kept alive
        self.phases: dict[str, Phase] = {}
        self.prometheus: dict[str, PrometheusPhase] = {}
        self.collections: list[float] = []
        self.cdcwatch = exporter.peer is None and not exporter.replay
        """A running cdcwatch (its own series are read too)."""

    def record(self, phase: str, window: Window, prometheus: PrometheusScraper, trace: CpuTrace) -> None:
        """A Prometheus window's counted scrapes of this exporter, with the CPU it and Prometheus used over them."""
        counted = window.scrapes[self.job]
        figures = self.prometheus.setdefault(phase, PrometheusPhase())
        figures.scrapes.extend(counted)
        if len(counted) >= 2:
            trace.sample()
            first, last = counted[0].timestamp, counted[-1].timestamp
            figures.cpu_seconds += trace.spent(self.name, first, last)
            figures.prometheus_cpu_seconds += trace.spent(PROMETHEUS, first, last)
            figures.cpu_scrapes += len(counted) - 1
        if self.cdcwatch:
            stamps = {s.timestamp for s in counted}
            selector = f'{{job="{self.job}",collector="kafka",target="bench"}}'
            ups = [v for points in prometheus.raw(f"cdcwatch_up{selector}", window.started).values()
                   for t, v in points if t in stamps]
            figures.collection_down += sum(1 for v in ups if v != 1) + len(stamps) - len(ups)
            figures.collections.extend(v for points in prometheus.raw(f"cdcwatch_scrape_duration_seconds{selector}",
                                                                      window.started).values()
                                       for t, v in points if t in stamps)

    def values(self) -> Values:
        values = parse(self.fetch().decode())
        if self.cdcwatch:
            assert value(values, "cdcwatch_up", collector="kafka", target="bench") == 1, \
                f"{self.name}: the kafka collection failed"
        return values

    def timed_scrape(self, phase: str, others: list[Contender]) -> None:
        """One scrape timed (the HTTP request and the whole answer, decompressed), with `others` paused; its parsing
        is not timed."""
        figures = self.phases.setdefault(phase, Phase())
        with paused(others):
            started = time.perf_counter()
            body = self.fetch()
            figures.seconds.append(time.perf_counter() - started)
        figures.text_bytes, figures.sent_bytes = len(body), self.fetch.sent_bytes
        values = parse(body.decode())
        figures.series = len(values)
        if self.cdcwatch:
            assert value(values, "cdcwatch_up", collector="kafka", target="bench") == 1, \
                f"{self.name}: the kafka collection failed"
            self.collections.append(
                value(values, "cdcwatch_scrape_duration_seconds", collector="kafka", target="bench") or 0.0)


@contextmanager
def paused(contenders: list[Contender]) -> Iterator[None]:
    """The contenders' processes stopped (SIGSTOP) for the block and continued after it, so that one exporter's
    background work (Burrow reads every commit) does not load another's timed scrape."""
    stopped: list[int] = []
    try:
        for contender in contenders:
            os.kill(contender.exporter.pid, signal.SIGSTOP)
            stopped.append(contender.exporter.pid)
        yield
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)


def run_phase(phase: str, contenders: list[Contender], scrapes: int, side_by_side: bool,
              extra: Callable[[], object] | None = None, extra_seconds: list[float] | None = None) -> None:
    """`scrapes` rounds, each scraping every contender once (the first rotating) and running `extra` once if given;
    unless `side_by_side`, the exporters not being timed are paused meanwhile."""
    before = {c.name: cpu_seconds([c.exporter.pid]) for c in contenders}
    for round_number in range(scrapes):
        shift = round_number % len(contenders)
        for contender in contenders[shift:] + contenders[:shift]:
            contender.timed_scrape(phase, [] if side_by_side else [c for c in contenders if c is not contender])
        if extra is not None and extra_seconds is not None:
            with paused([] if side_by_side else contenders):
                extra_seconds.append(timed(extra))
    for contender in contenders:
        contender.phases[phase].cpu_seconds = cpu_seconds([contender.exporter.pid]) - before[contender.name]


def run_prometheus_phase(phase: str, contenders: list[Contender], prometheus: PrometheusScraper, trace: CpuTrace,
                         scrapes: int, window: int, side_by_side: bool) -> None:
    """Prometheus scrapes every contender `scrapes` times (counted): in windows of `window` scrapes, one contender at
    a time with the others paused, the windows rotating over the contenders; or, `side_by_side`, all at once in one
    window, all running."""
    if side_by_side:
        taken = prometheus.window({c.job: [c.target] for c in contenders}, scrapes)
        for contender in contenders:
            contender.record(phase, taken, prometheus, trace)
        return
    done = round_number = 0
    while done < scrapes:
        count = min(window, scrapes - done)
        shift = round_number % len(contenders)
        for contender in contenders[shift:] + contenders[:shift]:
            with paused([c for c in contenders if c is not contender]):
                taken = prometheus.window({contender.job: [contender.target]}, count)
            contender.record(phase, taken, prometheus, trace)
        done += count
        round_number += 1


def agreement(contenders: list[Contender], broker: dict[GroupPartition, int | None]) -> None:
    """Each exporter's lag per group partition against the broker's, taken while offsets are static."""
    committed = {where: lag for where, lag in broker.items() if lag is not None}
    uncommitted = [where for where, lag in broker.items() if lag is None]
    print(f"\nagreement with the broker (AdminClient: end minus committed offset), offsets static: "
          f"{len(committed)} group partitions with a commit, {len(uncommitted)} without")
    print(f"{'exporter':<34}{'equal':>7}{'differ':>8}{'missing':>9}  without a commit  known differences")
    for contender in contenders:
        reported = contender.exporter.lag(contender.values())
        equal = sum(1 for where, lag in committed.items() if reported.get(where) == lag)
        differ = [(where, reported[where], lag) for where, lag in committed.items()
                  if where in reported and reported[where] != lag]
        missing = [where for where in committed if where not in reported]
        without = ", ".join("no series" if where not in reported else f"{reported[where]:g}" for where in uncommitted)
        peer = contender.exporter.peer
        known = peer.differences if peer else "lag from the log start for a partition without a commit"
        print(f"{contender.name:<34}{equal:>7}{len(differ):>8}{len(missing):>9}  {without or '-':<16}  {known}")
        if differ:
            print(f"{'':<34}e.g. (group, topic, partition), reported, broker: {differ[:3]}")
        if missing:
            print(f"{'':<34}missing e.g. {missing[:3]}")


def prometheus_report(contenders: list[Contender], phases: list[str], prometheus: PrometheusScraper, window: int,
                      side_by_side: bool) -> None:
    print(f"\nscraped by {prometheus.settings}")
    for phase in phases:
        counted = len(contenders[0].prometheus[phase].scrapes)
        print(f"offsets {phase}, {counted} counted scrapes each, "
              + ("all exporters at once" if side_by_side else f"in windows of {window}, the others paused")
              + "; CPU per scrape: from the first counted scrape of each window to its last, background work included")
        print(f"{'exporter':<34}{'p50 s':>7}{'p95 s':>7}{'up':>7}{'samples':>9}{'CPU/scrape':>11}{'peak RSS MiB':>14}"
              f"{'Prometheus CPU/scrape':>23}")
        for contender in contenders:
            figures = contender.prometheus[phase]
            seconds = figures.seconds
            prometheus_cpu = (figures.prometheus_cpu_seconds / figures.cpu_scrapes if figures.cpu_scrapes
                              else float("nan"))
            print(f"{contender.name:<34}{statistics.median(seconds):>7.3f}{percentile(seconds, 0.95):>7.3f}"
                  f"{f'{figures.up}/{len(seconds)}':>7}{statistics.median([s.samples for s in figures.scrapes]):>9.0f}"
                  f"{figures.cpu_per_scrape:>11.3f}{peak_rss_mib(contender.exporter.pid):>14.0f}{prometheus_cpu:>23.3f}")
            if contender.cdcwatch and figures.collections:
                print(f"{'':<34}its kafka collection p50 {statistics.median(figures.collections):.3f}s "
                      f"(cdcwatch_scrape_duration_seconds), not up in {figures.collection_down} counted scrapes")


def answered_formats(contenders: list[Contender]) -> None:
    """What each cdcwatch answered in, by format (its `cdcwatch_metrics_responses_total`): Prometheus' scrapes in
    the format Prometheus negotiated, the Python scraper's (and this look-up's) in text 0.0.4."""
    for contender in contenders:
        if contender.cdcwatch:
            values = parse(contender.fetch().decode())
            counts = {dict(labels).get("format", "?"): number for (name, labels), number in values.items()
                      if name == "cdcwatch_metrics_responses_total"}
            print(f"{contender.name} answered: " + ", ".join(f"{fmt} {n:.0f}" for fmt, n in sorted(counts.items())))


def report(contenders: list[Contender], phases: list[str], scrapes: int) -> None:
    for phase in phases:
        print(f"\nscraped by the Python scraper asking for text 0.0.4; offsets {phase}, {scrapes} scrapes each, "
              "interleaved")
        print(f"{'exporter':<34}{'p50 s':>7}{'p95 s':>7}{'series':>8}{'sent kB':>9}{'text kB':>9}"
              f"{'CPU s':>7}{'CPU/scrape':>11}{'peak RSS MiB':>14}")
        for contender in contenders:
            figures = contender.phases[phase]
            print(f"{contender.name:<34}{statistics.median(figures.seconds):>7.3f}{percentile(figures.seconds, 0.95):>7.3f}"
                  f"{figures.series:>8}{figures.sent_bytes / 1000:>9.0f}{figures.text_bytes / 1000:>9.0f}"
                  f"{figures.cpu_seconds:>7.1f}{figures.cpu_seconds / scrapes:>11.3f}"
                  f"{peak_rss_mib(contender.exporter.pid):>14.0f}")


def met(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def prometheus_goals(contenders: dict[str, Contender], phases: list[str], group_partitions: int,
                     granularity: str) -> None:
    """The goals, on the figures Prometheus measured: against kminion where it ran, and cdcwatch's memory and its p50
    at the shapes the goals name. A p50 counts only where every counted scrape was up (and cdcwatch's collection
    too)."""
    ours, lean, kminion = contenders[CDCWATCH], contenders.get(CDCWATCH_AS_KMINION), contenders.get(KMINION.name)
    print("\ngoals, on the figures Prometheus measured:")

    def all_up(contender: Contender, phase: str) -> bool:
        figures = contender.prometheus[phase]
        return figures.up == len(figures.scrapes) and figures.collection_down == 0

    for phase in phases:
        figures = ours.prometheus[phase]
        p50 = statistics.median(figures.seconds)
        if not all_up(ours, phase):
            print(f"offsets {phase}: cdcwatch not up in every counted scrape ({figures.up}/{len(figures.scrapes)} up, "
                  f"its collection down in {figures.collection_down}): its p50 below does not count")
        if kminion is None:
            print(f"offsets {phase}: goals against kminion not judged (kminion not in the run)")
            continue
        theirs = kminion.prometheus[phase]
        their_p50, their_cpu = statistics.median(theirs.seconds), theirs.cpu_per_scrape
        if theirs.up != len(theirs.scrapes):
            print(f"offsets {phase}: kminion up in {theirs.up}/{len(theirs.scrapes)} counted scrapes")
        print(f"offsets {phase}: cdcwatch (defaults) p50 {p50:.3f}s / kminion's {their_p50:.3f}s = "
              f"{p50 / their_p50:.2f}x: {met(p50 <= their_p50 and all_up(ours, phase))} (goal <= 1x)")
        if lean is not None:
            leaner = lean.prometheus[phase]
            lean_p50, lean_cpu = statistics.median(leaner.seconds), leaner.cpu_per_scrape
            ok = (lean_p50 <= GOAL_AS_KMINION_SHARE * their_p50 and lean_cpu <= GOAL_AS_KMINION_SHARE * their_cpu
                  and all_up(lean, phase))
            print(f"offsets {phase}: {CDCWATCH_AS_KMINION} / kminion p50 {lean_p50 / their_p50:.2f}x, CPU per scrape "
                  f"{lean_cpu / their_cpu if their_cpu else float('inf'):.2f}x: {met(ok)} "
                  f"(goal <= {GOAL_AS_KMINION_SHARE:g}x both)")
    rss = peak_rss_mib(ours.exporter.pid)
    limit = GOAL_RSS_MIB.get(group_partitions) if granularity == "partition" else None
    if limit is None:
        print(f"peak RSS goals are set at partition granularity and {', '.join(f'{n:,}' for n in GOAL_RSS_MIB)} group "
              f"partitions: cdcwatch's {rss:.0f} MiB at {group_partitions:,} not judged")
    else:
        print(f"cdcwatch (defaults) peak RSS {rss:.0f} MiB at {group_partitions:,} group partitions: "
              f"{met(rss <= limit)} (goal <= {limit:g} MiB)")
    if granularity == "partition" and group_partitions == 100_000:
        every = contenders.get(CDCWATCH_EVERY_PARTITION)
        for phase in phases:
            p50 = statistics.median(ours.prometheus[phase].seconds)
            print(f"offsets {phase}: cdcwatch (defaults: {DEFAULT_CAP:,} group partitions reported, the rest counted "
                  f"as dropped) p50 {p50:.3f}s at 100,000 group partitions: "
                  f"{met(p50 < GOAL_SCALE_P50_SECONDS and all_up(ours, phase))} (goal < {GOAL_SCALE_P50_SECONDS:g}s)")
            if every is not None:
                every_p50 = statistics.median(every.prometheus[phase].seconds)
                print(f"offsets {phase}: {CDCWATCH_EVERY_PARTITION} p50 {every_p50:.3f}s: "
                      f"{met(every_p50 < GOAL_SCALE_P50_SECONDS and all_up(every, phase))} "
                      f"(goal < {GOAL_SCALE_P50_SECONDS:g}s), peak RSS {peak_rss_mib(every.exporter.pid):.0f} MiB: "
                      f"{met(peak_rss_mib(every.exporter.pid) <= GOAL_RSS_MIB[100_000])} "
                      f"(goal <= {GOAL_RSS_MIB[100_000]:g} MiB)")


def verdicts(contenders: dict[str, Contender], phases: list[str], scrapes: int) -> None:
    """The Python scraper's targets (text 0.0.4), against kminion where kminion ran."""
    ours, lean, kminion = contenders[CDCWATCH], contenders.get(CDCWATCH_AS_KMINION), contenders.get(KMINION.name)
    p50 = statistics.median(ours.phases[phases[-1]].seconds)
    print("\ntargets, on the Python scraper's figures (text 0.0.4):")
    print(f"cdcwatch p50 (offsets {phases[-1]}) {p50:.3f}s: {met(p50 <= TARGET_P50_SECONDS)} "
          f"(target p50 <= {TARGET_P50_SECONDS}s)")
    print(f"  of which the collection p50 {statistics.median(ours.collections):.3f}s (cdcwatch_scrape_duration_seconds)")
    if kminion is None:
        return
    for phase in phases:
        theirs = kminion.phases[phase]
        their_p50, their_cpu = statistics.median(theirs.seconds), theirs.cpu_seconds / scrapes
        full = statistics.median(ours.phases[phase].seconds)
        print(f"offsets {phase}: cdcwatch (defaults) / kminion p50 {full / their_p50:.2f}x "
              f"({met(full <= 1.5 * their_p50)}, target <= 1.5x)")
        if lean is not None:
            figures = lean.phases[phase]
            lean_p50, lean_cpu = statistics.median(figures.seconds), figures.cpu_seconds / scrapes
            ok = lean_p50 <= their_p50 and lean_cpu <= their_cpu
            print(f"offsets {phase}: {CDCWATCH_AS_KMINION} / kminion p50 {lean_p50 / their_p50:.2f}x, CPU per scrape "
                  f"{lean_cpu / their_cpu if their_cpu else float('inf'):.2f}x ({met(ok)}, "
                  "target <= 1x both)")


def warm(contender: Contender, expected: int, timeout: float) -> None:
    """Waits until the exporter reports lag for `expected` group partitions (Burrow reads in the background)."""
    try:
        wait_for(lambda: len(contender.exporter.lag(contender.values())) >= expected, timeout,
                 f"{contender.name} reporting lag for {expected} group partitions", interval=2)
    except StackError as exc:
        print(f"{exc}: compared as it is")


def stage_profile(config: Path, moved: threading.Event) -> None:
    """Where an in-process collection and its answer spend their time, per stage, each scrape after the offsets moved
    (`moved`: set by the mover after each round of commits), as in the bench's moving phase: each stage's own wall
    time, averaged over 10 scrapes, then a cProfile of the same. Nested stages (the samples are built within the
    collection) count in both; GC pauses count in whichever stage they interrupt."""
    import cProfile
    import pstats

    from cdcwatch.exposition import LabelBlocks, gzipped, render_text
    from cdcwatch.kafka.collector import KafkaCollector
    from cdcwatch.server import tune_interpreter
    from cdcwatch.validation import load_config

    tune_interpreter()  # as `cdcwatch serve` runs
    collector = KafkaCollector(load_config(config).targets("kafka")[0])
    spent: dict[str, float] = {}

    def metered(owner: Any, attribute: str, stage: str) -> None:
        """Adds the time of every call of owner.attribute to `stage` (stages that no longer exist are left out)."""
        original = getattr(owner, attribute, None)
        if original is None:
            print(f"(no {type(owner).__name__}.{attribute}: stage '{stage}' not measured)")
            return

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[stage] = spent.get(stage, 0.0) + time.perf_counter() - started
        setattr(owner, attribute, wrapper)

    metered(collector.reader, "read", "broker requests: groups, commits, offsets")
    metered(collector.messages, "read", "broker requests: message timestamps")
    metered(collector.reader, "retention", "retention settings")
    metered(collector, "_rows", "rows: offsets, status, lines")
    metered(collector, "_lag_seconds", "lag in seconds: ages, retention, lines")
    metered(collector, "_topic_families", "samples: topic series")
    metered(collector, "_group_families", "samples: group series")

    class Scrape:
        """One collection, as a registry to render."""

        def collect(self) -> Any:
            started = time.perf_counter()
            families = collector.collect().families
            spent["collection (all of the above)"] = (spent.get("collection (all of the above)", 0.0)
                                                      + time.perf_counter() - started)
            return families

    paused: list[float] = []

    def gc_pauses(phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            paused.append(-time.perf_counter())
        else:
            paused[-1] += time.perf_counter()

    blocks = LabelBlocks()
    render_text(Scrape(), blocks)  # connections, caches and label blocks warm, as in a running exporter
    spent.clear()
    gc.callbacks.append(gc_pauses)
    total = 0.0
    try:
        for _ in range(10):
            moved.clear()
            moved.wait(30)
            started = time.perf_counter()
            text = render_text(Scrape(), blocks)
            compress_started = time.perf_counter()
            gzipped((text,))  # as the server compresses
            spent["gzip"] = spent.get("gzip", 0.0) + time.perf_counter() - compress_started
            total += time.perf_counter() - started
    finally:
        gc.callbacks.remove(gc_pauses)
    spent["rendering (render_text less the collection)"] = (total - spent["gzip"]
                                                            - spent["collection (all of the above)"])
    spent["GC pauses (within the stages above)"] = sum(paused)
    print(f"\nper stage, 10 in-process scrapes of {len(text)} bytes (per scrape, ms):")
    for stage, seconds in spent.items():
        print(f"  {stage:<48}{seconds * 100:>8.1f}")
    print(f"  {'total':<48}{total * 100:>8.1f}")
    profiler = cProfile.Profile()
    for _ in range(10):
        moved.clear()
        moved.wait(30)
        profiler.runcall(render_text, Scrape(), blocks)
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    collector.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scraper", choices=["prometheus", "python", "both"], default="both",
                        help="who scrapes: a real Prometheus (default settings but the interval), this process asking "
                             "for text 0.0.4, or both (Prometheus' figures first); default both")
    parser.add_argument("--interval", default=INTERVAL, help=f"Prometheus' scrape interval (default {INTERVAL})")
    parser.add_argument("--window", type=int, default=5, help="Prometheus: counted scrapes per window (default 5)")
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--scale", action="store_true",
                        help=f"{SCALE[0]} groups x {SCALE[1]} partitions (100,000 group partitions), with the goals "
                             "set for that shape")
    parser.add_argument("--scrapes", type=int, default=25, help="counted scrapes per exporter, phase and scraper")
    parser.add_argument("--granularity", choices=["partition", "topic"], default="partition")
    parser.add_argument("--peers-bin", help="folder of the peers' binaries (kminion, burrow, kafka_exporter); "
                                            "default: $CDCWATCH_PEERS_BIN; without it cdcwatch runs alone")
    parser.add_argument("--peers", help="run only these of the peers found (comma-separated: "
                                        f"{','.join(p.name for p in PEERS)}); default all")
    parser.add_argument("--no-tool", action="store_true",
                        help="leave out kafka-consumer-groups --all-groups (a JVM per run) from the moving phase")
    parser.add_argument("--side-by-side", action="store_true",
                        help="time each scrape with the other exporters running, not paused (Burrow's background reads "
                             "then load every other exporter's scrapes)")
    parser.add_argument("--replay", action="store_true",
                        help="Prometheus also scrapes a replay of cdcwatch's and kminion's recorded answers (cdcwatch's "
                             "in OpenMetrics, as Prometheus gets it, and in text 0.0.4): Prometheus' own share of each "
                             "scrape (bench/replay.py)")
    parser.add_argument("--profile", action="store_true",
                        help="also print where an in-process collection and its answer spend their time, per stage")
    args = parser.parse_args()
    if args.scale:
        args.groups, args.partitions = SCALE
    scrapers = [PROMETHEUS, PYTHON] if args.scraper == "both" else [PROMETHEUS if args.scraper == "prometheus" else PYTHON]
    binaries = peer_binaries(args.peers_bin)
    if args.peers is not None:
        wanted = {name.strip().lower() for name in args.peers.split(",") if name.strip()}
        unknown = wanted - {p.name.lower() for p in PEERS}
        if unknown:
            parser.error(f"--peers: unknown {', '.join(sorted(unknown))}")
        binaries = {peer: path for peer, path in binaries.items() if peer.name.lower() in wanted}
    work = Path(tempfile.mkdtemp(prefix="cdcwatch-bench-kafka-"))
    kafka = KafkaBroker(work / "kafka")
    kafka.start()
    exporters: list[Exporter] = []
    stop, moved = threading.Event(), threading.Event()
    mover = None
    prometheus: PrometheusScraper | None = None
    trace: CpuTrace | None = None
    try:
        kafka.create_topic(TOPIC, args.partitions)
        producer = Producer({"bootstrap.servers": kafka.bootstrap, "log_level": "0"})
        for partition in range(args.partitions):
            for _ in range(5):
                producer.produce(TOPIC, partition=partition, value=b'{"op":"c","ts_ms":1,"source":{"ts_ms":1}}')
        producer.flush(60)
        groups = [f"bench-group-{n}" for n in range(args.groups)]
        commit_all(kafka.admin(), groups, args.partitions, 5)

        exporters.append(start_cdcwatch(CDCWATCH, kafka.bootstrap, work, granularity=args.granularity))
        if args.granularity == "partition":
            exporters.append(start_cdcwatch(CDCWATCH_AS_KMINION, kafka.bootstrap, work, **AS_KMINION))
        if args.scale:
            exporters.append(start_cdcwatch(CDCWATCH_EVERY_PARTITION, kafka.bootstrap, work,
                                            limits={"max_series_per_target": EVERY_PARTITION_SERIES},
                                            granularity=args.granularity, max_partitions=args.groups * args.partitions))
        for peer, binary in binaries.items():
            exporters.append(start_peer(peer, binary, kafka.bootstrap, work))
        contenders = [Contender(e) for e in exporters]
        group_partitions = args.groups * args.partitions
        print(f"{args.groups} groups x {args.partitions} partitions = {group_partitions} group partitions, "
              f"granularity {args.granularity}; exporters: {', '.join(c.name for c in contenders)}; "
              f"{'all running' if args.side_by_side else 'the others paused'} while one is scraped; scraped by "
              + " then ".join("Prometheus" if s == PROMETHEUS else "the Python scraper (text 0.0.4)" for s in scrapers))
        print(f"{CDCWATCH_AS_KMINION}: {yaml.safe_dump(AS_KMINION, default_flow_style=True, sort_keys=False, width=200).strip()}")
        for peer in binaries:
            print(f"  {peer.name} {peer.version}")
        print(f"load average at the start: {Path('/proc/loadavg').read_text().split()[:3]} ({os.cpu_count()} cores)")
        if PROMETHEUS in scrapers:
            prometheus = PrometheusScraper(work, args.interval)
            prometheus.start()
            print(f"Prometheus: {prometheus.settings}")
            trace = CpuTrace({**{c.name: c.exporter.pid for c in contenders}, PROMETHEUS: prometheus.pid},
                             every=0.05).start()

        broker = broker_lag(kafka, groups, args.partitions)
        if args.granularity == "partition":
            with_commit = sum(1 for lag in broker.values() if lag is not None)
            for contender in contenders:
                reported = with_commit if contender.exporter.peer or contender.name == CDCWATCH_EVERY_PARTITION \
                    else min(with_commit, DEFAULT_CAP)
                warm(contender, reported, max(120, group_partitions / 100))
            agreement(contenders, broker)
        else:
            for contender in contenders:
                contender.values()

        replays: list[Contender] = []
        if prometheus is not None and trace is not None and args.replay:
            replayed = [c.exporter for c in contenders if c.name in (CDCWATCH, KMINION.name)]
            started = [start_replay(e, work) for e in replayed]
            if not args.scale:  # (the same work for Prometheus as OpenMetrics, at 10,000: one run shows it)
                started += [start_replay(e, work, TEXT_0_0_4, ", text 0.0.4") for e in replayed if e.name == CDCWATCH]
            exporters.extend(started)
            replays = [Contender(e) for e in started]
            trace.watch({c.name: c.exporter.pid for c in replays})
            print(f"replayed (the answer each gave just now, from bench/replay.py): {', '.join(c.name for c in replays)}")

        def scrape_phase(phase: str, extra: Callable[[], object] | None = None,
                         extra_seconds: list[float] | None = None) -> None:
            if prometheus is not None and trace is not None:
                run_prometheus_phase(phase, contenders + replays, prometheus, trace, args.scrapes, args.window,
                                     args.side_by_side)
            if PYTHON in scrapers:
                run_phase(phase, contenders, args.scrapes, args.side_by_side, extra, extra_seconds)

        scrape_phase("static")
        mover_rounds: list[float] = []
        mover = threading.Thread(target=keep_moving, args=(kafka, groups, args.partitions, stop, moved, mover_rounds),
                                 daemon=True)
        mover.start()
        tool: list[float] = []
        tool_command = kafka.java_command("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                                          "--bootstrap-server", kafka.bootstrap, "--describe", "--all-groups", heap="512m")
        scrape_phase("moving",
                     None if args.no_tool else lambda: subprocess.run(tool_command, capture_output=True, check=True,
                                                                      timeout=300),
                     tool)
        phases = ["static", "moving"]
        if mover_rounds:
            print(f"\noffsets moving: {len(mover_rounds)} rounds of writes and commits, each taking p50 "
                  f"{statistics.median(mover_rounds):.2f}s (max {max(mover_rounds):.2f}s), then a second's pause")
        if prometheus is not None:
            prometheus_report(contenders + replays, phases, prometheus, args.window, args.side_by_side)
        if PYTHON in scrapers:
            report(contenders, phases, args.scrapes)
            if tool:
                print(f"{'kafka-consumer-groups --all':<34}{statistics.median(tool):>7.3f}{percentile(tool, 0.95):>7.3f}"
                      "  (offsets moving; a JVM per run)")
        print()
        answered_formats(contenders)
        by_name = {c.name: c for c in contenders}
        if prometheus is not None:
            prometheus_goals(by_name, phases, group_partitions, args.granularity)
        if PYTHON in scrapers:
            verdicts(by_name, phases, args.scrapes)
        print(f"load average at the end: {Path('/proc/loadavg').read_text().split()[:3]}")

        name = "kafka_lag" if args.granularity == "partition" else f"kafka_lag_{args.granularity}"
        if args.scale:
            name += "_scale"
        shape = f"{args.groups} groups x {args.partitions} partitions"
        python_title = "scraped by the Python scraper asking for text 0.0.4"
        timings: dict[str, dict[str, list[float]]] = {}
        if prometheus is not None:
            timings[f"scraped by Prometheus (its scrape_duration_seconds, interval {args.interval})"] = {
                c.name: [s * 1000 for s in c.prometheus["moving"].seconds] for c in contenders}
        if PYTHON in scrapers:
            python_timings = {c.name: [s * 1000 for s in c.phases["moving"].seconds] for c in contenders}
            if tool:
                python_timings["kafka-consumer-groups --all"] = [s * 1000 for s in tool]
            timings[python_title] = python_timings
        plot = save_timing_panels(name, f"{shape}, {args.granularity} granularity, offsets moving", timings,
                                  target=GOAL_SCALE_P50_SECONDS * 1000 if group_partitions == 100_000 else None)
        if plot:
            print(f"plot: {plot}")
        if binaries:
            panels: dict[str, dict[str, dict[str, tuple[float, float]]]] = {}
            if prometheus is not None:
                panels["scraped by Prometheus"] = {
                    phase: {c.name: (statistics.median(c.prometheus[phase].seconds) * 1000,
                                     percentile(c.prometheus[phase].seconds, 0.95) * 1000) for c in contenders}
                    for phase in phases}
            if PYTHON in scrapers:
                panels[python_title] = {
                    phase: {c.name: (statistics.median(c.phases[phase].seconds) * 1000,
                                     percentile(c.phases[phase].seconds, 0.95) * 1000) for c in contenders}
                    for phase in phases}
            plot = save_percentile_panels(f"{name}_peers", f"{shape}: p50 and p95 per exporter", panels)
            if plot:
                print(f"plot: {plot}")
        if args.profile:
            stage_profile(work / f"{CDCWATCH}.yml", moved)
    finally:
        stop.set()
        if mover is not None:
            mover.join(60)
        if trace is not None:
            trace.stop()
        for exporter in exporters:
            exporter.stop()
        if prometheus is not None:
            prometheus.stop()
        kafka.stop()


if __name__ == "__main__":
    exit_on_sigterm()  # stopped by kill: the servers it started stop too
    main()
