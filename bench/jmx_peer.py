"""Debezium MBeans of one Kafka Connect JVM: cdcwatch next to prometheus/jmx_exporter, in one run.

A Kafka Connect 4 worker runs the released Debezium PostgreSQL connector(s) against a local
PostgreSQL (snapshot + streaming beans), with jmx_prometheus_javaagent attached to the same JVM and
the debezium-examples rules (debezium beans only, as that project ships them). Timed, interleaved:
- cdcwatch's collection in this process (JPype backend), the figure the target speaks of;
- a full `/metrics` scrape of `cdcwatch serve` (its own process) over HTTP;
- a full `/metrics` scrape of the agent over HTTP (its in-process JMX read + rendering).
Both are scraped as Prometheus scrapes: over a kept-alive HTTP/1.1 connection each (bench/scrape.py).
Untimed warm-up rounds come first (the JIT compiles the Connect JVM's RMI path and the agent's
alike, as on an exporter scraped all day). Every timed cdcwatch scrape must read `cdcwatch_up 1` exactly. Then, with the source idle, the
values both export are compared. Prints p50/p95 of each, the ratio, the exporter's RSS, and the
targets as met or not; writes docs/bench/jmx_peer.png.

Targets: one connector's collection <= 10 ms p50 and no slower than the agent's scrape; exporter
RSS <= 200 MB.

    .venv/bin/python bench/jmx_peer.py [--connectors 1] [--scrapes 100] [--warmup 100]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.plots import save_timings  # noqa: E402
from bench.scrape import Scraper  # noqa: E402
from devstack.configs import exporter_config, jmx_target, listen  # noqa: E402
from devstack.connect import ConnectWorker  # noqa: E402
from devstack.debezium import postgres_connector_properties  # noqa: E402
from devstack.kafka import KafkaBroker  # noqa: E402
from devstack.postgres import PostgresServer  # noqa: E402
from devstack.procs import exit_on_sigterm, free_port, jvm_dir, port_open, rss_mib, wait_for  # noqa: E402
from devstack.samples import Values, parse, value  # noqa: E402

Server = PostgresServer | KafkaBroker | ConnectWorker

TARGET_COLLECT_SECONDS = 0.010
TARGET_RSS_MIB = 200.0

AGENT_JVM_ARGS = ["-Dsun.net.httpserver.nodelay=true"]
"""The agent at its best: the JDK's HTTP server it answers with leaves Nagle's algorithm on by default, and over a
kept-alive connection (as Prometheus scrapes) the end of each answer then waits for the client's delayed ACK, about
40 ms."""

AGENT_RULES = """\
startDelaySeconds: 0
lowercaseOutputName: false
lowercaseOutputLabelNames: false
includeObjectNames: ["debezium.*:*"]
rules:
- pattern: "debezium.([^:]+)<type=connector-metrics, context=([^,]+), server=([^,]+), key=([^>]+)><>RowsScanned"
  name: "debezium_metrics_RowsScanned"
  labels: {plugin: "$1", name: "$3", context: "$2", table: "$4"}
- pattern: "debezium.([^:]+)<type=connector-metrics, server=([^,]+), task=([^,]+), context=([^,]+), database=([^>]+)>([^:]+)"
  name: "debezium_metrics_$6"
  labels: {plugin: "$1", name: "$2", task: "$3", context: "$4", database: "$5"}
- pattern: "debezium.([^:]+)<type=connector-metrics, server=([^,]+), task=([^,]+), context=([^>]+)>([^:]+)"
  name: "debezium_metrics_$5"
  labels: {plugin: "$1", name: "$2", task: "$3", context: "$4"}
- pattern: "debezium.([^:]+)<type=connector-metrics, context=([^,]+), server=([^>]+)>([^:]+)"
  name: "debezium_metrics_$4"
  labels: {plugin: "$1", name: "$3", context: "$2"}
"""
"""The rules of debezium-examples' monitoring/debezium-jmx-exporter/config.yml, restricted to the Debezium beans."""

