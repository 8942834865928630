"""Scrapes of the kafka collector on 50 groups x 200 partitions of a Kafka 4 broker, beside kminion, Burrow, kafka_exporter.

The peer exporters run when their binaries are given; Apache Kafka's own `kafka-consumer-groups --describe
--all-groups` runs on the same broker too.

Two phases: offsets static, then moving (a producer writes and every group commits further, once a second, in the
background, so the caches cannot turn it into a static best case). In each phase the exporters are scraped in turn
(interleaved, the first of each round rotating), so the machine's noise hits all alike, and while one is timed the
others are paused (SIGSTOP, then SIGCONT), so that one exporter's background work (Burrow reads every commit) does
not load another's scrape; `--side-by-side` leaves them running. Printed per exporter and phase:
p50/p95 scrape time, series, bytes (as sent, gzip, and as text), CPU seconds of its process over the phase, and its
peak RSS. A scrape is timed as Prometheus makes it (gzip, a kept-alive connection, the whole answer read); parsing it
here is not timed.

Before anything moves, every exporter's lag per group partition is compared with the broker's own answer (the
AdminClient's committed and end offsets), each exporter's known differences named. Group 0 leaves partition 0 without
a commit, so what each one answers for such a partition shows.

cdcwatch runs twice: with its defaults, and configured for what kminion exports (lag in messages per partition:
`lag_seconds`, `freshness` and `retention` off).

Target: cdcwatch p50 <= 250 ms at partition granularity; with kminion in the run, cdcwatch (lag in messages only) p50
and CPU per scrape <= kminion's, and cdcwatch with its defaults p50 <= 1.5 x kminion's.

    CDCWATCH_PEERS_BIN=.cdcwatch/peers/bin .venv/bin/python bench/kafka_lag.py [--groups 50] [--partitions 200]
        [--scrapes 25] [--granularity topic] [--peers-bin DIR] [--no-tool] [--side-by-side] [--profile]
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
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import OffsetSpec  # noqa: E402

from bench.jmx_fleet import cpu_seconds  # noqa: E402
from bench.kafka_peers import KMINION, Exporter, GroupPartition, peer_binaries, start_cdcwatch, start_peer  # noqa: E402
from bench.plots import save_percentiles, save_timings  # noqa: E402
from bench.scrape import Scraper  # noqa: E402
from devstack.kafka import KafkaBroker  # noqa: E402
from devstack.procs import StackError, wait_for  # noqa: E402
from devstack.samples import Values, parse, value  # noqa: E402

TOPIC = "benchsrv.public.rows"
TARGET_P50_SECONDS = 0.25
CDCWATCH = "cdcwatch"
CDCWATCH_AS_KMINION = "cdcwatch, lag in messages only"
AS_KMINION = {"lag_seconds": False, "freshness": False, "retention": False, "committed_offsets": False,
              "status": {"enabled": False}}
"""What leaves cdcwatch with kminion's information: lag in messages per group partition, and the topics' offsets."""
UNCOMMITTED: tuple[int, int] = (0, 0)
"""(group number, partition) left without a commit."""


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def percentile(samples: list[float], fraction: float) -> float:
    return sorted(samples)[int(fraction * (len(samples) - 1))]


def peak_rss_mib(pid: int) -> float:
    """The most resident memory the process has had (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def commits(group_number: int, partitions: int, step: int) -> list[TopicPartition]:
    """The fixture's commit of one group: its partitions lag 0-4 messages behind `step`, one left without a commit."""
    return [TopicPartition(TOPIC, p, (group_number + p) % 5 + step - 5) for p in range(partitions)
            if (group_number, p) != UNCOMMITTED]


def keep_moving(kafka: KafkaBroker, groups: list[str], partitions: int, stop: threading.Event,
                moved: threading.Event) -> None:
    """Writes a message to every partition and moves every group's commit one further, once a second (setting `moved`
    after each round)."""
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "log_level": "0"})
    consumers = {g: Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": g, "enable.auto.commit": False})
                 for g in groups}
    step = 5
    while not stop.wait(1.0):
        for partition in range(partitions):
            producer.produce(TOPIC, partition=partition, value=b'{"op":"c","ts_ms":1,"source":{"ts_ms":1}}')
        producer.flush(30)
        step += 1
        for n, consumer in enumerate(consumers.values()):
            consumer.commit(offsets=commits(n, partitions, step), asynchronous=False)
        moved.set()
    for consumer in consumers.values():
        consumer.close()


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
    """One exporter's figures over one phase."""

    seconds: list[float] = field(default_factory=list)
    series: int = 0
    text_bytes: int = 0
    sent_bytes: int = 0
    cpu_seconds: float = 0.0


