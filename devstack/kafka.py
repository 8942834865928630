"""Apache Kafka 4 (KRaft, one combined broker + controller) on 127.0.0.1, from the jars in devstack/jvm/pom.xml.

With `netns=TestHost(...)` (devstack/netns.py) the broker runs inside that network namespace instead, its
client listener on the namespace's address (advertised there, reached from the host through the veth) and its
controller on the namespace's own loopback: `netns.cut()` then cuts every client off the broker.

`KafkaBroker(dir).start()` formats the log directory on first start, then runs `kafka.Kafka`.
With `secure=True` it also serves a SASL_SSL listener (SCRAM-SHA-256 over TLS, a certificate from
a throw-away CA) with one SCRAM user, for tests of the client-settings passthrough.
"""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path
from typing import Any

from devstack.netns import TestHost
from devstack.procs import ServerProcess, StackError, free_port, jvm_dir, port_open, require_binary, run, wait_for
from devstack.tls import Pki, make_pki

__all__ = ["KafkaBroker"]

SCRAM_USER = "monitor"
SCRAM_PASSWORD = "scram-secret-1"

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = warn
logger.apache.name = org.apache.kafka
logger.apache.level = warn
"""


def log4j2_config(directory: Path, name: str, level: str = "INFO") -> Path:
    """A log4j2 configuration that writes `name`.log in `directory` (shared by the Kafka JVMs)."""
    path = directory / f"{name}-log4j2.properties"
    path.write_text(_LOG4J2.format(log=directory / f"{name}.log", level=level), encoding="utf-8")
    return path


def _cluster_id() -> str:
    """A random cluster id as Kafka makes them (`Uuid.randomUuid`): never starting with '-', which the storage tool
    would read as an option (one id in 64 did, and the format failed)."""
    while (cluster_id := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
        pass
    return cluster_id


class KafkaBroker:
    """One KRaft node on 127.0.0.1 (or in `netns`): PLAINTEXT on `port`; with `secure`, SASL_SSL (SCRAM) on
    `secure_port`."""

    def __init__(self, state_dir: Path, port: int | None = None, secure: bool = False,
                 netns: TestHost | None = None) -> None:
        self.dir = state_dir
        self.netns = netns
        self.port = port or free_port()
        self.controller_port = free_port()
        self.secure_port = free_port() if secure else None
        self.server = ServerProcess("the Kafka broker", state_dir / "kafka.out")
        self.pki: Pki | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def host(self) -> str:
        """Where clients reach the broker: 127.0.0.1, or the namespace's address."""
        if self.netns is None:
            return "127.0.0.1"
        if not self.netns.address:
            raise StackError("start the test host before the broker in it")
        return self.netns.address

    @property
    def secure_bootstrap(self) -> str:
        if self.secure_port is None:
            raise StackError("this broker has no SASL_SSL listener: create it with secure=True")
        return f"{self.host}:{self.secure_port}"

    def secure_client_settings(self, password: str = SCRAM_PASSWORD) -> dict[str, str]:
        """librdkafka settings for the SASL_SSL listener (trusting the test CA)."""
        assert self.pki is not None, "start the broker first"
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": SCRAM_USER,
                "sasl.password": password, "ssl.ca.location": str(self.pki.ca)}

    def _properties(self) -> str:
        listeners = [f"PLAINTEXT://{self.host}:{self.port}", f"CONTROLLER://127.0.0.1:{self.controller_port}"]
        lines = [
            "process.roles=broker,controller", "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}", "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT", f"log.dirs={self.dir / 'data'}",
            "offsets.topic.replication.factor=1", "offsets.topic.num.partitions=4",
            "transaction.state.log.replication.factor=1", "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1", "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0", "num.partitions=1", "auto.create.topics.enable=true",
            "log.retention.check.interval.ms=1000", "log.segment.delete.delay.ms=0",
            "log.initial.task.delay.ms=0",
        ]
        protocols = ["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT"]
        if self.secure_port is not None:
            assert self.pki is not None
            listeners.append(f"SASL_SSL://{self.host}:{self.secure_port}")
            protocols.append("SASL_SSL:SASL_SSL")
            lines += ["sasl.enabled.mechanisms=SCRAM-SHA-256",
                      "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config="
                      "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                      "ssl.keystore.type=PEM", f"ssl.keystore.location={self.pki.keystore('broker')}"]
        lines += [f"listeners={','.join(listeners)}", f"advertised.listeners={','.join(listeners[:1] + listeners[2:])}",
                  f"listener.security.protocol.map={','.join(protocols)}"]
        return "\n".join(lines) + "\n"

    def java_command(self, main: str, *args: str, heap: str = "512m") -> list[str]:
        quick_start = ["-XX:TieredStopAtLevel=1"] if main != "kafka.Kafka" else []  # a tool runs for seconds
        return [require_binary("java", "openjdk-17-jre-headless"), f"-Xmx{heap}", "-Xms128m", "-XX:+UseSerialGC",
                *quick_start, f"-Dlog4j2.configurationFile={log4j2_config(self.dir, 'kafka')}", "-Djava.awt.headless=true",
                "-cp", f"{jvm_dir('kafka')}/*", main, *args]

    def start(self, timeout: float = 90) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        for port in filter(None, (self.port, self.controller_port, self.secure_port)):
            if port_open(port, self.host if port != self.controller_port else "127.0.0.1"):
                raise StackError(f"port {port} is taken: stop what listens there or pick another port")
        if self.secure_port is not None and self.pki is None:
            self.pki = make_pki(self.dir / "tls", ("broker",))
        config = self.dir / "server.properties"
        config.write_text(self._properties(), encoding="utf-8")
        if not (self.dir / "data" / "meta.properties").exists():
            cluster_id = _cluster_id()
            scram = ["--add-scram", f"SCRAM-SHA-256=[name={SCRAM_USER},password={SCRAM_PASSWORD}]"]
            run(self.java_command("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config),
                           *(scram if self.secure_port else []), heap="256m"), "formatting the Kafka log directory")
        command = self.java_command("kafka.Kafka", str(config))
        self.server.start(self.netns.wrap(command) if self.netns else command, self._ready, timeout, cwd=self.dir,
                          env={**os.environ, "KAFKA_LOG4J_OPTS": ""})

    def _ready(self) -> bool:
        if not port_open(self.port, self.host):
            return False
        return bool(self.admin().list_topics(timeout=5).brokers)

    def admin(self, **settings: str) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap, **settings})

    def create_topic(self, name: str, partitions: int = 1, **config: str) -> None:
        """Create a topic and wait until its partitions have a leader."""
        from confluent_kafka.admin import NewTopic

        admin = self.admin()  # kept alive until the result arrives
        futures = admin.create_topics([NewTopic(name, partitions, 1, config=config)], operation_timeout=30)
        futures[name].result(30)

        def ready() -> bool:
            topic = self.admin().list_topics(name, timeout=5).topics.get(name)
            return topic is not None and topic.error is None and len(topic.partitions) == partitions and all(
                p.leader >= 0 for p in topic.partitions.values())

        wait_for(ready, 30, f"topic {name} to have leaders")

    def end_offset(self, topic: str) -> int:
        """The sum of the topic's log end offsets (0 while it does not exist)."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "devstack-watermarks", "log_level": 0})
        try:
            metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
            if metadata is None or metadata.error is not None:
                return 0
            return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in metadata.partitions)
        finally:
            consumer.close()

    @property
    def process(self) -> Any:
        return self.server.process

    @property
    def pid(self) -> int | None:
        return self.server.pid

    def kill(self) -> None:
        self.server.kill()

    def stop(self) -> None:
        self.server.stop(30)

    def described_lag(self, group: str) -> dict[tuple[str, int], tuple[int | None, int, int | None]]:
        """Apache Kafka's own `kafka-consumer-groups --describe` for `group`, an independent peer:
        (committed offset, log end offset, lag) per partition; None where the tool prints '-'."""
        done = run(self.java_command("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server",
                              self.bootstrap, "--describe", "--group", group, heap="256m"),
                   f"kafka-consumer-groups --describe --group {group}")
        rows: dict[tuple[str, int], tuple[int | None, int, int | None]] = {}
        for line in done.stdout.splitlines():
            fields = line.split()
            if len(fields) >= 6 and fields[0] == group and fields[2].isdigit():
                number = lambda text: None if text == "-" else int(text)  # noqa: E731
                rows[(fields[1], int(fields[2]))] = (number(fields[3]), int(fields[4]), number(fields[5]))
        return rows