COMPARED = {  # jmx_exporter attribute -> cdcwatch metric (same unit: counts and flags)
    "TotalNumberOfEventsSeen": "cdcwatch_debezium_events_seen_total",
    "NumberOfCommittedTransactions": "cdcwatch_debezium_committed_transactions_total",
    "QueueTotalCapacity": "cdcwatch_debezium_queue_capacity",
    "Connected": "cdcwatch_debezium_connected",
}


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def p95(samples: list[float]) -> float:
    return sorted(samples)[int(0.95 * (len(samples) - 1))]


def sample(values: Values, metric: str, labels: dict[str, str]) -> float | None:
    """The one sample of `metric` whose labels include `labels` (jmx_exporter's labels include `name`)."""
    found = [v for (n, ls), v in values.items() if n == metric and set(labels.items()) <= set(ls)]
    return found[0] if len(found) == 1 else None


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.read().decode()


def verdict(name: str, title: str, timings: dict[str, list[float]], checks: dict[str, bool]) -> int:
    """Print each target as met or not, plot the timings (seconds) in ms; the exit code."""
    for check, met in checks.items():
        print(f"  {check}: {'MET' if met else 'NOT MET'}")
    plot = save_timings(name, title, {k: [t * 1000 for t in v] for k, v in timings.items()})
    if plot:
        print(f"  plot: {plot}")
    return 0 if all(checks.values()) else 1


