"""Full scrapes of the kafka collector on 50 groups x 200 partitions, next to Burrow on the same broker.

Starts Kafka 0.9 + ZooKeeper and Burrow, creates one 200-partition topic with a few messages per
partition and 50 groups that each committed every partition, then times `cdcwatch serve` /metrics
scrapes (p50/p95) and Burrow answering the lag of all 50 groups (one request per group, as a
scraper of Burrow does). Target: cdcwatch p50 <= 1 s.

    .venv/bin/python bench/kafka_lag.py [--groups 50] [--partitions 200] [--scrapes 15] [--granularity topic]
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

from confluent_kafka import Consumer, Producer, TopicPartition

from devstack.burrow import BurrowServer
from devstack.kafka import CLIENT_SETTINGS, KafkaServer
from devstack.procs import free_port, port_open, wait_for

TOPIC = "benchsrv.public.rows"


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--scrapes", type=int, default=15)
    parser.add_argument("--granularity", choices=["partition", "topic"], default="partition")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cdcwatch-bench-kafka-"))
    kafka = KafkaServer(work / "kafka")
    kafka.start()
    burrow = BurrowServer(work / "burrow", kafka.bootstrap, kafka.zookeeper)
    serve = None
    try:
        kafka.create_topic(TOPIC, args.partitions)
        client = {"bootstrap.servers": kafka.bootstrap, "log_level": "0", **CLIENT_SETTINGS}
        producer = Producer(client)
        for partition in range(args.partitions):
            for index in range(5):
                producer.produce(TOPIC, partition=partition, value=b'{"op":"c","ts_ms":1,"source":{"ts_ms":1}}')
        producer.flush(60)
        groups = [f"bench-group-{n}" for n in range(args.groups)]
        for n, group in enumerate(groups):
            consumer = Consumer({**client, "group.id": group, "enable.auto.commit": False})
            consumer.commit(offsets=[TopicPartition(TOPIC, p, (n + p) % 5) for p in range(args.partitions)],
                            asynchronous=False)
            consumer.close()
        burrow.start()

        port = free_port()
        config = work / "cdcwatch.yml"
        config.write_text(f"listen: {{address: 127.0.0.1, port: {port}}}\nkafka:\n  - name: bench\n"
                          f"    bootstrap_servers: {kafka.bootstrap}\n    timeout_seconds: 30\n"
                          f"    client: {{api.version.request: 'false', broker.version.fallback: 0.9.0.1}}\n"
                          f"    granularity: {args.granularity}\n    extra_groups: [{', '.join(groups)}]\n")
        serve = subprocess.Popen([sys.executable, "-m", "cdcwatch.cli", "serve", "--config", str(config)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: port_open(port), 30, "cdcwatch serve")

        def scrape() -> None:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as response:
                body = response.read().decode()
            assert 'cdcwatch_up{collector="kafka",target="bench"} 1.0' in body, "the kafka collection failed"

        def burrow_all() -> None:
            for group in groups:
                assert burrow.lag(group), f"Burrow has no lag for {group}"

        wait_for(lambda: all(burrow.lag(g) for g in groups[:1]), 120, "Burrow to read the groups' offsets")
        scrape()  # first scrape: fills the message caches
        ours = [timed(scrape) for _ in range(args.scrapes)]
        peer = [timed(burrow_all) for _ in range(args.scrapes)]
        series = args.groups * args.partitions
        p50, peer_p50 = statistics.median(ours), statistics.median(peer)
        print(f"{args.groups} groups x {args.partitions} partitions = {series} group partitions, {args.scrapes} scrapes,"
              f" granularity {args.granularity}")
        print(f"cdcwatch /metrics  p50 {p50:.3f}s  p95 {sorted(ours)[int(0.95 * (len(ours) - 1))]:.3f}s"
              f"  {'ok' if p50 <= 1 else 'OVER TARGET (1 s)'}")
        print(f"Burrow lag API     p50 {peer_p50:.3f}s  ({args.groups} requests; ratio cdcwatch/Burrow {p50 / peer_p50:.2f}x)")
    finally:
        if serve is not None:
            serve.terminate()
            serve.wait(30)
        burrow.stop()
        kafka.stop()


if __name__ == "__main__":
    main()
