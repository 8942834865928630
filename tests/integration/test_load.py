"""Load: 20 concurrent scrapers hammer `/metrics` for 30 s against live collectors (PostgreSQL slots,
Kafka 4). No error responses; p99 latency and the exporter's RSS before/after are reported,
and RSS must stay flat."""

from __future__ import annotations

import statistics
import threading
import time
import urllib.request

import pytest

from devstack.configs import exporter_config, kafka_cluster, postgres_source
from devstack.procs import rss_mib

pytestmark = pytest.mark.integration

SCRAPERS = 20
SECONDS = 30



def test_twenty_concurrent_scrapers_for_half_a_minute(postgres, kafka, serve_factory) -> None:
    serve = serve_factory(exporter_config(postgres=[postgres_source("pg", postgres.port)],
                                          kafka=[kafka_cluster("broker", kafka.bootstrap)]))
    for _ in range(5):  # warm up: caches, pools, first connections
        serve.text()
    rss_before = rss_mib(serve.process.pid)
    latencies: list[float] = []
    errors: list[str] = []
    stop = time.monotonic() + SECONDS

    def scraper() -> None:
        while time.monotonic() < stop:
            started = time.monotonic()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{serve.port}/metrics", timeout=30) as response:
                    body = response.read()
                    if response.status != 200 or b'cdcwatch_up{collector="postgres",target="pg"} 1.0' not in body:
                        errors.append(f"status {response.status}")
            except Exception as exc:  # any failure is what this test looks for
                errors.append(repr(exc))
            latencies.append(time.monotonic() - started)

    threads = [threading.Thread(target=scraper) for _ in range(SCRAPERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rss_after = rss_mib(serve.process.pid)
    p99 = statistics.quantiles(latencies, n=100)[98]
    print(f"\n{len(latencies)} scrapes by {SCRAPERS} scrapers in {SECONDS}s: p50 {statistics.median(latencies):.3f}s"
          f" p99 {p99:.3f}s; RSS {rss_before:.1f} -> {rss_after:.1f} MiB")
    assert not errors, errors[:5]
    assert len(latencies) > SCRAPERS * 10
    assert rss_after - rss_before < 40, "RSS grew under load"