class Contender:
    """An exporter as the benchmark scrapes it: kept-alive, gzip, with its figures per phase."""

    def __init__(self, exporter: Exporter) -> None:
        self.exporter = exporter
        self.name = exporter.name
        self.fetch = Scraper(exporter.url, compressed=True)  # as Prometheus: gzip, kept alive
        self.phases: dict[str, Phase] = {}
        self.collections: list[float] = []

    def values(self) -> Values:
        values = parse(self.fetch().decode())
        if self.exporter.peer is None:
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
        if self.exporter.peer is None:
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


def report(contenders: list[Contender], phases: list[str], scrapes: int) -> None:
    for phase in phases:
        print(f"\noffsets {phase}, {scrapes} scrapes each, interleaved")
        print(f"{'exporter':<34}{'p50 s':>7}{'p95 s':>7}{'series':>8}{'sent kB':>9}{'text kB':>9}"
              f"{'CPU s':>7}{'CPU/scrape':>11}{'peak RSS MiB':>14}")
        for contender in contenders:
            figures = contender.phases[phase]
            print(f"{contender.name:<34}{statistics.median(figures.seconds):>7.3f}{percentile(figures.seconds, 0.95):>7.3f}"
                  f"{figures.series:>8}{figures.sent_bytes / 1000:>9.0f}{figures.text_bytes / 1000:>9.0f}"
                  f"{figures.cpu_seconds:>7.1f}{figures.cpu_seconds / scrapes:>11.3f}"
                  f"{peak_rss_mib(contender.exporter.pid):>14.0f}")


