"""A real Prometheus (Debian's package, its own Accept header) scrapes a real `cdcwatch serve` with a PostgreSQL target.

The scrape Prometheus stored must be `up`, answered in OpenMetrics (cdcwatch's own count of its answers by format
rises between two text scrapes taken around it), and say the same series with the same values as a text scrape. The
text scrapes come just before and just after Prometheus' scrape, so a series in both is in Prometheus' scrape and a
series in neither is not (a label with an empty value is no label to Prometheus); a value equal in both (everything
that did not move: the collection up, the replication slot, the configuration's load) must be Prometheus' value
exactly; a counter that moved meanwhile (the answers counted and timed) must lie between the two.
"""

from __future__ import annotations

import math
import socket
import time

import pytest

from devstack.configs import exporter_config, postgres_source
from devstack.procs import wait_for
from devstack.prometheus import PrometheusServer, Scrape
from devstack.samples import Values, total, value

pytestmark = pytest.mark.integration

SLOT = "promscrape_slot"
OPENMETRICS = "OpenMetricsText1.0.0"
JOB = "cdcwatch"
PROMETHEUS_OWN = {"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_samples_post_metric_relabeling",
                  "scrape_series_added"}
"""The series Prometheus writes itself for every scrape."""


def stored(prometheus: PrometheusServer, scrape: Scrape) -> Values:
    """The samples of exactly that scrape as Prometheus stored them (those stamped with its time), keyed as
    `devstack.samples.parse` keys a text scrape: the target's labels without the `job` and `instance` Prometheus adds."""
    found: Values = {}
    for labels, points in prometheus.raw(f'{{job="{JOB}"}}', scrape.timestamp).items():
        named = dict(labels)
        name = named.pop("__name__")
        if name in PROMETHEUS_OWN:
            continue
        assert named.pop("job") == JOB and named.pop("instance") == scrape.instance
        for timestamp, number in points:
            if timestamp == scrape.timestamp:
                found[(name, frozenset(named.items()))] = number
    return found


def as_stored(values: Values) -> Values:
    """A text scrape's samples as Prometheus stores them: a label with an empty value is no label (`server=""` on a
    slot no connector is named for)."""
    return {(name, frozenset((k, v) for k, v in labels if v != "")): number for (name, labels), number in values.items()}


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def answers(values: Values, answer_format: str | None = None) -> float:
    """`cdcwatch_metrics_responses_total`: of one format, or of all."""
    if answer_format is None:
        return total(values, "cdcwatch_metrics_responses_total") or 0.0
    return value(values, "cdcwatch_metrics_responses_total", format=answer_format) or 0.0


