"""Many Debezium connectors across many Kafka Connect JVMs in one scrape, next to jmx_exporter's agents.

--jvms Kafka Connect 4 workers (standalone, one JVM each) run --connectors released Debezium
PostgreSQL connectors between them (round-robin, one replication slot each) against one local
PostgreSQL; each worker has prometheus/jmx_exporter's Java agent attached (the debezium-examples
rules of bench/jmx_peer.py). `cdcwatch serve` has one JMX target per worker. Both are scraped by one or two scrapers
(`--scraper`, default both), whose figures are printed and plotted Prometheus' first:

- **prometheus**: a real Prometheus (the Debian package) with its default scrape settings but the interval
  (`--interval`, 5 s; its default timeout is then capped at 5 s): its own Accept header, which asks for OpenMetrics
  first (cdcwatch and the agents both answer it), gzip, a kept-alive connection per target. In windows of
  `--window` scrapes, alternating, Prometheus scrapes either `cdcwatch serve` alone (one target) or the 10 agents
  alone (ten targets, each at its own offset in the interval, as Prometheus spreads them), and `up`,
  `scrape_duration_seconds` and `scrape_samples_scraped` are read from Prometheus itself (bench/prometheus_scrape.py;
  the first scrape of each target in a window is not counted). A round of the agents is each agent's k-th scrape of a
  window; its time, the slowest of them. CPU: each process's CPU time within each scrape's span (from its start to
  its start plus its duration), from /proc sampled every 20 ms (bench/procstat.py): cdcwatch serve's own and the
  JVMs' meanwhile (answering its reads, and their own work), and for an agent its own JVM's.
- **python**: this process, interleaved: a full `/metrics` scrape of `cdcwatch serve` (every target collected
  concurrently), and one round of the agents, every agent scraped at once, timed until the slowest answers (what a
  Prometheus scraping them in parallel waits for); over a kept-alive HTTP/1.1 connection each (bench/scrape.py),
  asking for the text format 0.0.4 (no Accept header); CPU over each scrape or round.

Every counted scrape of cdcwatch must read `cdcwatch_up 1` for every worker and the streaming bean of every connector.
Prints p50/p95 of both, their ratio, the CPU each costs, the floor the machine's cores put under one scrape, the
exporter's RSS, and the targets as met or not for each scraper; writes docs/bench/jmx_fleet.png.

Targets, as ratios against the agents in the same run: cdcwatch serve's p50 ahead of a round of the agents; its CPU
per fleet scrape at most half of what the agents spend on a round of theirs; exporter RSS <= 200 MB.

    .venv/bin/python bench/jmx_fleet.py [--scraper prometheus|python|both] [--interval 5s] [--window 5]
        [--jvms 10] [--connectors 50] [--scrapes 25]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.jmx_peer import AGENT_JVM_ARGS, AGENT_RULES, Server, fetch, p95, stop_all, timed  # noqa: E402
from bench.plots import save_timing_panels  # noqa: E402
from bench.procstat import CpuTrace, cpu_seconds, stat_cpu_seconds  # noqa: E402
from bench.prometheus_scrape import INTERVAL, PrometheusScraper  # noqa: E402
from bench.scrape import Scraper  # noqa: E402
from devstack.configs import exporter_config, jmx_target, listen  # noqa: E402
from devstack.connect import ConnectWorker  # noqa: E402
from devstack.debezium import postgres_connector_properties  # noqa: E402
from devstack.kafka import KafkaBroker  # noqa: E402
from devstack.postgres import PostgresServer  # noqa: E402
from devstack.procs import exit_on_sigterm, free_port, jvm_dir, port_open, rss_mib, wait_for  # noqa: E402
from devstack.prometheus import Scrape  # noqa: E402
from devstack.samples import parse, value  # noqa: E402

TARGET_CPU_SHARE = 0.5
"""cdcwatch serve's CPU per fleet scrape, at most this share of the agents' CPU per round."""
TARGET_RSS_MIB = 200.0
ENGINE_ONLY = ("name", "offset.storage", "offset.storage.file.filename", "offset.flush.interval.ms", "errors.max.retries")
SERVE_JOB = "cdcwatch"
AGENTS_JOB = "jmx_exporter"


def prometheus_view(prometheus: PrometheusScraper, trace: CpuTrace, serve_target: str, agent_targets: list[str],
                    connectors: int, scrapes: int, window: int, rss: Callable[[], float]
                    ) -> tuple[dict[str, list[float]], dict[str, bool]]:
    """Prometheus scrapes cdcwatch serve and the agents in alternating windows until each has `scrapes` counted
    (every agent `scrapes` times); prints the figures; the timings (seconds) to plot and the targets, met or not."""
    jvm_of = {target: f"jvm{n}" for n, target in enumerate(agent_targets)}
    jvms = list(jvm_of.values())
    serve_scrapes: list[Scrape] = []
    rounds: list[list[Scrape]] = []
    unchecked: list[str] = []
    done = round_number = 0
    while done < scrapes:
        count = min(window, scrapes - done)
        order = [SERVE_JOB, AGENTS_JOB] if round_number % 2 == 0 else [AGENTS_JOB, SERVE_JOB]
        for job in order:
            if job == SERVE_JOB:
                taken = prometheus.window({SERVE_JOB: [serve_target]}, count)
                counted = taken.scrapes[SERVE_JOB]
                serve_scrapes.extend(counted)
                unchecked.extend(serve_checks(prometheus, taken.started, counted, len(agent_targets), connectors))
            else:
                taken = prometheus.window({AGENTS_JOB: agent_targets}, count)
                by_target: dict[str, list[Scrape]] = {}
                for scrape in taken.scrapes[AGENTS_JOB]:
                    by_target.setdefault(scrape.instance, []).append(scrape)
                rounds.extend([list(kth) for kth in zip(*by_target.values(), strict=True)])
        done += count
        round_number += 1
    trace.sample()

    def span(who: str | list[str], scrape: Scrape) -> float:
        return trace.spent(who, scrape.timestamp, scrape.timestamp + scrape.duration)

    serve_seconds = [s.duration for s in serve_scrapes]
    slowest = [max(s.duration for s in kth) for kth in rounds]
    each = [s.duration for kth in rounds for s in kth]
    ours = sum(span("serve", s) for s in serve_scrapes) / len(serve_scrapes)
    answering = sum(span(jvms, s) for s in serve_scrapes) / len(serve_scrapes)
    theirs = sum(span(jvm_of[s.instance], s) for kth in rounds for s in kth) / len(rounds)
    serve_up = sum(1 for s in serve_scrapes if s.up == 1)
    agents_up = sum(1 for kth in rounds for s in kth if s.up == 1)
    serve_p50, slowest_p50 = statistics.median(serve_seconds), statistics.median(slowest)
    memory = rss()
    print(f"\nscraped by {prometheus.settings}; windows of {window} counted scrapes, cdcwatch serve and the agents "
          "alternating")
    print(f"  cdcwatch serve /metrics (all targets): p50 {serve_p50 * 1000:7.1f} ms   p95 {p95(serve_seconds) * 1000:7.1f} ms"
          f"   up {serve_up}/{len(serve_scrapes)}, samples {statistics.median([s.samples for s in serve_scrapes]):.0f}")
    print(f"  jmx_exporter agents, slowest of each round: p50 {slowest_p50 * 1000:7.1f} ms   p95 {p95(slowest) * 1000:7.1f} ms"
          f"   ({len(rounds)} rounds of {len(agent_targets)})")
    print(f"  jmx_exporter agents, each scrape: p50 {statistics.median(each) * 1000:7.1f} ms   p95 {p95(each) * 1000:7.1f} ms"
          f"   up {agents_up}/{len(each)}, samples per round "
          f"{statistics.median([sum(s.samples for s in kth) for kth in rounds]):.0f}")
    print(f"  agents' slowest per round / cdcwatch serve p50: {slowest_p50 / serve_p50:.2f}x; cdcwatch serve RSS "
          f"{memory:.0f} MiB")
    print(f"  CPU within the scrapes' spans: per cdcwatch scrape, cdcwatch serve {ours * 1000:.0f} ms and the Connect "
          f"JVMs {answering * 1000:.0f} ms meanwhile; per round of the agents, their JVMs {theirs * 1000:.0f} ms")
    print(f"  cdcwatch serve's CPU per fleet scrape / the agents' per round: {ours / theirs:.2f}x; with the JVMs' "
          f"meanwhile: {(ours + answering) / theirs:.2f}x")
    if unchecked:
        print(f"  counted cdcwatch scrapes that missed a worker or a connector: {len(unchecked)}, e.g. {unchecked[:3]}")
    all_up = serve_up == len(serve_scrapes) and agents_up == len(each) and not unchecked
    checks = {
        "Prometheus: every counted scrape up, cdcwatch's with every worker and connector": all_up,
        "Prometheus: cdcwatch serve p50 ahead of the agents' slowest per round": serve_p50 < slowest_p50,
        f"Prometheus: its CPU per fleet scrape <= {TARGET_CPU_SHARE:g} x the agents' per round": ours <= TARGET_CPU_SHARE * theirs,
        f"Prometheus: RSS <= {TARGET_RSS_MIB:.0f} MiB": memory <= TARGET_RSS_MIB,
    }
    timings = {"cdcwatch serve (all targets)": serve_seconds, "agents, slowest of each round": slowest,
               "agents, each scrape": each}
    return timings, checks


def serve_checks(prometheus: PrometheusScraper, since: float, counted: list[Scrape], jvms: int,
                 connectors: int) -> list[str]:
    """What each counted scrape of cdcwatch serve missed, as Prometheus stored it: a worker not `cdcwatch_up 1`, a
    connector without its streaming bean."""
    stamps = {s.timestamp for s in counted}
    up: dict[float, int] = dict.fromkeys(stamps, 0)
    for points in prometheus.raw(f'cdcwatch_up{{job="{SERVE_JOB}",collector="debezium"}}', since).values():
        for t, v in points:
            if t in up and v == 1:
                up[t] += 1
    streaming: dict[float, set[str]] = {t: set() for t in stamps}
    for labels, points in prometheus.raw(f'cdcwatch_debezium_connected{{job="{SERVE_JOB}",context="streaming"}}',
                                         since).items():
        for t, _ in points:
            if t in streaming:
                streaming[t].add(dict(labels).get("server", ""))
    return [f"scrape at {t:.3f}: {up[t]}/{jvms} workers up, {len(streaming[t])}/{connectors} streaming beans"
            for t in sorted(stamps) if up[t] < jvms or len(streaming[t]) < connectors]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jvms", type=int, default=10, help="Kafka Connect workers, one JVM each")
    parser.add_argument("--connectors", type=int, default=50, help="Debezium connectors across the workers")
    parser.add_argument("--scrapes", type=int, default=25, help="counted scrapes (rounds of the agents) per scraper")
    parser.add_argument("--scraper", choices=["prometheus", "python", "both"], default="both",
                        help="who scrapes: a real Prometheus (default settings but the interval), this process asking "
                             "for text 0.0.4, or both (Prometheus' figures first); default both")
    parser.add_argument("--interval", default=INTERVAL, help=f"Prometheus' scrape interval (default {INTERVAL})")
    parser.add_argument("--window", type=int, default=5, help="Prometheus: counted scrapes per window (default 5)")
    parser.add_argument("--profile", action="store_true",
                        help="also print where an in-process scrape of every target spends its CPU time")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="cdcwatch-bench-fleet-"))
    base.chmod(0o755)
    (base / "agent.yml").write_text(AGENT_RULES, encoding="utf-8")
    agent_jar = next(jvm_dir("jmx-exporter").glob("jmx_prometheus_javaagent-*.jar"))
    pg = PostgresServer(base / "pg", free_port())
    broker = KafkaBroker(base / "broker")
    running: list[Server] = []
    serve = None
    prometheus: PrometheusScraper | None = None
    trace: CpuTrace | None = None
    try:
        pg.start()
        running.append(pg)
        slots = args.connectors + 4
        for setting, number in (("max_replication_slots", slots), ("max_wal_senders", slots),
                               ("max_connections", 2 * slots + 20)):
            pg.sql(f"ALTER SYSTEM SET {setting} = {number}")  # one per call: not inside a transaction block
        pg.stop()
        pg.start()
        pg.sql("CREATE TABLE customers (id int PRIMARY KEY, name text);"
               "INSERT INTO customers SELECT g, 'c' || g FROM generate_series(1, 1000) g;")
        broker.start()
        running.append(broker)
        workers, agent_urls = [], []
        for jvm in range(args.jvms):
            connectors = {}
            for n in range(jvm, args.connectors, args.jvms):
                properties = postgres_connector_properties(base, pg.port, f"bench{n}", "public.customers",
                                                           slot=f"bench_slot_{n}")
                for engine_only in ENGINE_ONLY:
                    properties.pop(engine_only)
                connectors[f"bench{n}-connector"] = properties
            worker = ConnectWorker(base / f"connect{jvm}", broker.bootstrap, connectors)
            agent_port = free_port()
            worker.jvm_args = [f"-javaagent:{agent_jar}=127.0.0.1:{agent_port}:{base / 'agent.yml'}", *AGENT_JVM_ARGS]
            worker.start(timeout=300)
            running.append(worker)
            workers.append(worker)
            agent_urls.append(f"http://127.0.0.1:{agent_port}/metrics")

        def all_streaming() -> bool:
            lines = [line for url in agent_urls for line in fetch(url).splitlines() if 'context="streaming"' in line]
            return all(any(f'name="bench{n}"' in line for line in lines) for n in range(args.connectors))
        wait_for(all_streaming, 600, "every connector's streaming bean in the agents' output", interval=2)

        port = free_port()
        config = base / "cdcwatch.yml"
        config.write_text(exporter_config(listen=listen(port), debezium=[
            jmx_target(f"connect{jvm}", worker.jmx_port, timeout_seconds=30) for jvm, worker in enumerate(workers)]))
        serve = subprocess.Popen([sys.executable, "-m", "cdcwatch.cli", "serve", "--config.file", str(config)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: port_open(port), 60, "cdcwatch serve")
        serve_url = f"http://127.0.0.1:{port}/metrics"

        answers: list[str] = []
        serve_scraper, agent_scrapers = Scraper(serve_url), [Scraper(url) for url in agent_urls]

        def scrape_serve() -> None:
            answers.append(serve_scraper().decode())  # checked after the timing: parsing here is not the scrape's cost

        def check_serve() -> None:
            samples = parse(answers.pop())
            down = [jvm for jvm in range(args.jvms)
                    if value(samples, "cdcwatch_up", collector="debezium", target=f"connect{jvm}") != 1]
            missing = [n for n in range(args.connectors)
                       if value(samples, "cdcwatch_debezium_connected", server=f"bench{n}", context="streaming") is None]
            if down or missing:
                raise RuntimeError(f"the timed scrape missed workers {down} / connectors {missing}")

        agents = ThreadPoolExecutor(len(agent_urls))

        def scrape_agents() -> None:
            list(agents.map(lambda scraper: scraper(), agent_scrapers))

        scrape_serve()  # warm-up: connections, first class loads
        check_serve()
        scrape_agents()
        quiet = machine_busy(5.0)  # what the stack alone keeps busy, before anything is timed
        jvm_pids = [worker.server.pid for worker in workers]
        print(f"{args.connectors} connectors in {args.jvms} Kafka Connect JVMs; the stack alone, unscraped, kept "
              f"{quiet:.0%} of the machine's {os.cpu_count()} cores busy")
        checks: dict[str, bool] = {}
        panels: dict[str, dict[str, list[float]]] = {}
        if args.scraper in ("prometheus", "both"):
            prometheus = PrometheusScraper(base, args.interval)
            prometheus.start()
            trace = CpuTrace({"serve": serve.pid, **{f"jvm{n}": pid for n, pid in enumerate(jvm_pids) if pid is not None}},
                             every=0.02).start()
            by_prometheus, prometheus_checks = prometheus_view(
                prometheus, trace, f"127.0.0.1:{port}", [url.removeprefix("http://").removesuffix("/metrics")
                                                         for url in agent_urls],
                args.connectors, args.scrapes, args.window, lambda: rss_mib(serve.pid))
            checks.update(prometheus_checks)
            panels[f"scraped by Prometheus (its scrape_duration_seconds, interval {args.interval})"] = {
                name: [t * 1000 for t in seconds] for name, seconds in by_prometheus.items()}
        if args.scraper in ("python", "both"):
            timings: dict[str, list[float]] = {"cdcwatch serve /metrics (all targets)": [],
                                               "jmx_exporter agents /metrics (all, in parallel)": []}
            cpu = {"serve": {"cdcwatch serve": 0.0, "the Connect JVMs": 0.0},
                   "agents": {"cdcwatch serve": 0.0, "the Connect JVMs": 0.0}}

            def metered(round_name: str, action: Callable[[], None]) -> float:
                """Times `action`, and adds the CPU time cdcwatch serve and the JVMs spent meanwhile to `cpu`."""
                before = cpu_seconds([serve.pid]), cpu_seconds(jvm_pids)
                took = timed(action)
                cpu[round_name]["cdcwatch serve"] += cpu_seconds([serve.pid]) - before[0]
                cpu[round_name]["the Connect JVMs"] += cpu_seconds(jvm_pids) - before[1]
                return took

            for _ in range(args.scrapes):  # interleaved: both see the same machine noise
                timings["cdcwatch serve /metrics (all targets)"].append(metered("serve", scrape_serve))
                check_serve()
                timings["jmx_exporter agents /metrics (all, in parallel)"].append(metered("agents", scrape_agents))

            rss = rss_mib(serve.pid)
            print(f"\nscraped by the Python scraper asking for text 0.0.4, {args.scrapes} interleaved rounds")
            for name, samples in timings.items():
                print(f"  {name:<48} p50 {statistics.median(samples) * 1000:7.1f} ms   p95 {p95(samples) * 1000:7.1f} ms")
            serve_p50 = statistics.median(timings["cdcwatch serve /metrics (all targets)"])
            agents_p50 = statistics.median(timings["jmx_exporter agents /metrics (all, in parallel)"])
            print(f"  agents / cdcwatch serve p50: {agents_p50 / serve_p50:.2f}x; cdcwatch serve RSS {rss:.0f} MiB")
            for round_name, spent in cpu.items():
                print(f"  CPU per {'cdcwatch scrape' if round_name == 'serve' else 'round of the agents'}: " + ", ".join(
                    f"{who} {seconds / args.scrapes * 1000:.0f} ms" for who, seconds in spent.items()))
            ours = cpu["serve"]["cdcwatch serve"] / args.scrapes
            answering = cpu["serve"]["the Connect JVMs"] / args.scrapes
            theirs = cpu["agents"]["the Connect JVMs"] / args.scrapes
            print(f"  cdcwatch serve's CPU per fleet scrape / the agents' per round: {ours / theirs:.2f}x; with what the "
                  f"JVMs spend answering its reads: {(ours + answering) / theirs:.2f}x")
            cores = os.cpu_count() or 1
            print(f"  floor on {cores} cores: one cdcwatch scrape costs {(ours + answering) * 1000:.0f} ms of CPU in all, "
                  f"so no scrape here can take less than {(ours + answering) / cores * 1000:.0f} ms; a round of the "
                  f"agents {theirs / cores * 1000:.0f} ms")
            checks.update({
                "Python scraper (text 0.0.4): cdcwatch serve p50 ahead of the agents'": serve_p50 < agents_p50,
                f"Python scraper (text 0.0.4): its CPU per fleet scrape <= {TARGET_CPU_SHARE:g} x the agents' per round":
                    ours <= TARGET_CPU_SHARE * theirs,
                f"Python scraper (text 0.0.4): RSS <= {TARGET_RSS_MIB:.0f} MiB": rss <= TARGET_RSS_MIB,
            })
            panels["scraped by the Python scraper asking for text 0.0.4"] = {
                name: [t * 1000 for t in seconds] for name, seconds in timings.items()}
        agents.shutdown()
        if args.profile:
            profile(config)
        print()
        for check, met in checks.items():
            print(f"  {check}: {'MET' if met else 'NOT MET'}")
        plot = save_timing_panels("jmx_fleet", f"Debezium MBeans of {args.connectors} connectors in {args.jvms} "
                                  "Connect JVMs", panels)
        if plot:
            print(f"  plot: {plot}")
        return 0 if all(checks.values()) else 1
    finally:
        if trace is not None:
            trace.stop()
        if prometheus is not None:
            prometheus.stop()
        stop_all(serve, running)


def profile(config: Path) -> None:
    """Where an in-process scrape of every target spends CPU: per thread (by name: the collections', the JMX
    reads', the client JVM's own), then cProfile of every target's collection in turn, in this thread."""
    import cProfile
    import pstats
    from collections import defaultdict

    from cdcwatch.exporter import Exporter
    from cdcwatch.validation import load_config

    def by_thread() -> dict[str, float]:
        spent: dict[str, float] = defaultdict(float)
        for task in Path(f"/proc/{os.getpid()}/task").iterdir():
            try:
                text = (task / "stat").read_text()
            except OSError:  # the thread ended meanwhile
                continue
            name = text[text.index("(") + 1:text.rindex(")")]
            spent[name.rstrip("0123456789-_ ") or name] += stat_cpu_seconds(text)
        return spent

    exporter = Exporter.from_config(load_config(config))
    for _ in range(3):
        exporter.scrape()  # connections, first class loads, the JIT
    before = by_thread()
    for _ in range(10):
        exporter.scrape()
    spent = {name: seconds - before.get(name, 0.0) for name, seconds in by_thread().items()}
    busiest = sorted(spent.items(), key=lambda item: -item[1])[:8]
    print(f"in process, CPU a scrape of all targets: {sum(spent.values()) * 100:.0f} ms; by thread: " + ", ".join(
        f"{name} {seconds * 100:.0f} ms" for name, seconds in busiest if seconds > 0))
    collectors = [scheduled.collector for scheduled in exporter._collectors]
    profiler = cProfile.Profile()
    profiler.runcall(lambda: [collector.collect() for _ in range(10) for collector in collectors])
    pstats.Stats(profiler).sort_stats("tottime").print_stats(20)
    exporter.close()


def machine_busy(seconds: float) -> float:
    """The share of all cores' time spent on anything but idling and waiting for I/O, over `seconds`."""
    def times() -> tuple[int, int]:
        fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(fields), fields[3] + fields[4]  # total, idle + iowait
    total, idle = times()
    time.sleep(seconds)
    total_after, idle_after = times()
    return 1 - (idle_after - idle) / max(total_after - total, 1)


if __name__ == "__main__":
    exit_on_sigterm()  # stopped by kill: the servers it started stop too
    sys.exit(main())
