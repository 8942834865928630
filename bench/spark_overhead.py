"""The Spark listener's cost: the same job over the same events with and without instrumentation.

The events are the real ones recorded from Debezium 3.6.3 (../shared/fixtures), cycled to
--events Kafka-shaped records (with a record timestamp, half CreateTime and half LogAppendTime, so every
stage of the latency histograms is measured) and written once to Parquet. Each round runs the job
`decode_events → [instrument] → noop sink` over them, instrumented and plain in turn, in one
SparkSession; the median of the rounds is printed as events/s with the overhead ratio.
Target: instrumentation costs ≤ 3 %.

    .venv/bin/python bench/spark_overhead.py [--events 200000] [--rounds 3] [--master local[2]]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.decode_events import recorded_records  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    from cdcwatch.spark.apply import spark_session
    from spark_listeners import CdcMetricsListener, decode_events, instrument

    spark = spark_session(args.master, "cdcwatch-bench")
    spark.sparkContext.setLogLevel("ERROR")
    CdcMetricsListener.attach(spark)
    records = recorded_records(with_schema=True)
    rows = [(key, value, topic, 0, offset)
            for offset, (key, value, topic) in enumerate(records[i % len(records)] for i in range(args.events))]
    path = Path(tempfile.mkdtemp(prefix="cdcwatch-bench-")) / "records.parquet"
    from pyspark.sql import functions as F

    spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset long") \
        .withColumn("timestamp", F.current_timestamp()).withColumn("timestampType", (F.col("offset") % 2).cast("int")) \
        .repartition(4).write.parquet(str(path))

    def run(instrumented: bool) -> float:
        events = decode_events(spark.read.parquet(str(path)))
        if instrumented:
            events = instrument(events)
        started = time.perf_counter()
        events.write.format("noop").mode("overwrite").save()
        return time.perf_counter() - started

    run(True), run(False)  # warm-up: Python workers, JIT
    timings: dict[bool, list[float]] = {True: [], False: []}
    ratios = []
    for round_ in range(args.rounds):
        order = (False, True) if round_ % 2 == 0 else (True, False)  # alternate who runs first
        for instrumented in order:
            timings[instrumented].append(run(instrumented))
        ratios.append(timings[True][-1] / timings[False][-1])
    plain, observed = statistics.median(timings[False]), statistics.median(timings[True])
    print(f"{args.events} events, {args.rounds} rounds, master {args.master}")
    print(f"  plain        {args.events / plain:>10,.0f} events/s  ({plain:.2f} s)")
    print(f"  instrumented {args.events / observed:>10,.0f} events/s  ({observed:.2f} s)")
    print(f"  overhead     {statistics.median(ratios) - 1:+.1%} median of per-round ratios "
          f"(spread {min(ratios) - 1:+.1%} .. {max(ratios) - 1:+.1%}; target <= +3%)")
    spark.stop()


if __name__ == "__main__":
    main()
