"""The reference apply job (`cdcwatch apply`) as a local process, with its listener's /metrics."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from devstack.procs import ServerProcess, free_port, jvm_dir, port_open, python_env

__all__ = ["ApplyJob", "spark_kafka_jars"]


def spark_kafka_jars() -> str:
    """spark-sql-kafka and its dependencies, as resolved from devstack/jvm/pom.xml: Spark's `--jars` value."""
    return ",".join(str(jar) for jar in sorted(jvm_dir("spark-kafka").glob("*.jar")))


class ApplyJob:
    """`cdcwatch apply` in its own session, stopped by PID; metrics on 127.0.0.1:`metrics_port`."""

    def __init__(self, state_dir: Path, bootstrap: str, pattern: str, target_dsn: str, query_name: str = "cdc_apply",
                 master: str = "local[2]", extra_args: Sequence[str] = ()) -> None:
        self.dir = state_dir
        self.metrics_port = free_port()
        self.log = state_dir / "apply.log"
        self.command = [sys.executable, "-m", "cdcwatch.cli", "apply", "--bootstrap-servers", bootstrap,
                        "--subscribe-pattern", pattern, "--target", target_dsn, "--checkpoint", str(state_dir / "checkpoint"),
                        "--master", master, "--query-name", query_name, "--metrics-address", "127.0.0.1",
                        "--metrics-port", str(self.metrics_port),
                        "--jars", spark_kafka_jars(), *extra_args]
        self.server = ServerProcess("the apply job", self.log)

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.server.process

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def start(self, timeout: float = 120) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.server.start(self.command, lambda: port_open(self.metrics_port), timeout, env=python_env(), cwd=self.dir)

    def metrics(self) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=10) as response:
            return response.read().decode()

    def stop(self, timeout: float = 60) -> None:
        self.server.stop(timeout)
