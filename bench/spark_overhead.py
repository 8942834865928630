"""The Spark listener's cost on a real streaming query: Kafka → decode → [instrument] → sink.

The events are the real ones recorded from Debezium (../shared/fixtures), cycled to --events
records and produced once to a topic of the local Apache Kafka 4 broker. Each round runs the same
streaming query (Spark's own Kafka source, `Trigger.AvailableNow`, --batch records per micro-batch,
a fresh checkpoint) over the whole topic twice, once with `instrument()` and the listener feeding
its metrics, once plain, alternating which goes first, in one SparkSession. Events/s of each, the
median of the per-round ratios and their spread are printed. Target: the listener plus
instrumentation cost <= 1 % of events/s.

    .venv/bin/python bench/spark_overhead.py [--events 200000] [--rounds 6] [--master local[2]]
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
from bench.plots import save_timings  # noqa: E402
from devstack.kafka import KafkaBroker  # noqa: E402
from devstack.procs import exit_on_sigterm  # noqa: E402
from devstack.spark import spark_kafka_jars  # noqa: E402

TOPIC = "bench.public.customers"
TARGET_OVERHEAD = 0.01


def produce(bootstrap: str, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": 10000,
                         "queue.buffering.max.messages": 1_000_000})
    records = recorded_records(with_schema=True)
    for i in range(count):
        key, value, _ = records[i % len(records)]
        producer.produce(TOPIC, key=key, value=value, partition=i % 4)
        if i % 50_000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("the producer could not deliver every record")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--batch", type=int, default=20_000, help="maxOffsetsPerTrigger")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    from spark_listeners import CdcMetricsListener, decode_events, instrument
    from spark_listeners.apply import spark_session

    base = Path(tempfile.mkdtemp(prefix="cdcwatch-bench-spark-"))
    broker = KafkaBroker(base / "broker")
    broker.start()
    try:
        broker.create_topic(TOPIC, partitions=4)
        produce(broker.bootstrap, args.events)
        spark = spark_session(args.master, "cdcwatch-bench", jars=tuple(spark_kafka_jars().split(",")))
        spark.sparkContext.setLogLevel("ERROR")
        listener = CdcMetricsListener.attach(spark)
        runs = 0

        def run(instrumented: bool) -> float:
            nonlocal runs
            runs += 1
            records = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
                       .option("subscribe", TOPIC).option("startingOffsets", "earliest")
                       .option("maxOffsetsPerTrigger", str(args.batch)).load())
            events = decode_events(records)
            if instrumented:
                events = instrument(events)
            query = (events.writeStream.format("noop").queryName(f"bench_{runs}_{'on' if instrumented else 'off'}")
                     .option("checkpointLocation", str(base / f"checkpoint-{runs}")).trigger(availableNow=True))
            started = time.perf_counter()
            query.start().awaitTermination()
            return time.perf_counter() - started

        run(True), run(False)  # warm-up: Python workers, JIT, the Kafka consumer pool
        timings: dict[bool, list[float]] = {True: [], False: []}
        ratios = []
        for round_ in range(args.rounds):
            order = (False, True) if round_ % 2 == 0 else (True, False)  # alternate who runs first
            for instrumented in order:
                timings[instrumented].append(run(instrumented))
            ratios.append(timings[False][-1] / timings[True][-1])  # events/s instrumented over plain
        seen = sum(sample.value for family in listener.registry.collect() for sample in family.samples
                   if sample.name == "cdcwatch_spark_events_total")
        spark.stop()
    finally:
        broker.stop()
    plain, observed = statistics.median(timings[False]), statistics.median(timings[True])
    cost = 1 - statistics.median(ratios)
    print(f"{args.events} events from Kafka, {args.rounds} rounds, {args.batch} per micro-batch, master {args.master}")
    print(f"  plain        {args.events / plain:>10,.0f} events/s  ({plain:.2f} s)")
    print(f"  instrumented {args.events / observed:>10,.0f} events/s  ({observed:.2f} s)")
    print(f"  cost         {cost:+.1%} of events/s, median of per-round ratios "
          f"(spread {1 - max(ratios):+.1%} .. {1 - min(ratios):+.1%})")
    expected = args.events * (args.rounds + 1)  # every instrumented run, the warm-up's included
    print(f"  the listener counted {seen:,.0f} events of the {expected:,} the instrumented runs read")
    met = cost <= TARGET_OVERHEAD and seen == expected
    print(f"  target <= {TARGET_OVERHEAD:.0%}: {'MET' if met else 'NOT MET'}")
    plot = save_timings("spark_overhead", f"Streaming query over {args.events:,} Debezium events from Kafka",
                        {"plain": timings[False], "instrumented + listener": timings[True]}, unit="s")
    if plot:
        print(f"  plot: {plot}")
    return 0 if met else 1


if __name__ == "__main__":
    exit_on_sigterm()  # stopped by kill: the servers it started stop too
    sys.exit(main())
