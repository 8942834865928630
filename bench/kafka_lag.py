"""Full scrapes of the kafka collector on 50 groups x 200 partitions of a real Apache Kafka 4 broker,
next to Apache Kafka's own `kafka-consumer-groups --describe --all-groups` on the same broker.

Offsets keep moving during the run (a producer writes and every group commits further, in the
background), so the caches cannot turn it into a static best case. Scrapes of both are interleaved;
p50/p95 of each and their ratio are printed, and the lag values of one moment are compared. A scrape is
timed as Prometheus makes it (gzip, a kept-alive connection, the whole answer read); parsing it here is
not timed.
Target: cdcwatch p50 <= 250 ms at partition granularity.

kafka_exporter, kminion and Burrow would be the natural peers, but the Go module proxy reachable
here refuses all three, and Debian's Burrow 1.2.1 cannot read a Kafka 4 broker (ListOffsets v0 was
removed, and it cannot decode the offset-commit records): see docs/development.md.

    .venv/bin/python bench/kafka_lag.py [--groups 50] [--partitions 200] [--scrapes 25] [--granularity topic]
                                        [--profile]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from bench.plots import save_timings  # noqa: E402
from bench.scrape import Scraper  # noqa: E402
from devstack.kafka import KafkaBroker  # noqa: E402
from devstack.procs import free_port, port_open, wait_for  # noqa: E402
from tests.integration.conftest import Values, parse, value  # noqa: E402

TOPIC = "benchsrv.public.rows"
TARGET_P50_SECONDS = 0.25


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def percentile(samples: list[float], fraction: float) -> float:
    return sorted(samples)[int(fraction * (len(samples) - 1))]


def keep_moving(kafka: KafkaBroker, groups: list[str], partitions: int, stop: threading.Event) -> None:
    """Writes a message to every partition and moves every group's commit one further, once a second."""
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "log_level": "0"})
    consumers = {g: Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": g, "enable.auto.commit": False})
                 for g in groups}
    step = 5
    while not stop.wait(1.0):
        for partition in range(partitions):
            producer.produce(TOPIC, partition=partition, value=b'{"op":"c","ts_ms":1,"source":{"ts_ms":1}}')
        producer.flush(30)
        step += 1
        for n, consumer in enumerate(consumers.values()):
            consumer.commit(offsets=[TopicPartition(TOPIC, p, (n + p) % 5 + step - 5) for p in range(partitions)],
                            asynchronous=False)
    for consumer in consumers.values():
        consumer.close()


