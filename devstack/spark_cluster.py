"""A Spark standalone cluster on 127.0.0.1 (a master and its workers, started with pyspark's own `spark-class`), and a
packed virtualenv with cdcwatch for its executors, shipped as users ship it (`spark.archives`)."""

from __future__ import annotations

import json
import os
import signal
import sys
import urllib.request
from pathlib import Path
from typing import Any

from devstack.procs import REPO, ServerProcess, free_port, port_open, run

__all__ = ["EXECUTOR_ENV", "SparkCluster", "executor_archive", "job_env", "spark_home"]

EXECUTOR_ENV = "environment"
"""The folder the packed virtualenv is unpacked to in each executor's working directory (`archive#environment`)."""


def spark_home() -> Path:
    """pip's pyspark package: it holds bin/spark-class, the jars and python/lib/pyspark.zip."""
    import pyspark

    return Path(pyspark.__file__).parent


def _cluster_env() -> dict[str, str]:
    """The environment of the master and the workers, which the executors inherit: no PYTHONPATH and no
    virtualenv, so an executor's Python finds cdcwatch only in what the job ships."""
    env = {name: value for name, value in os.environ.items() if name not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON")}
    return {**env, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}


class SparkCluster:
    """A master and `workers` workers (`cores` cores, `memory` each), every one a JVM in its own process group."""

    def __init__(self, state_dir: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.dir = state_dir
        self.port, self.ui_port = free_port(), free_port()
        self.master = ServerProcess("the Spark master", state_dir / "master.log")
        self.workers = [ServerProcess(f"Spark worker {index}", state_dir / f"worker-{index}.log") for index in range(workers)]
        self.cores, self.memory = cores, memory

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def state(self) -> dict[str, Any]:
        """The master's view (its web UI's /json): workers, applications."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as response:
            return dict(json.load(response))

    def alive_workers(self) -> int:
        return sum(1 for worker in self.state()["workers"] if worker["state"] == "ALIVE")

    def start(self, timeout: float = 120) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        spark_class = str(spark_home() / "bin" / "spark-class")
        self.master.start([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                           "--port", str(self.port), "--webui-port", str(self.ui_port)],
                          lambda: port_open(self.port) and self.state(), timeout, env=_cluster_env(), cwd=self.dir)
        for index in range(len(self.workers)):
            self.start_worker(index, timeout)

    def start_worker(self, index: int, timeout: float = 120) -> None:
        """Start worker `index` (again, after a kill) and wait until the master counts it alive."""
        alive = self.alive_workers()
        work = self.dir / f"worker-{index}"
        work.mkdir(exist_ok=True)
        self.workers[index].start(
            [str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker", self.url,
             "--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory, "--webui-port", "0",
             "--work-dir", str(work)],
            lambda: self.alive_workers() > alive, timeout, env=_cluster_env(), cwd=work)

    def executor_pids(self, index: int) -> list[int]:
        """The executor JVMs worker `index` runs (its children running CoarseGrainedExecutorBackend)."""
        worker = self.workers[index]
        if worker.pid is None:
            return []
        found = []
        for child in Path("/proc").glob("[0-9]*"):
            try:
                stat = (child / "stat").read_text().rsplit(")", 1)[1].split()
                group = int(stat[2])
                command = (child / "cmdline").read_bytes()
            except (OSError, IndexError, ValueError):
                continue
            if group == worker.pid and b"CoarseGrainedExecutorBackend" in command:
                found.append(int(child.name))
        return found

    def kill_worker(self, index: int) -> list[int]:
        """kill -9 worker `index` as a lost machine: its JVM, its executor JVMs and their Python workers (pyspark's
        daemon runs in a process group of its own). The pids killed."""
        worker = self.workers[index]
        if worker.pid is None:
            return []
        parents: dict[int, int] = {}
        for entry in Path("/proc").glob("[0-9]*"):
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
        family = {worker.pid}
        grown = True
        while grown:
            children = {pid for pid, parent in parents.items() if parent in family} - family
            family |= children
            grown = bool(children)
        worker.kill()
        for pid in family - {worker.pid}:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return sorted(family)

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop(30)
        self.master.stop(30)


def executor_archive(directory: Path) -> Path:
    """A virtualenv with the cdcwatch wheel (built from this checkout) and what `decode_events` and the sink need on
    executors (pyarrow, pandas), packed with venv-pack for `spark.archives`; made once per directory."""
    archive = directory / "cdcwatch-executors.tar.gz"
    if archive.exists():
        return archive
    directory.mkdir(parents=True, exist_ok=True)
    wheels = directory / "wheels"
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO)],
        "building the cdcwatch wheel", timeout=300)
    wheel = next(wheels.glob("cdcwatch-*.whl"))
    venv = directory / "venv"
    run([sys.executable, "-m", "venv", str(venv)], "creating the executors' virtualenv")
    run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(wheel), "pyarrow", "pandas"],
        "installing cdcwatch into the executors' virtualenv", timeout=600)
    run([str(Path(sys.executable).parent / "venv-pack"), "--prefix", str(venv), "--output", str(archive),
         "--compress-level", "1", "--quiet"], "packing the executors' virtualenv", timeout=300)
    return archive


def job_env(archive: Path, conf_dir: Path, **spark_conf: str) -> dict[str, str]:
    """What a driver's environment needs to run on the cluster with `archive` shipped to its executors: Spark's
    settings in `conf_dir`/spark-defaults.conf (spark.archives, and `spark_conf` with dots for underscores) and
    PYSPARK_PYTHON, the executors' Python inside the unpacked archive (as Spark's Python package management says)."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    settings = {"spark.archives": f"{archive}#{EXECUTOR_ENV}", "spark.driver.host": "127.0.0.1",
                **{name.replace("_", "."): value for name, value in spark_conf.items()}}
    (conf_dir / "spark-defaults.conf").write_text("".join(f"{name} {value}\n" for name, value in settings.items()))
    return {"SPARK_CONF_DIR": str(conf_dir), "PYSPARK_PYTHON": f"./{EXECUTOR_ENV}/bin/python"}