def test_prometheus_scrape_equals_a_text_scrape_and_is_openmetrics(postgres, stack_dir, serve_factory) -> None:
    postgres.sql(f"SELECT pg_create_logical_replication_slot('{SLOT}', 'pgoutput')")
    try:
        serve = serve_factory(exporter_config(postgres=[
            postgres_source("source", postgres.port, timeout_seconds=3, slots={"allow": ["promscrape_.*"]})]))
        wait_for(lambda: value(serve.scrape(), "cdcwatch_up", collector="postgres", target="source") == 1, 30,
                 "the postgres collection up")
        prometheus = PrometheusServer(stack_dir / "promscrape-prometheus", {JOB: [f"127.0.0.1:{serve.port}"]},
                                      default_timeout=True)
        prometheus.start()
        try:
            before = as_stored(serve.scrape())
            before_read = time.time()
            # Prometheus' first scrape that started after the text scrape was read (its stamp is the scrape's start,
            # aligned to its schedule by at most 2 ms)
            scrape: Scrape = wait_for(lambda: next(iter(prometheus.scrapes(JOB, before_read + 0.01)), None), 30,
                                      "a scrape by Prometheus after the text scrape")
            def counting_both() -> Values | None:
                """A text scrape once it counts the first one and Prometheus' (an answer is counted once written)."""
                values = as_stored(serve.scrape())
                return values if answers(values) >= answers(before) + 2 else None

            after: Values = wait_for(counting_both, 10, "a text scrape counting the answers before it")
            by_prometheus = stored(prometheus, scrape)
        finally:
            prometheus.stop()
    finally:
        postgres.drop_slot(SLOT)

    assert scrape.up == 1, scrape
    counted = {fmt: (answers(before, fmt), answers(after, fmt)) for fmt in ("PrometheusText0.0.4", OPENMETRICS)}
    assert counted[OPENMETRICS][1] > counted[OPENMETRICS][0], \
        f"Prometheus' scrape was not answered in OpenMetrics: answers by format before / after it {counted}"

    assert set(before) & set(after) <= set(by_prometheus) <= set(before) | set(after), (
        f"only in Prometheus' scrape: {sorted(set(by_prometheus) - set(before) - set(after))[:5]}; "
        f"missing from it: {sorted(set(before) & set(after) - set(by_prometheus))[:5]}")
    assert scrape.samples == len(by_prometheus), (scrape.samples, len(by_prometheus))
    steady = {key for key in set(before) & set(after) if same(before[key], after[key])}
    differ = {key: (before[key], by_prometheus[key]) for key in steady if not same(by_prometheus[key], before[key])}
    assert not differ, f"values that did not move but Prometheus stored otherwise (text, Prometheus): {differ}"
    moved = [key for key in set(before) & set(after) - steady if key[0].endswith("_total")]
    outside = {key: (before[key], by_prometheus[key], after[key]) for key in moved
               if not min(before[key], after[key]) <= by_prometheus[key] <= max(before[key], after[key])}
    assert not outside, f"counters outside the text scrapes around Prometheus' (before, Prometheus, after): {outside}"
    # what the comparison covered: the collection, the slot and the answers' counts
    assert ("cdcwatch_up", frozenset({("collector", "postgres"), ("target", "source")})) in steady
    assert any(name == "cdcwatch_postgres_replication_slot_active" and ("slot", SLOT) in labels
               for name, labels in steady)
    assert any(name == "cdcwatch_metrics_responses_total" for name, _ in moved)
    assert len(steady) >= 10, sorted(steady)


def test_a_target_slower_than_prometheus_timeout_is_up_0_in_a_scrape_prometheus_keeps(postgres, stack_dir,
                                                                                   serve_factory) -> None:
    """Prometheus sends its scrape timeout with every scrape (X-Prometheus-Scrape-Timeout-Seconds). A target whose
    own `timeout_seconds` is longer (here a server that takes the connection and never answers) is cut at that
    timeout less what the answer needs: Prometheus keeps the scrape, the slow target reads `cdcwatch_up 0` and the
    others are served. Waiting for the target's own deadline, Prometheus would give up on the whole scrape."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel takes the connections; nothing ever answers them
        serve = serve_factory(exporter_config(postgres=[
            postgres_source("source", postgres.port, timeout_seconds=10),
            postgres_source("silent", silent.getsockname()[1], timeout_seconds=10)]))
        prometheus = PrometheusServer(stack_dir / "promtimeout-prometheus", {JOB: [f"127.0.0.1:{serve.port}"]},
                                      interval="5s")  # its scrape timeout: 5 s, half the targets' 10 s
        prometheus.start()
        try:
            started = time.time()
            scrapes: list[Scrape] = wait_for(lambda: (found := prometheus.scrapes(JOB, started))[2:] and found, 60,
                                             "three scrapes by Prometheus")
            stored_up = {dict(labels)["target"]: [number for _, number in points]
                         for labels, points in prometheus.raw(f'cdcwatch_up{{job="{JOB}"}}', started).items()}
        finally:
            prometheus.stop()
    assert [scrape.up for scrape in scrapes] == [1.0] * len(scrapes), scrapes
    assert all(scrape.duration < 5 for scrape in scrapes), scrapes
    assert set(stored_up["silent"]) == {0.0} and set(stored_up["source"]) == {1.0}, stored_up
