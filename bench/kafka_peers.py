"""The exporters the Kafka benchmark runs beside cdcwatch on the same broker: kminion, Burrow and kafka_exporter (built
from their sources, see docs/benchmarks.md), each with the minimal configuration for one PLAINTEXT broker, and how each
one's lag per group partition is read out of its /metrics.

Their binaries are found in the folder named by CDCWATCH_PEERS_BIN (or --peers-bin), by file name (`kminion`,
`burrow`, `kafka_exporter`); a peer without a binary there is left out of the run.
"""

from __future__ import annotations

import http.client
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devstack.configs import exporter_config, kafka_cluster, listen
from devstack.procs import REPO, ServerProcess, free_port, port_open, python_env
from devstack.samples import Values

PEERS_BIN_ENV = "CDCWATCH_PEERS_BIN"

GroupPartition = tuple[str, str, int]
"""(group, topic, partition)"""


@dataclass(frozen=True)
class Peer:
    """One peer exporter: its binary's name, the version the benchmark pins, and its series of partition lag."""

    name: str
    binary: str
    version: str
    lag_metric: str
    group_label: str
    topic_label: str
    partition_label: str
    differences: str
    """What it is known to answer differently from the broker, named next to its agreement figures."""


KMINION = Peer("kminion", "kminion", "v2.3.5 (4f3867a4400b), franz-go 1.20.6",
               "kminion_kafka_consumer_group_topic_partition_lag", "group_id", "topic_name", "partition_id",
               "no series for a partition without a commit")
BURROW = Peer("Burrow", "burrow", "v1.9.5 (ced55ba90f6b), sarama",
              "burrow_kafka_consumer_partition_lag", "consumer_group", "topic", "partition",
              "lag 0 for a partition without a commit, and for partitions whose commits it read before it knew their "
              "end offsets (until the group commits again); answers from memory, refreshed in the background")
KAFKA_EXPORTER = Peer("kafka_exporter", "kafka_exporter", "v1.9.0-15 (953e2f1745b9), sarama 1.45.2",
                      "kafka_consumergroup_lag", "consumergroup", "topic", "partition",
                      "-1 for a partition without a commit; drops a group's series in some scrapes "
                      "(upstream issue #513)")
PEERS = (KMINION, BURROW, KAFKA_EXPORTER)


def peer_binaries(folder: str | None) -> dict[Peer, Path]:
    """The peers whose binaries are in `folder` (else CDCWATCH_PEERS_BIN); none without either."""
    where = folder or os.environ.get(PEERS_BIN_ENV)
    if not where:
        return {}
    found = {peer: Path(where).resolve() / peer.binary for peer in PEERS}  # the peers start in their own folders
    missing = [str(path) for path in found.values() if not os.access(path, os.X_OK)]
    if missing:
        print(f"peer binaries not found (left out of the run): {', '.join(missing)}")
    return {peer: path for peer, path in found.items() if os.access(path, os.X_OK)}


class Exporter:
    """A running exporter: its name in the tables, its /metrics URL, its process, and its lag per group partition."""

    def __init__(self, name: str, peer: Peer | None, process: ServerProcess, port: int, replay: bool = False) -> None:
        self.name = name
        self.peer = peer
        self.replay = replay
        """A recorded answer of `peer` (None: of cdcwatch) replayed (bench/replay.py)."""
        self.process = process
        self.url = f"http://127.0.0.1:{port}/metrics"

    @property
    def pid(self) -> int:
        pid = self.process.pid
        if pid is None:
            raise RuntimeError(f"{self.name} exited (log {self.process.log})")
        return pid

    def lag(self, values: Values) -> dict[GroupPartition, float]:
        """Lag in messages per group partition, as this exporter reports it."""
        metric, group, topic, partition = (
            (self.peer.lag_metric, self.peer.group_label, self.peer.topic_label, self.peer.partition_label)
            if self.peer else ("cdcwatch_kafka_consumergroup_lag_messages", "group", "topic", "partition"))
        found: dict[GroupPartition, float] = {}
        for (name, labels), number in values.items():
            if name == metric:
                named = dict(labels)
                found[(named[group], named[topic], int(named[partition]))] = number
        return found

    def stop(self) -> None:
        self.process.stop()


