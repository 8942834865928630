"""Bounded memory under 10x the demo's load: the whole demo pipeline for --minutes (default 30), the RSS
and open files of cdcwatch and of the process hosting the Spark listener sampled every minute.

The demo stack (devstack/demo.py: source PostgreSQL → Debezium in Kafka Connect → Kafka 4 → the Spark
apply job with the listener → target PostgreSQL; `cdcwatch serve` with every collector, Prometheus
scraping it and the listener) runs in this process, its traffic replaced by the same statements at
--load times the rate: the demo runs one transaction every 0.5 s (an insert, an update and, every
fifth, a delete: 4.4 row changes/s), this runs --load of them every 0.5 s over one connection (44
row changes/s at 10x). Unlike the demo, updates and deletes pick a row that exists, so every
statement changes a row and the rate is exact.

Sampled every minute: cdcwatch's process (its JPype JVM lives in it, -Xmx128m), the Spark driver's
Python process (the listener's state, SparkMetrics, lives there; it also serves the listener's
/metrics) and the driver's JVM (Spark's side of the listener bus). For the JVM, RSS only shows how far
G1 has grown the heap towards -Xmx, so its live heap is measured instead: `jcmd GC.run` then
`GC.heap_info` (one full GC a minute). Besides memory, every minute: row changes/s committed at the
source (pg_stat_user_tables) and records/s appended to the changes topic, and the apply lag.

Bounds, compared between the start and the end of the time after the warm-up (--warmup minutes,
default 5: JIT, connection pools, G1 sizing and Spark's first batches settle), each the median of three
samples (one sample of a live heap or RSS can be caught mid-batch). They are sized from what a
leak would look like over the 25 minutes after the warm-up of a 30-minute run, about 1,500 micro-batches
(1 s trigger), 66,000 row changes and 2,000 scrapes of cdcwatch:

- cdcwatch RSS grows at most 16 MiB: keeping one rendered exposition (~50 KiB) per scrape would add
  ~100 MiB, one parsed MBean or offset map (~5 KiB) per scrape ~10 MiB per collector; glibc arenas and
  the embedded JVM's heap (capped at 128 MiB) settle within the warm-up;
- driver Python RSS grows at most 16 MiB: keeping one batch's progress (its JSON parsed, ~15 KiB) per
  micro-batch would add ~22 MiB, a py4j proxy per callback a few MiB more, anything per row change
  (~200 bytes) ~13 MiB;
- driver JVM live heap grows at most 64 MiB: Spark legitimately keeps the last 1,000 jobs, stages and
  SQL executions for its UI, so the live heap climbs until those limits are reached; a leak of the
  listener bus or py4j (a gateway object per callback, per batch) keeps climbing past them;
- open files grow by at most 4 per process (a connection reopened or a log rolled; a leaked socket per
  batch or scrape adds hundreds).

The memory says nothing unless the pipeline kept up, so these are checked too (PASS/FAIL each):
- the load was applied: the source committed at least 95 % of the nominal row changes/s after the
  warm-up (pg_stat_user_tables; the topic's records/s are printed next to it);
- the apply lag (the listener's max) never exceeded --max-lag seconds (default: the demo's apply-lag
  alert threshold, 15 s) after the warm-up, read every second;
- at the end, traffic held still, the target equals the source row for row within 120 s;
- every scrape of cdcwatch (one a second) answered within the demo's 3 s deadline with every
  collector up (`cdcwatch_up 1`) after the warm-up, and every read of the listener's /metrics (one a
  second) succeeded.

Exits 1 on any FAIL. The table and a plot (docs/bench/memory.png) are written at the end.

    .venv/bin/python bench/memory.py [--minutes 30] [--load 10] [--warmup 5]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.chaos import converge  # noqa: E402
from devstack.demo import DemoStack, Traffic  # noqa: E402
from devstack.demo_settings import APPLY_LAG_THRESHOLD_SECONDS, CHANGES_TOPIC, SCRAPE_INTERVAL  # noqa: E402
from devstack.procs import exit_on_sigterm, free_port, rss_mib  # noqa: E402
from devstack.samples import largest, parse  # noqa: E402

DEADLINE = float(SCRAPE_INTERVAL.rstrip("s"))
DEMO_TICK = 0.5
"""The demo's traffic: one transaction per DEMO_TICK seconds."""
DEMO_CHANGES_PER_TICK = 2.2
"""An insert, an update, and a delete every fifth transaction."""
RSS_BOUND_MIB = 16.0
HEAP_BOUND_MIB = 64.0
FD_BOUND = 4
RATE_SHARE = 0.95
CHANGES_SQL = "SELECT n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables WHERE relname = 'customers'"


