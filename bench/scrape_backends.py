"""Full scrapes of one real Debezium connector through each JMX backend, in the same run.

Starts PostgreSQL and a Debezium PostgreSQL connector (snapshot + streaming beans), then one
`cdcwatch serve` per backend, and times N scrapes of /metrics each. Prints p50/p95 per backend,
the jmxquery/jpype ratio and each exporter's RSS. Target: jpype p50 <= 50 ms and >= 10x faster.

    .venv/bin/python bench/scrape_backends.py [--scrapes 25]
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
from devstack.configs import exporter_config, listen  # noqa: E402
from devstack.debezium import DebeziumProcess, postgres_connector_properties  # noqa: E402
from devstack.postgres import PostgresServer  # noqa: E402
from devstack.procs import exit_on_sigterm, free_port, port_open, rss_mib, wait_for  # noqa: E402
from devstack.samples import parse, value  # noqa: E402


def serve(workdir: Path, jmx_url: str, backend: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    config = workdir / f"{backend}.yml"
    config.write_text(exporter_config(listen=listen(port), debezium=[
        {"name": backend, "timeout_seconds": 30, "jmx": {"url": jmx_url, "backend": backend}}]))
    process = subprocess.Popen([sys.executable, "-m", "cdcwatch.cli", "serve", "--config", str(config)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: port_open(port), 30, f"cdcwatch serve ({backend})")
    return process, port


def scrape_times(port: int, backend: str, count: int) -> list[float]:
    url = f"http://127.0.0.1:{port}/metrics"
    urllib.request.urlopen(url, timeout=60).read()  # warm-up: connect / first JVM start
    times = []
    for _ in range(count):
        started = time.perf_counter()
        body = urllib.request.urlopen(url, timeout=60).read()
        times.append(time.perf_counter() - started)
        up = value(parse(body.decode()), "cdcwatch_up", collector="debezium", target=backend)
        if up != 1:
            raise RuntimeError(f"{backend}: cdcwatch_up is {up}, not 1: the timed scrape did not reach the connector")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scrapes", type=int, default=25)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="cdcwatch-bench-"))
    base.chmod(0o755)
    pg = PostgresServer(base / "pg", free_port())
    pg.start()
    pg.sql("CREATE TABLE customers (id int PRIMARY KEY, name text);"
           "INSERT INTO customers SELECT g, 'c' || g FROM generate_series(1, 5000) g;")
    dbz = DebeziumProcess(base / "dbz", free_port(), postgres_connector_properties(base / "dbz", pg.port, "bench", "public.customers"))
    processes = []
    try:
        dbz.start()
        results = {}
        timings: dict[str, list[float]] = {}
        for backend in ("jpype", "jmxquery"):
            process, port = serve(base, dbz.jmx_url, backend)
            processes.append(process)
            if backend == "jpype":  # both beans present and streaming before timing
                def streaming(port: int = port) -> bool:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
                        return b"cdcwatch_debezium_connected" in response.read()

                wait_for(streaming, 60, "streaming bean")
            times = scrape_times(port, backend, args.scrapes)
            timings[f"{backend} /metrics"] = [t * 1000 for t in times]
            results[backend] = (statistics.median(times), statistics.quantiles(times, n=20)[18], rss_mib(process.pid))
        print(f"{'backend':10} {'p50 ms':>8} {'p95 ms':>8} {'RSS MiB':>8}   ({args.scrapes} scrapes of /metrics each)")
        for backend, (p50, p95, rss) in results.items():
            print(f"{backend:10} {p50 * 1000:8.1f} {p95 * 1000:8.1f} {rss:8.1f}")
        ratio = results["jmxquery"][0] / results["jpype"][0]
        print(f"jmxquery / jpype p50 ratio: {ratio:.1f}x  (target >= 10x; jpype p50 target <= 50 ms: "
              f"{'met' if results['jpype'][0] <= 0.05 else 'NOT met'})")
        plot = save_timings("scrape_backends", "One Debezium connector, full scrapes by JMX backend", timings, target=50)
        if plot:
            print(f"plot: {plot}")
    finally:
        for process in processes:
            process.terminate()
            process.wait(30)
        dbz.stop()
        pg.stop()


if __name__ == "__main__":
    exit_on_sigterm()  # stopped by kill: the servers it started stop too
    main()
