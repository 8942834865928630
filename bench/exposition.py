"""Rendering 100,000 series as the Prometheus text format: cdcwatch's `render_text` next to
prometheus_client's `generate_latest`, on the same families, interleaved, in one run.

The families have the shape of the kafka collector's at partition granularity (group, topic,
partition, target), with a few histograms and escaped label values. Both outputs must be identical
and pass `promtool check metrics`. Target: cdcwatch p50 <= 200 ms.

`render_text` is timed twice: as on every scrape of a running exporter ("steady": the label sets of the
previous scrape are known, as `cdcwatch serve` keeps them, with new values and new label dicts every
round) and as on its first scrape ("cold": nothing known). The target is checked on the steady figure;
both are printed.

    .venv/bin/python bench/exposition.py [--series 100000] [--rounds 9]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prometheus_client import generate_latest  # noqa: E402
from prometheus_client.metrics_core import Metric  # noqa: E402
from prometheus_client.samples import Sample  # noqa: E402

from bench.plots import save_timings  # noqa: E402
from cdcwatch.exposition import LabelBlocks, render_text  # noqa: E402

TARGET_P50_SECONDS = 0.2


def families(series: int, round: int = 0) -> list[Metric]:
    """`series` samples over gauges and counters of 4 labels, plus histograms (le buckets); values differ by round."""
    found, made, n = [], 0, 0
    while made < series:
        kind = ("gauge", "counter", "histogram")[n % 3]
        metric = Metric(f"cdcwatch_bench_family_{n}_seconds", f"Family {n}: \"quoted\" help\\.", kind)
        for i in range(min(5000, series - made)):
            labels = {"target": "kafka-a", "group": f"apply-{i // 200}", "topic": f"srv{i % 7}.public.t\"{i % 3}",
                      "partition": str(i % 200)}
            if kind == "histogram":
                le = ("0.1", "1.0", "10.0", "+Inf")[i % 4]
                metric.samples.append(Sample(metric.name + "_bucket", {**labels, "le": le}, float(i)))
            else:
                name = metric.name + ("_total" if kind == "counter" else "")
                metric.samples.append(Sample(name, labels, (i + round) * 1.37 if i % 11 else float("nan")))
            made += 1
        found.append(metric)
        n += 1
    return found


class Fixed:
    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> list[Metric]:
        return self.metrics


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    registry = Fixed(families(args.series))
    blocks = LabelBlocks()
    ours, theirs = render_text(registry), generate_latest(registry)
    identical = ours == theirs
    promtool = shutil.which("promtool")
    checked = "promtool missing"
    if promtool:
        done = subprocess.run([promtool, "check", "metrics"], input=ours, capture_output=True)
        # promtool's lint warns about the synthetic families' naming; only format errors fail it
        checked = "ok" if done.returncode in (0, 3) and b"error" not in done.stderr.lower() else done.stderr.decode()
    steady, cold, peer = "cdcwatch render_text (steady)", "cdcwatch render_text (cold)", "prometheus_client generate_latest"
    renders = {steady: lambda r: render_text(r, blocks), cold: render_text, peer: generate_latest}
    timings: dict[str, list[float]] = {name: [] for name in renders}
    for n in range(args.rounds):  # interleaved: all see the same machine noise
        registry = Fixed(families(args.series, n + 1))  # a new scrape: new values, new label dicts
        for name, render in renders.items():
            started = time.perf_counter()
            output = render(registry)
            timings[name].append(time.perf_counter() - started)
            identical = identical and (name == peer or output == generate_latest(registry))
    print(f"{args.series} series, {len(ours) / 1e6:.1f} MB, {args.rounds} rounds each; outputs identical: {identical}; "
          f"promtool check metrics: {checked}")
    for name, samples in timings.items():
        print(f"  {name:<36} p50 {statistics.median(samples) * 1000:7.1f} ms   "
              f"p95 {sorted(samples)[int(0.95 * (len(samples) - 1))] * 1000:7.1f} ms")
    ours_p50 = statistics.median(timings[steady])
    ratio = statistics.median(timings[peer]) / ours_p50
    cold_ratio = statistics.median(timings[peer]) / statistics.median(timings[cold])
    met = ours_p50 <= TARGET_P50_SECONDS and identical and checked == "ok"
    print(f"  speed-up {ratio:.1f}x steady, {cold_ratio:.1f}x cold; outputs identical every round: {identical}; "
          f"target p50 <= {TARGET_P50_SECONDS * 1000:.0f} ms (steady): {'MET' if met else 'NOT MET'}")
    plot = save_timings("exposition", f"Text rendering of {args.series:,} series",
                        {k: [t * 1000 for t in v] for k, v in timings.items()}, target=TARGET_P50_SECONDS * 1000)
    if plot:
        print(f"  plot: {plot}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