def profile(config: Path) -> None:
    """cProfile of in-process collections and their rendering, with offsets still moving."""
    import cProfile
    import pstats

    from cdcwatch.config import load_config
    from cdcwatch.exposition import LabelBlocks, render_text
    from cdcwatch.kafka.collector import KafkaCollector

    class Registry:
        """Families collected before, as a registry to render."""

        def __init__(self, families: Any) -> None:
            self.families = families

        def collect(self) -> Any:
            return self.families

    class Scrape:
        """One collection, as a registry to render."""

        def collect(self) -> Any:
            return collector.collect().families

    collector = KafkaCollector(load_config(config).kafka[0])
    blocks = LabelBlocks()
    render_text(Scrape(), blocks)  # connections, caches and label blocks warm, as in a running exporter
    collections, renderings = [], []
    for _ in range(10):
        started = time.perf_counter()
        families = collector.collect().families
        collections.append(time.perf_counter() - started)
        renderings.append(timed(lambda families=families: render_text(Registry(families), blocks)))
    print(f"in process: collection p50 {statistics.median(collections):.3f}s, "
          f"rendering p50 {statistics.median(renderings):.3f}s")
    profiler = cProfile.Profile()
    profiler.runcall(lambda: [render_text(Scrape(), blocks) for _ in range(10)])
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    collector.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--scrapes", type=int, default=25)
    parser.add_argument("--granularity", choices=["partition", "topic"], default="partition")
    parser.add_argument("--profile", action="store_true",
                        help="also print where an in-process collection and its rendering spend their time")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cdcwatch-bench-kafka-"))
    kafka = KafkaBroker(work / "kafka")
    kafka.start()
    serve = None
    stop = threading.Event()
    try:
        kafka.create_topic(TOPIC, args.partitions)
        producer = Producer({"bootstrap.servers": kafka.bootstrap, "log_level": "0"})
        for partition in range(args.partitions):
            for _ in range(5):
                producer.produce(TOPIC, partition=partition, value=b'{"op":"c","ts_ms":1,"source":{"ts_ms":1}}')
        producer.flush(60)
        groups = [f"bench-group-{n}" for n in range(args.groups)]
        for n, group in enumerate(groups):
            consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "enable.auto.commit": False})
            consumer.commit(offsets=[TopicPartition(TOPIC, p, (n + p) % 5) for p in range(args.partitions)],
                            asynchronous=False)
            consumer.close()

        port = free_port()
        config = work / "cdcwatch.yml"
        config.write_text(f"listen: {{address: 127.0.0.1, port: {port}}}\nkafka:\n  - name: bench\n"
                          f"    bootstrap_servers: {kafka.bootstrap}\n    timeout_seconds: 30\n"
                          f"    granularity: {args.granularity}\n")
        serve = subprocess.Popen([sys.executable, "-m", "cdcwatch.cli", "serve", "--config", str(config)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: port_open(port), 30, "cdcwatch serve")

        fetch = Scraper(f"http://127.0.0.1:{port}/metrics", compressed=True)  # as Prometheus: gzip, kept alive

        def checked(body: bytes) -> Values:
            values = parse(body.decode())
            assert value(values, "cdcwatch_up", collector="kafka", target="bench") == 1, "the kafka collection failed"
            return values

        def scrape() -> Values:
            return checked(fetch())

        collections: list[float] = []

        def timed_scrape() -> float:
            """The time of the HTTP request and the whole response; parsing it (in this process) is not timed.
            The collection's own share, as cdcwatch reports it, goes to `collections`."""
            started = time.perf_counter()
            body = fetch()
            took = time.perf_counter() - started  # includes decompressing, as Prometheus does
            collections.append(value(checked(body), "cdcwatch_scrape_duration_seconds", collector="kafka", target="bench") or 0.0)
            return took

        # agreement, before anything moves: every group partition's lag equals the tool's
        values = scrape()
        peer_lag = {g: kafka.described_lag(g) for g in groups[:3]}
        mismatched = [(g, tp) for g, rows in peer_lag.items() for tp, (_, _, lag) in rows.items()
                      if args.granularity == "partition" and value(
                          values, "cdcwatch_kafka_consumergroup_lag_messages", group=g, topic=tp[0],
                          partition=str(tp[1])) != lag]
        print(f"lag agreement with kafka-consumer-groups on {sum(len(r) for r in peer_lag.values())} group partitions:"
              f" {'ok' if not mismatched else f'{len(mismatched)} differ, e.g. {mismatched[:3]}'}")

        mover = threading.Thread(target=keep_moving, args=(kafka, groups, args.partitions, stop), daemon=True)
        mover.start()
        peer_command = kafka.java_command("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server",
                                   kafka.bootstrap, "--describe", "--all-groups", heap="512m")
        ours, peer = [], []
        for _ in range(args.scrapes):  # interleaved: the machine's noise hits both alike
            ours.append(timed_scrape())
            peer.append(timed(lambda: subprocess.run(peer_command, capture_output=True, check=True, timeout=300)))
        p50, peer_p50 = statistics.median(ours), statistics.median(peer)
        print(f"{args.groups} groups x {args.partitions} partitions = {args.groups * args.partitions} group partitions,"
              f" {args.scrapes} scrapes each, granularity {args.granularity}, offsets moving")
        print(f"cdcwatch /metrics              p50 {p50:.3f}s  p95 {percentile(ours, 0.95):.3f}s  "
              f"{'MET' if p50 <= TARGET_P50_SECONDS else 'NOT MET'} (target p50 <= {TARGET_P50_SECONDS}s)")
        print(f"  of which the collection      p50 {statistics.median(collections):.3f}s  "
              f"p95 {percentile(collections, 0.95):.3f}s  (cdcwatch_scrape_duration_seconds)")
        print(f"kafka-consumer-groups --all    p50 {peer_p50:.3f}s  p95 {percentile(peer, 0.95):.3f}s  (a JVM per run)")
        print(f"ratio cdcwatch / peer          {p50 / peer_p50:.2f}x")
        name = "kafka_lag" if args.granularity == "partition" else f"kafka_lag_{args.granularity}"
        plot = save_timings(name, f"{args.groups} groups x {args.partitions} partitions, {args.granularity} "
                            "granularity, offsets moving",
                            {"cdcwatch /metrics": [s * 1000 for s in ours],
                             "kafka-consumer-groups --all": [s * 1000 for s in peer]},
                            target=TARGET_P50_SECONDS * 1000)
        if plot:
            print(f"plot: {plot}")
        if args.profile:
            profile(config)
    finally:
        stop.set()
        if serve is not None:
            serve.terminate()
            serve.wait(30)
        kafka.stop()


if __name__ == "__main__":
    main()