def start_cdcwatch(name: str, bootstrap: str, work: Path, limits: dict[str, Any] | None = None,
                   **settings: Any) -> Exporter:
    """`cdcwatch serve` on one cluster (`bench`), partition granularity unless `settings` (the cluster's) say otherwise;
    `limits`: the exporter's `limits:` section, if not its defaults."""
    port = free_port()
    config = work / f"{name.replace(' ', '_').replace(',', '')}.yml"
    config.write_text(exporter_config(listen=listen(port), limits=limits, kafka=[
        kafka_cluster("bench", bootstrap, timeout_seconds=30, **{"granularity": "partition", **settings})]),
        encoding="utf-8")
    process = ServerProcess(name, config.with_suffix(".log"))
    process.start([sys.executable, "-m", "cdcwatch.cli", "serve", "--config", str(config)], lambda: port_open(port),
                  timeout=30, env=python_env(), cwd=REPO)
    return Exporter(name, None, process, port)


PROMETHEUS_2_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                       "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
"""The Accept header Prometheus 2.42 sends with every scrape."""


def start_replay(exporter: Exporter, work: Path, accept: str = PROMETHEUS_2_ACCEPT, label: str = "") -> Exporter:
    """bench/replay.py answering with what `exporter` answers now to `accept` (gzip asked for, as Prometheus asks):
    the same bytes and headers from a server that does nothing else (see bench/replay.py)."""
    connection = http.client.HTTPConnection("127.0.0.1", int(exporter.url.split(":")[2].split("/")[0]), timeout=60)
    try:
        connection.request("GET", "/metrics", headers={"Accept": accept, "Accept-Encoding": "gzip"})
        answer = connection.getresponse()
        body, content_type, encoding = answer.read(), answer.getheader("Content-Type", ""), answer.getheader("Content-Encoding")
    finally:
        connection.close()
    name = f"replay of {exporter.name}{label}"
    stem = work / name.replace(" ", "_").replace(",", "")
    stem.with_suffix(".body").write_bytes(body)
    port = free_port()
    process = ServerProcess(name, stem.with_suffix(".log"))
    process.start([sys.executable, "-m", "bench.replay", "--port", str(port), "--body", str(stem.with_suffix(".body")),
                   "--content-type", content_type, *(["--gzip"] if encoding == "gzip" else [])],
                  lambda: port_open(port), timeout=30, env=python_env(), cwd=REPO)
    return Exporter(name, exporter.peer, process, port, replay=True)


def start_peer(peer: Peer, binary: Path, bootstrap: str, work: Path) -> Exporter:
    """The peer with the minimal configuration for one PLAINTEXT broker, listening on loopback."""
    port = free_port()
    home = work / peer.binary
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if peer is KMINION:
        config = home / "kminion.yml"
        config.write_text(f"logger: {{level: warn}}\nkafka:\n  brokers: [\"{bootstrap}\"]\nminion:\n  consumerGroups:\n"
                          "    enabled: true\n    scrapeMode: adminApi\n    granularity: partition\n"
                          f"exporter:\n  host: 127.0.0.1\n  port: {port}\n", encoding="utf-8")
        command, env["CONFIG_FILEPATH"] = [str(binary)], str(config)
    elif peer is BURROW:
        (home / "burrow.toml").write_text(
            f"[general]\npidfile=\"{home / 'burrow.pid'}\"\n\n[logging]\nlevel=\"warn\"\n\n"
            f"[cluster.bench]\nclass-name=\"kafka\"\nservers=[\"{bootstrap}\"]\n\n"
            f"[consumer.bench]\nclass-name=\"kafka\"\ncluster=\"bench\"\nservers=[\"{bootstrap}\"]\n\n"
            f"[httpserver.default]\naddress=\"127.0.0.1:{port}\"\n", encoding="utf-8")
        command = [str(binary), "--config-dir", str(home)]
    else:
        command = [str(binary), f"--kafka.server={bootstrap}", "--kafka.version=4.0.0",
                   f"--web.listen-address=127.0.0.1:{port}"]
    process = ServerProcess(peer.name, home / f"{peer.binary}.log")
    process.start(command, lambda: port_open(port), timeout=60, env=env, cwd=home)
    return Exporter(peer.name, peer, process, port)