def verdicts(contenders: dict[str, Contender], phases: list[str], scrapes: int) -> None:
    """The issue's targets against kminion, where kminion ran."""
    ours, lean, kminion = contenders[CDCWATCH], contenders.get(CDCWATCH_AS_KMINION), contenders.get(KMINION.name)
    p50 = statistics.median(ours.phases[phases[-1]].seconds)
    print(f"\ncdcwatch p50 (offsets {phases[-1]}) {p50:.3f}s: {'MET' if p50 <= TARGET_P50_SECONDS else 'NOT MET'} "
          f"(target p50 <= {TARGET_P50_SECONDS}s)")
    print(f"  of which the collection p50 {statistics.median(ours.collections):.3f}s (cdcwatch_scrape_duration_seconds)")
    if kminion is None:
        return
    for phase in phases:
        theirs = kminion.phases[phase]
        their_p50, their_cpu = statistics.median(theirs.seconds), theirs.cpu_seconds / scrapes
        full = statistics.median(ours.phases[phase].seconds)
        print(f"offsets {phase}: cdcwatch (defaults) / kminion p50 {full / their_p50:.2f}x "
              f"({'MET' if full <= 1.5 * their_p50 else 'NOT MET'}, target <= 1.5x)")
        if lean is not None:
            figures = lean.phases[phase]
            lean_p50, lean_cpu = statistics.median(figures.seconds), figures.cpu_seconds / scrapes
            met = lean_p50 <= their_p50 and lean_cpu <= their_cpu
            print(f"offsets {phase}: {CDCWATCH_AS_KMINION} / kminion p50 {lean_p50 / their_p50:.2f}x, CPU per scrape "
                  f"{lean_cpu / their_cpu if their_cpu else float('inf'):.2f}x ({'MET' if met else 'NOT MET'}, "
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

    from cdcwatch.config import load_config
    from cdcwatch.exposition import LabelBlocks, gzipped, render_text
    from cdcwatch.kafka.collector import KafkaCollector
    from cdcwatch.server import tune_interpreter

    tune_interpreter()  # as `cdcwatch serve` runs
    collector = KafkaCollector(load_config(config).kafka[0])
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
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--scrapes", type=int, default=25)
    parser.add_argument("--granularity", choices=["partition", "topic"], default="partition")
    parser.add_argument("--peers-bin", help="folder of the peers' binaries (kminion, burrow, kafka_exporter); "
                                            "default: $CDCWATCH_PEERS_BIN; without it cdcwatch runs alone")
    parser.add_argument("--no-tool", action="store_true",
                        help="leave out kafka-consumer-groups --all-groups (a JVM per run) from the moving phase")
    parser.add_argument("--side-by-side", action="store_true",
                        help="time each scrape with the other exporters running, not paused (Burrow's background reads "
                             "then load every other exporter's scrapes)")
    parser.add_argument("--profile", action="store_true",
                        help="also print where an in-process collection and its answer spend their time, per stage")
    args = parser.parse_args()
    binaries = peer_binaries(args.peers_bin)
    work = Path(tempfile.mkdtemp(prefix="cdcwatch-bench-kafka-"))
    kafka = KafkaBroker(work / "kafka")
    kafka.start()
    exporters: list[Exporter] = []
    stop, moved = threading.Event(), threading.Event()
    mover = None
    try:
        kafka.create_topic(TOPIC, args.partitions)
        producer = Producer({"bootstrap.servers": kafka.bootstrap, "log_level": "0"})
        for partition in range(args.partitions):
            for _ in range(5):
                producer.produce(TOPIC, partition=partition, value=b'{"op":"c","ts_ms":1,"source":{"ts_ms":1}}')
        producer.flush(60)
        groups = [f"bench-group-{n}" for n in range(args.groups)]
        for n, group in enumerate(groups):
            consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "enable.auto.commit": False})
            consumer.commit(offsets=commits(n, args.partitions, 5), asynchronous=False)
            consumer.close()

        exporters.append(start_cdcwatch(CDCWATCH, kafka.bootstrap, work, granularity=args.granularity))
        if args.granularity == "partition":
            exporters.append(start_cdcwatch(CDCWATCH_AS_KMINION, kafka.bootstrap, work, **AS_KMINION))
        for peer, binary in binaries.items():
            exporters.append(start_peer(peer, binary, kafka.bootstrap, work))
        contenders = [Contender(e) for e in exporters]
        print(f"{args.groups} groups x {args.partitions} partitions = {args.groups * args.partitions} group partitions, "
              f"granularity {args.granularity}; exporters: {', '.join(c.name for c in contenders)}; "
              f"{'all running' if args.side_by_side else 'the others paused'} while one is timed")
        print(f"{CDCWATCH_AS_KMINION}: {yaml.safe_dump(AS_KMINION, default_flow_style=True, sort_keys=False, width=200).strip()}")
        for peer in binaries:
            print(f"  {peer.name} {peer.version}")
        print(f"load average at the start: {Path('/proc/loadavg').read_text().split()[:3]} ({os.cpu_count()} cores)")

        broker = broker_lag(kafka, groups, args.partitions)
        if args.granularity == "partition":
            with_commit = sum(1 for lag in broker.values() if lag is not None)
            for contender in contenders:
                warm(contender, with_commit, 120)
            agreement(contenders, broker)
        else:
            for contender in contenders:
                contender.values()

        run_phase("static", contenders, args.scrapes, args.side_by_side)
        mover = threading.Thread(target=keep_moving, args=(kafka, groups, args.partitions, stop, moved), daemon=True)
        mover.start()
        tool: list[float] = []
        tool_command = kafka.java_command("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                                          "--bootstrap-server", kafka.bootstrap, "--describe", "--all-groups", heap="512m")
        run_phase("moving", contenders, args.scrapes, args.side_by_side,
                  None if args.no_tool else lambda: subprocess.run(tool_command, capture_output=True, check=True,
                                                                   timeout=300),
                  tool)
        phases = ["static", "moving"]
        report(contenders, phases, args.scrapes)
        if tool:
            print(f"{'kafka-consumer-groups --all':<34}{statistics.median(tool):>7.3f}{percentile(tool, 0.95):>7.3f}"
                  "  (offsets moving; a JVM per run)")
        verdicts({c.name: c for c in contenders}, phases, args.scrapes)
        print(f"load average at the end: {Path('/proc/loadavg').read_text().split()[:3]}")

        name = "kafka_lag" if args.granularity == "partition" else f"kafka_lag_{args.granularity}"
        timings = {c.name: [s * 1000 for s in c.phases["moving"].seconds] for c in contenders}
        if tool:
            timings["kafka-consumer-groups --all"] = [s * 1000 for s in tool]
        plot = save_timings(name, f"{args.groups} groups x {args.partitions} partitions, {args.granularity} "
                            "granularity, offsets moving", timings, target=TARGET_P50_SECONDS * 1000)
        if plot:
            print(f"plot: {plot}")
        if binaries:
            plot = save_percentiles(f"{name}_peers", f"{args.groups} groups x {args.partitions} partitions: "
                                    "p50 and p95 per exporter",
                                    {phase: {c.name: (statistics.median(c.phases[phase].seconds) * 1000,
                                                      percentile(c.phases[phase].seconds, 0.95) * 1000)
                                             for c in contenders} for phase in phases})
            if plot:
                print(f"plot: {plot}")
        if args.profile:
            stage_profile(work / f"{CDCWATCH}.yml", moved)
    finally:
        stop.set()
        if mover is not None:
            mover.join(60)
        for exporter in exporters:
            exporter.stop()
        kafka.stop()


if __name__ == "__main__":
    main()