def stop_all(serve: subprocess.Popen[bytes] | None, running: list[Server]) -> None:
    """Stop `cdcwatch serve` and then the servers, last started first."""
    if serve is not None:
        serve.terminate()
        serve.wait(30)
    for component in reversed(running):
        component.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connectors", type=int, default=1, help="Debezium connectors in the one worker")
    parser.add_argument("--scrapes", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=100,
                        help="untimed rounds first: both sides' JIT-compiled paths, as on an exporter scraped all day")
    parser.add_argument("--profile", action="store_true", help="also print where cdcwatch's collection spends its time")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="cdcwatch-bench-jmx-"))
    base.chmod(0o755)
    agent_port = free_port()
    (base / "agent.yml").write_text(AGENT_RULES, encoding="utf-8")
    agent_jar = next(jvm_dir("jmx-exporter").glob("jmx_prometheus_javaagent-*.jar"))
    pg = PostgresServer(base / "pg", free_port())
    broker = KafkaBroker(base / "broker")
    connectors = {}
    running: list[Server] = []
    serve = None
    try:
        pg.start()
        running.append(pg)
        pg.sql("CREATE TABLE customers (id int PRIMARY KEY, name text);"
               "INSERT INTO customers SELECT g, 'c' || g FROM generate_series(1, 5000) g;")
        broker.start()
        running.append(broker)
        for n in range(args.connectors):
            properties = postgres_connector_properties(base, pg.port, f"bench{n}", "public.customers", slot=f"bench_slot_{n}")
            for engine_only in ("name", "offset.storage", "offset.storage.file.filename", "offset.flush.interval.ms",
                                "errors.max.retries"):
                properties.pop(engine_only)
            connectors[f"bench{n}-connector"] = properties
        worker = ConnectWorker(base / "connect", broker.bootstrap, connectors)
        worker.jvm_args = [f"-javaagent:{agent_jar}=127.0.0.1:{agent_port}:{base / 'agent.yml'}", *AGENT_JVM_ARGS]
        worker.start()
        running.append(worker)
        agent_url = f"http://127.0.0.1:{agent_port}/metrics"
        wait_for(lambda: fetch(agent_url).count('context="streaming"') > 0 and
                 all(f'name="bench{n}"' in fetch(agent_url) for n in range(args.connectors)), 180,
                 "every connector's streaming bean in the agent's output")

        port = free_port()
        config = base / "cdcwatch.yml"
        config.write_text(exporter_config(listen=listen(port),
                                          debezium=[jmx_target("connect", worker.jmx_port, timeout_seconds=30)]))
        serve = subprocess.Popen([sys.executable, "-m", "cdcwatch.cli", "serve", "--config.file", str(config)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: port_open(port), 60, "cdcwatch serve")
        serve_url = f"http://127.0.0.1:{port}/metrics"

        from cdcwatch.exporter import build_collectors
        from cdcwatch.validation import config_model

        collector = build_collectors(config_model().model_validate(
            {"debezium": [{"name": "connect", "jmx": {"host": "127.0.0.1", "port": worker.jmx_port}}]}))[0].collector
        collector.collect()  # warm-up: connection, first class loads

        answers: list[str] = []
        serve_scraper, agent_scraper = Scraper(serve_url), Scraper(agent_url)

        def scrape_serve() -> None:
            answers.append(serve_scraper().decode())  # checked after the timing: parsing here is not the scrape's cost

        serve_collections: list[float] = []

        def check_serve() -> None:
            values = parse(answers.pop())
            if value(values, "cdcwatch_up", collector="debezium", target="connect") != 1:
                raise RuntimeError("cdcwatch_up is not 1: the timed scrape did not reach the connector")
            serve_collections.append(value(values, "cdcwatch_scrape_duration_seconds", collector="debezium",
                                           target="connect") or 0.0)

        for _ in range(args.warmup):  # untimed, interleaved like the timed rounds
            collector.collect(), serve_scraper(), agent_scraper()
        timings: dict[str, list[float]] = {"cdcwatch collection (in process)": [], "cdcwatch serve /metrics": [],
                                           "jmx_exporter agent /metrics": []}
        for _ in range(args.scrapes):  # interleaved: all three see the same machine noise
            timings["cdcwatch collection (in process)"].append(timed(collector.collect))
            timings["cdcwatch serve /metrics"].append(timed(scrape_serve))
            check_serve()
            timings["jmx_exporter agent /metrics"].append(timed(agent_scraper))

        if args.profile:
            import cProfile
            import pstats

            profiler = cProfile.Profile()
            profiler.runcall(lambda: [collector.collect() for _ in range(20)])
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)

        # values: with the source idle, both read the same beans a moment apart
        ours, theirs = parse(fetch(serve_url)), parse(fetch(agent_url))
        mismatches, compared = [], 0
        for attribute, metric in COMPARED.items():
            for n in range(args.connectors):
                peer = sample(theirs, f"debezium_metrics_{attribute}", {"name": f"bench{n}", "context": "streaming"})
                mine = value(ours, metric, server=f"bench{n}", context="streaming")
                if peer is None or mine is None:
                    mismatches.append(f"{attribute} of bench{n}: agent {peer}, cdcwatch {mine}")
                    continue
                compared += 1
                if peer != mine:
                    mismatches.append(f"{attribute} of bench{n}: agent {peer}, cdcwatch {mine}")
        rss = rss_mib(serve.pid)
        print(f"{args.connectors} connector(s) in one Kafka Connect JVM, {args.scrapes} interleaved rounds")
        shown = {**timings, "  of which serve's collection": serve_collections}  # cdcwatch_scrape_duration_seconds
        for name in ("cdcwatch collection (in process)", "cdcwatch serve /metrics", "  of which serve's collection",
                     "jmx_exporter agent /metrics"):
            samples = shown[name]
            print(f"  {name:<34} p50 {statistics.median(samples) * 1000:7.1f} ms   p95 {p95(samples) * 1000:7.1f} ms")
        collect_p50 = statistics.median(timings["cdcwatch collection (in process)"])
        agent_p50 = statistics.median(timings["jmx_exporter agent /metrics"])
        serve_p50 = statistics.median(timings["cdcwatch serve /metrics"])
        print(f"  agent / cdcwatch serve p50: {agent_p50 / serve_p50:.2f}x; cdcwatch serve RSS {rss:.0f} MiB")
        print(f"  values compared: {compared}, differing or missing: {len(mismatches)}")
        for line in mismatches:
            print(f"    {line}")
        checks = {
            f"collection p50 <= {TARGET_COLLECT_SECONDS * 1000:.0f} ms": collect_p50 <= TARGET_COLLECT_SECONDS,
            "cdcwatch serve no slower than the agent (p50)": serve_p50 <= agent_p50,
            f"RSS <= {TARGET_RSS_MIB:.0f} MiB": rss <= TARGET_RSS_MIB,
            "values equal": not mismatches,
        }
        return verdict("jmx_peer", f"Debezium MBeans of {args.connectors} connector(s), one Connect JVM", timings, checks)
    finally:
        stop_all(serve, running)


if __name__ == "__main__":
    exit_on_sigterm()  # stopped by kill: the servers it started stop too
    sys.exit(main())