class Load(Traffic):
    """The demo's transactions, `factor` of them every DEMO_TICK seconds over one connection; updates and
    deletes pick an existing row."""

    def __init__(self, pg: Any, first_id: int, factor: int, live: list[int]) -> None:
        super().__init__(pg, first_id)
        self.factor = factor
        self.live = live
        self.statements = 0
        self.errors = 0

    def run(self) -> None:
        import psycopg

        interval = DEMO_TICK / self.factor
        connection: Any = None
        due = time.monotonic()
        while not self.stop.is_set():
            due += interval
            with self.writing:
                if not self.paused.is_set():
                    try:
                        if connection is None:
                            connection = psycopg.connect(f"host=127.0.0.1 port={self.pg.port} user=postgres dbname=postgres",
                                                         autocommit=True)
                        self._transaction(connection)
                    except psycopg.Error:
                        self.errors += 1
                        connection = None
            delay = due - time.monotonic()
            if delay > 0:
                self.stop.wait(delay)
            elif delay < -1.0:
                due = time.monotonic()  # held up (paused, reconnecting): no burst to catch up
        if connection is not None:
            connection.close()

    def _transaction(self, connection: Any) -> None:
        with self.lock:
            new = self.next_id
            self.next_id += 1
        victim = random.choice(self.live)
        statements = [f"INSERT INTO customers VALUES ({new}, 'customer {new}', now())",
                      f"UPDATE customers SET name = name || '+', updated_at = now() WHERE id = {victim}"]
        doomed = None
        if new % 5 == 0:
            doomed = random.randrange(len(self.live))
            statements.append(f"DELETE FROM customers WHERE id = {self.live[doomed]}")
        with connection.transaction():
            for statement in statements:
                connection.execute(statement)
        self.live.append(new)
        if doomed is not None:
            self.live[doomed] = self.live[-2]  # swap-remove (the new row stays last)
            self.live[-2] = self.live[-1]
            self.live.pop()
        self.statements += len(statements)


def fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def java_child(pid: int) -> int | None:
    """The JVM under `pid` (spark-submit's java, a child or grandchild)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    queue = list(children.get(pid, []))
    while queue:
        child = queue.pop(0)
        try:
            if Path(f"/proc/{child}/comm").read_text().strip() == "java":
                return child
        except OSError:
            continue
        queue.extend(children.get(child, []))
    return None


def live_heap_mib(pid: int) -> float:
    """The JVM's heap in use right after a full GC (jcmd), NaN if it cannot be read."""
    try:
        subprocess.run(["jcmd", str(pid), "GC.run"], capture_output=True, timeout=60, check=True)
        info = subprocess.run(["jcmd", str(pid), "GC.heap_info"], capture_output=True, text=True, timeout=60,
                              check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return float("nan")
    found = re.search(r"heap\s+total \d+K, used (\d+)K", info)
    return int(found.group(1)) / 1024 if found else float("nan")


class Monitor:
    """Every second, each in its own thread: a scrape of cdcwatch (deadline DEADLINE, every collector up) and a
    read of the listener's /metrics (its apply lag). A collector down during the warm-up (the first
    collections after the stack started, on a machine still busy starting it) is noted, not failed."""

    def __init__(self, stack: DemoStack) -> None:
        self.stack = stack
        self.stop = threading.Event()
        self.after_warmup = threading.Event()
        self.failures: list[str] = []
        self.warmup_down: list[str] = []
        self.scrapes = self.slowest_ms = 0
        self.listener_reads = 0
        self.max_lag = 0.0
        self.minute_lag = 0.0
        self.threads = [threading.Thread(target=self._every_second, args=(job,), daemon=True)
                        for job in (self._scrape, self._read_listener)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self, timeout: float) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout)

    def _every_second(self, job: Any) -> None:
        due = time.monotonic()
        while not self.stop.wait(max(0.0, due - time.monotonic())):
            due += 1.0
            job()

    def _scrape(self) -> None:
        started = time.monotonic()
        self.scrapes += 1
        try:
            text = urllib.request.urlopen(self.stack.info["metrics"], timeout=DEADLINE).read().decode()
        except Exception as exc:
            self.failures.append(f"{time.strftime('%H:%M:%S')} scrape of cdcwatch failed: {exc}")
            return
        took = time.monotonic() - started
        self.slowest_ms = max(self.slowest_ms, round(took * 1000))
        if took > DEADLINE:
            self.failures.append(f"{time.strftime('%H:%M:%S')} scrape of cdcwatch took {took:.1f}s")
        for line in text.splitlines():
            if line.startswith("cdcwatch_up{") and float(line.rsplit(" ", 1)[1]) == 0:
                down = f"{time.strftime('%H:%M:%S')} collector down: {line}"
                (self.failures if self.after_warmup.is_set() else self.warmup_down).append(down)

    def _read_listener(self) -> None:
        self.listener_reads += 1
        try:
            lag = largest(parse(self.stack.apply.metrics()), "cdcwatch_spark_apply_lag_seconds", percentile="max")
        except Exception as exc:
            self.failures.append(f"{time.strftime('%H:%M:%S')} read of the listener's /metrics failed: {exc}")
            return
        if lag is not None:
            self.minute_lag = max(self.minute_lag, lag)
            if self.after_warmup.is_set():
                self.max_lag = max(self.max_lag, lag)


@dataclass
class Sample:
    minute: float
    source_changes: int
    topic_records: int
    lag: float
    rss: dict[str, float] = field(default_factory=dict)
    fds: dict[str, int] = field(default_factory=dict)
    heap: float = float("nan")


PROCESSES = ("cdcwatch", "driver python", "driver JVM")


def topic_end(consumer: Any) -> int:
    from confluent_kafka import TopicPartition

    partitions = consumer.list_topics(CHANGES_TOPIC, timeout=10).topics[CHANGES_TOPIC].partitions
    return sum(consumer.get_watermark_offsets(TopicPartition(CHANGES_TOPIC, p), timeout=10)[1] for p in partitions)


def sample(stack: DemoStack, consumer: Any, monitor: Monitor, started: float) -> Sample:
    pids = {"cdcwatch": stack.serve.process.pid, "driver python": stack.apply.process.pid}
    jvm = java_child(pids["driver python"])
    if jvm is not None:
        pids["driver JVM"] = jvm
    taken = Sample((time.monotonic() - started) / 60, int(stack.source.sql(CHANGES_SQL) or 0), topic_end(consumer),
                   monitor.minute_lag)
    monitor.minute_lag = 0.0
    for name, pid in pids.items():
        taken.rss[name], taken.fds[name] = rss_mib(pid), fds(pid)
    if jvm is not None:
        taken.heap = live_heap_mib(jvm)
    return taken


