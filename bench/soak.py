"""Soak: scrape `cdcwatch serve` every second for --minutes while targets flap; RSS and open file
descriptors must not grow. Not part of CI (30 minutes by default).

Targets: a real PostgreSQL (stopped and started every --flap seconds), a real Apache Kafka 4 broker
(also flapping, out of phase) and a JMX port that answers garbage. The exporter's RSS and
fd count are printed every 5 minutes and compared at the end with their values after a 2-minute
warm-up. Bounds (each printed PASS or FAIL; any FAIL exits 1):

- RSS grows by at most --max-rss-growth MiB (default 10) after the warm-up;
- open file descriptors grow by at most --max-fd-growth (default 4: sockets of targets up at the end
  but down at the warm-up's measurement);
- no scrape of /metrics fails (flapping targets read `cdcwatch_up 0`, the scrape itself succeeds).

    .venv/bin/python bench/soak.py [--minutes 30] [--flap 20]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devstack.configs import exporter_config, jmx_target, kafka_cluster, listen, postgres_source  # noqa: E402
from devstack.kafka import KafkaBroker  # noqa: E402
from devstack.postgres import PostgresServer  # noqa: E402
from devstack.procs import exit_on_sigterm, free_port, port_open, rss_mib, wait_for  # noqa: E402


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def garbage_server() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)

    def serve() -> None:
        while True:
            connection, _ = sock.accept()
            try:
                connection.sendall(os.urandom(256))
            finally:
                connection.close()

    threading.Thread(target=serve, daemon=True).start()
    return sock.getsockname()[1]


def verdict(args: argparse.Namespace, baseline: tuple[float, int] | None, final: tuple[float, int],
            scrapes: int, errors: int) -> bool:
    """Print one PASS/FAIL line per bound; True if all pass."""
    if baseline is None:
        print("FAIL no measurement after the warm-up: run longer")
        return False
    checks = [(final[0] - baseline[0] <= args.max_rss_growth,
               f"RSS {baseline[0]:.1f} -> {final[0]:.1f} MiB, growth at most {args.max_rss_growth:g} MiB"),
              (final[1] - baseline[1] <= args.max_fd_growth,
               f"open files {baseline[1]} -> {final[1]}, growth at most {args.max_fd_growth}"),
              (errors == 0, f"{errors} of {scrapes} scrapes failed, none may")]
    for passed, text in checks:
        print(("PASS " if passed else "FAIL ") + text)
    return all(passed for passed, _ in checks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--flap", type=float, default=20, help="seconds between stops/starts of each flapping target")
    parser.add_argument("--max-rss-growth", type=float, default=10, help="MiB the RSS may grow after the warm-up")
    parser.add_argument("--max-fd-growth", type=int, default=4, help="open files that may be added after the warm-up")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="cdcwatch-soak-"))
    work.chmod(0o755)
    pg = PostgresServer(work / "pg", free_port())
    pg.start()
    broker = KafkaBroker(work / "kafka")
    broker.start()
    port = free_port()
    config = work / "cdcwatch.yml"
    config.write_text(exporter_config(listen=listen(port),
                                      debezium=[jmx_target("garbage", garbage_server(), timeout_seconds=2)],
                                      postgres=[postgres_source("pg", pg.port, timeout_seconds=2)],
                                      kafka=[kafka_cluster("broker", broker.bootstrap, timeout_seconds=2)]))
    serve = subprocess.Popen([sys.executable, "-m", "cdcwatch.cli", "serve", "--config", str(config)],
                             stdout=open(work / "serve.log", "ab"), stderr=subprocess.STDOUT)
    wait_for(lambda: port_open(port), 30, "cdcwatch serve")
    stop = threading.Event()

    def flapper() -> None:
        phase = 0
        while not stop.wait(args.flap / 2):
            phase += 1
            if phase % 4 == 1:
                pg.stop()
            elif phase % 4 == 2:
                broker.stop()
            elif phase % 4 == 3:
                pg.start()
            else:
                broker.start()

    threading.Thread(target=flapper, daemon=True).start()
    started = time.monotonic()
    end = started + args.minutes * 60
    baseline: tuple[float, int] | None = None
    errors = scrapes = 0
    next_report = started
    try:
        while time.monotonic() < end:
            tick = time.monotonic()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
                    response.read()
            except Exception:
                errors += 1
            scrapes += 1
            elapsed = time.monotonic() - started
            if baseline is None and elapsed >= min(120, args.minutes * 60 / 4):
                baseline = (rss_mib(serve.pid), fds(serve.pid))
            if tick >= next_report:
                print(f"{elapsed / 60:5.1f} min  RSS {rss_mib(serve.pid):7.1f} MiB  fds {fds(serve.pid):4d}  "
                      f"scrapes {scrapes}  errors {errors}", flush=True)
                next_report += 300
            time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
        passed = verdict(args, baseline, (rss_mib(serve.pid), fds(serve.pid)), scrapes, errors)
    finally:
        stop.set()
        serve.terminate()
        serve.wait(30)
        broker.stop()
        pg.stop()
    return 0 if passed else 1


if __name__ == "__main__":
    exit_on_sigterm()  # stopped by kill: the servers it started stop too
    sys.exit(main())
