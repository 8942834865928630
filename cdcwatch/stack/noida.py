"""noida-db (PyPI) speaking the Kafka protocol on 127.0.0.1: the broker a modern client needs here.

It is an emulator, not Kafka: it keeps message timestamps (CreateTime) and modern protocol
versions, which Kafka Connect 4.x and Spark's Python source require; Kafka semantics that matter
are checked on the real 0.9 broker as well (stack/kafka.py).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from cdcwatch.stack.procs import StackError, free_port, port_open, stop_group, wait_for

__all__ = ["NoidaKafka"]


class NoidaKafka:
    """One noida-db process serving only its Kafka protocol, data under `state_dir`."""

    def __init__(self, state_dir: Path, port: int | None = None) -> None:
        self.dir = state_dir
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> None:
        binary = shutil.which("noida-db") or str(Path(sys.executable).with_name("noida-db"))
        if not Path(binary).exists():
            raise StackError("noida-db not found: pip install noida-db==0.2.3 (scripts/setup.sh installs it)")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen([binary, "start", "--only", "kafka", "--kafka-port", str(self.port),
                                         "--data-dir", str(self.dir / "data")], cwd=self.dir,
                                        stdout=open(self.dir / "noida.out", "ab"), stderr=subprocess.STDOUT,
                                        start_new_session=True)
        wait_for(lambda: port_open(self.port), timeout, f"noida-db Kafka on {self.bootstrap} (log {self.dir / 'noida.out'})")

    def stop(self) -> None:
        stop_group(self.process, 20)