def table(samples: list[Sample]) -> list[str]:
    lines = [f"{'min':>5} {'changes/s':>9} {'topic/s':>8} {'lag s':>6} | {'cdcwatch MiB':>12} {'fds':>4} | "
             f"{'driver py MiB':>13} {'fds':>4} | {'JVM RSS MiB':>11} {'heap MiB':>8} {'fds':>4}"]
    for previous, s in zip([None, *samples], samples, strict=False):
        if previous is None:
            rate = topic = "-"
        else:
            seconds = (s.minute - previous.minute) * 60
            rate = f"{(s.source_changes - previous.source_changes) / seconds:.1f}"
            topic = f"{(s.topic_records - previous.topic_records) / seconds:.1f}"
        lines.append(f"{s.minute:5.1f} {rate:>9} {topic:>8} {s.lag:6.1f} | {s.rss['cdcwatch']:12.1f} "
                     f"{s.fds['cdcwatch']:4d} | {s.rss['driver python']:13.1f} {s.fds['driver python']:4d} | "
                     f"{s.rss.get('driver JVM', float('nan')):11.1f} {s.heap:8.1f} {s.fds.get('driver JVM', -1):4d}")
    return lines


def slope(samples: list[Sample], value: Any) -> float:
    """Least-squares growth in units per hour."""
    if len(samples) < 2:
        return 0.0
    return float(statistics.linear_regression([s.minute for s in samples], [value(s) for s in samples]).slope * 60)


