"""The reference apply job (`cdcwatch-apply`) as a local process, with its listener's /metrics; a Spark Connect server."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from devstack.procs import ServerProcess, free_port, jvm_dir, port_open, python_env

__all__ = ["ApplyJob", "ConnectServer", "ReconcileJob", "spark_jars", "spark_kafka_jars"]


def spark_jars(*parts: str) -> str:
    """The jars of `parts` of devstack/jvm/pom.xml, as resolved: Spark's `--jars` value."""
    return ",".join(str(jar) for part in parts for jar in sorted(jvm_dir(part).glob("*.jar")))


def spark_kafka_jars() -> str:
    """spark-sql-kafka and its dependencies: Spark's `--jars` value."""
    return spark_jars("spark-kafka")


class ApplyJob:
    """`cdcwatch-apply` in its own session, stopped by PID; metrics on 127.0.0.1:`metrics_port`."""

    def __init__(self, state_dir: Path, bootstrap: str, pattern: str, target_dsn: str, query_name: str = "cdc_apply",
                 master: str = "local[2]", extra_args: Sequence[str] = (), env: dict[str, str] | None = None) -> None:
        self.dir = state_dir
        self.metrics_port = free_port()
        self.log = state_dir / "apply.log"
        self.command = [sys.executable, "-m", "spark_listeners.apply", "--bootstrap-servers", bootstrap,
                        "--subscribe-pattern", pattern, "--target", target_dsn, "--checkpoint", str(state_dir / "checkpoint"),
                        "--master", master, "--query-name", query_name, "--metrics-address", "127.0.0.1",
                        "--metrics-port", str(self.metrics_port),
                        "--jars", spark_jars("spark-kafka", *(["delta"] if target_dsn.startswith("delta:") else [])),
                        *extra_args]
        self.server = ServerProcess("the apply job", self.log)
        self.env = env or {}
        """Added to the job's environment (e.g. a cluster's SPARK_CONF_DIR and the executors' PYSPARK_PYTHON)."""

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.server.process

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def start(self, timeout: float = 120) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.server.start(self.command, lambda: port_open(self.metrics_port), timeout, env=python_env(**self.env), cwd=self.dir)

    def metrics(self) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=10) as response:
            return response.read().decode()

    def stop(self, timeout: float = 60) -> None:
        self.server.stop(timeout)


class ReconcileJob:
    """`cdcwatch-reconcile` comparing `pairs` (its configuration's `reconcile` list), in its own session, stopped by
    PID; its /metrics on 127.0.0.1:`metrics_port`."""

    def __init__(self, state_dir: Path, pairs: list[dict[str, Any]], master: str = "local[2]") -> None:
        self.dir = state_dir
        self.metrics_port = free_port()
        self.log = state_dir / "reconcile.log"
        self.config = state_dir / "reconcile.yml"
        self.pairs = pairs
        self.command = [sys.executable, "-m", "spark_listeners.reconcile", "--config.file", str(self.config),
                        "--master", master, "--jars", spark_jars("delta"), "--metrics-address", "127.0.0.1",
                        "--metrics-port", str(self.metrics_port)]
        self.server = ServerProcess("the reconciliation job", self.log)

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def start(self, timeout: float = 120) -> None:
        import yaml

        self.dir.mkdir(parents=True, exist_ok=True)
        self.config.write_text(yaml.safe_dump({"reconcile": self.pairs}), encoding="utf-8")
        self.server.start(self.command, lambda: port_open(self.metrics_port), timeout, env=python_env(), cwd=self.dir)

    def metrics(self) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=10) as response:
            return response.read().decode()

    def stop(self, timeout: float = 60) -> None:
        self.server.stop(timeout)


class ConnectServer:
    """A Spark Connect server (`local[2]`) from pyspark's own jars, its gRPC endpoint bound to 127.0.0.1:`port`."""

    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir
        self.port = free_port()
        self.server = ServerProcess("the Spark Connect server", state_dir / "connect-server.log")

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120) -> None:
        import pyspark

        self.dir.mkdir(parents=True, exist_ok=True)
        home = Path(pyspark.__file__).parent
        settings = {"spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": str(self.port),
                    "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1", "spark.ui.enabled": "false",
                    "spark.sql.shuffle.partitions": "2"}
        # spark-submit, not spark-class: only spark-submit passes --conf settings on to the server
        command = [str(home / "bin" / "spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
                   "--master", "local[2]", *(arg for name, value in settings.items() for arg in ("--conf", f"{name}={value}")),
                   "spark-internal"]
        env = python_env(SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
        self.server.start(command, lambda: port_open(self.port), timeout, env=env, cwd=self.dir)

    def stop(self, timeout: float = 60) -> None:
        self.server.stop(timeout)