def verdict(args: argparse.Namespace, samples: list[Sample], monitor: Monitor, equal: bool, converged: float,
            rows: int, load: Load) -> list[tuple[bool, str]]:
    after = [s for s in samples if s.minute >= args.warmup - 0.01]
    if len(after) < 2:
        return [(False, "fewer than two samples after the warm-up: run longer")]
    first, last = after[0], after[-1]
    seconds = (last.minute - first.minute) * 60
    start, end = after[:3], after[-3:]  # memory: the median of three samples at each end, against single-sample noise

    def grew(value: Any) -> tuple[float, float]:
        return statistics.median(value(s) for s in start), statistics.median(value(s) for s in end)

    nominal = DEMO_CHANGES_PER_TICK / DEMO_TICK * args.load
    achieved = (last.source_changes - first.source_changes) / seconds
    topic = (last.topic_records - first.topic_records) / seconds
    checks = [(achieved >= RATE_SHARE * nominal,
               f"load: {achieved:.1f} row changes/s committed at the source ({topic:.1f} records/s into the topic), "
               f"at least {RATE_SHARE:.0%} of {nominal:g}/s ({args.load}x the demo's {nominal / args.load:g}/s)")]
    for name in PROCESSES:
        if name == "driver JVM":
            before_mib, now_mib = grew(lambda s: s.heap)
            rss = grew(lambda s, n=name: s.rss.get(n, float("nan")))
            checks.append((now_mib - before_mib <= args.max_heap_growth,
                           f"{name} live heap {before_mib:.1f} -> {now_mib:.1f} MiB ({slope(after, lambda s: s.heap):+.1f} "
                           f"MiB/h), growth at most {args.max_heap_growth:g} MiB (RSS {rss[0]:.0f} -> {rss[1]:.0f} MiB, "
                           "not bounded: G1 sizing)"))
        else:
            before_mib, now_mib = grew(lambda s, n=name: s.rss[n])
            checks.append((now_mib - before_mib <= args.max_rss_growth,
                           f"{name} RSS {before_mib:.1f} -> {now_mib:.1f} MiB "
                           f"({slope(after, lambda s, n=name: s.rss[n]):+.1f} MiB/h), growth at most {args.max_rss_growth:g} MiB"))
        before, now = grew(lambda s, n=name: s.fds.get(n, -1))
        checks.append((before >= 0 and now - before <= FD_BOUND,
                       f"{name} open files {before:g} -> {now:g}, growth at most {FD_BOUND}"))
    checks.append((monitor.max_lag <= args.max_lag,
                   f"apply lag after the warm-up at most {monitor.max_lag:.1f}s, bound {args.max_lag:g}s"))
    checks.append((equal, f"target {'equals' if equal else 'DIFFERS from'} the source ({rows} rows) "
                          f"{converged:.0f}s after the traffic stopped"))
    checks.append((not monitor.failures,
                   f"{monitor.scrapes} scrapes of cdcwatch (slowest {monitor.slowest_ms} ms, deadline {DEADLINE:g}s, every "
                   f"collector up after the warm-up) and {monitor.listener_reads} reads of the listener: {len(monitor.failures)} failed"))
    checks.append((load.errors == 0, f"traffic: {load.statements} statements, {load.errors} failed transactions"))
    return checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--load", type=int, default=10, help="times the demo's traffic")
    parser.add_argument("--warmup", type=float, default=5, help="minutes before the baseline sample")
    parser.add_argument("--max-rss-growth", type=float, default=RSS_BOUND_MIB, help="MiB, cdcwatch and driver python")
    parser.add_argument("--max-heap-growth", type=float, default=HEAP_BOUND_MIB, help="MiB, the driver JVM's live heap")
    parser.add_argument("--max-lag", type=float, default=APPLY_LAG_THRESHOLD_SECONDS, help="seconds of apply lag")
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--plot", action="store_true", help="write docs/bench/memory.png")
    args = parser.parse_args()
    args.warmup = min(args.warmup, args.minutes / 4)
    from confluent_kafka import Consumer

    base = Path(tempfile.mkdtemp(prefix="cdcwatch-memory-"))
    base.chmod(0o755)
    stack = DemoStack(base, free_port(), args.rows, log=lambda line: print(line, flush=True))
    samples: list[Sample] = []
    monitor = Monitor(stack)
    checks: list[tuple[bool, str]] = []
    try:
        stack.start()
        stack.traffic.stop.set()  # the demo's own traffic: replaced by `load`
        stack.traffic.pause()
        live = [int(i) for i in stack.source.sql("SELECT id FROM customers").split()]
        load = Load(stack.source, stack.traffic.next_id, args.load, live)
        stack.traffic = load
        stack.components.append(("load", _StopEvent(load.stop)))
        consumer = Consumer({"bootstrap.servers": stack.broker.bootstrap, "group.id": f"memory-{time.time()}"})
        threading.Thread(target=load.run, name="memory-load", daemon=True).start()
        monitor.start()
        started = time.monotonic()
        print(f"\n{args.load}x the demo's traffic for {args.minutes:g} min, warm-up {args.warmup:g} min; "
              f"logs under {base}\n" + table([])[0], flush=True)
        for minute in range(1, int(args.minutes) + 1):
            time.sleep(max(0.0, started + minute * 60 - time.monotonic()))
            if minute >= args.warmup:
                monitor.after_warmup.set()
            try:
                samples.append(sample(stack, consumer, monitor, started))
            except Exception as exc:  # a component died: the checks below say so; keep the samples so far
                checks.append((False, f"sampling at minute {minute} failed: {exc}"))
                break
            print(table(samples)[-1], flush=True)
        consumer.close()
        monitor.join(10)
        converged, rows, equal = converge(stack, 120)
        load.pause()
        checks += verdict(args, samples, monitor, equal, converged, rows, load)
    except Exception as exc:
        checks.append((False, f"the run stopped: {exc!r}"))
    finally:
        stack.stop()
    print()
    print("\n".join(table(samples)))
    for failure in monitor.failures[:10]:
        print(f"    {failure}")
    for noted in monitor.warmup_down[:5]:
        print(f"    during the warm-up (not failed): {noted}")
    for passed, text in checks:
        print(("PASS " if passed else "FAIL ") + text)
    if args.plot:
        from bench.plots import save_series

        path = save_series("memory", f"Demo pipeline at {args.load}x its traffic ({args.minutes:g} min)",
                           [s.minute for s in samples],
                           {"cdcwatch RSS": [s.rss["cdcwatch"] for s in samples],
                            "driver Python RSS": [s.rss["driver python"] for s in samples],
                            "driver JVM live heap": [s.heap for s in samples]},
                           {name: [float(s.fds.get(name, -1)) for s in samples] for name in PROCESSES},
                           warmup=args.warmup)
        if path:
            print(f"plot: {path}")
    return 0 if all(passed for passed, _ in checks) else 1


class _StopEvent:
    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def stop(self) -> None:
        self.event.set()


if __name__ == "__main__":
    exit_on_sigterm()  # stopped by kill: the servers it started stop too
    sys.exit(main())
