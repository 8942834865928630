"""Burrow (Debian `burrow`), an independent consumer-lag evaluator, against the local Kafka 0.9 broker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

from cdcwatch.stack.procs import free_port, port_open, require_binary, wait_for

__all__ = ["BurrowServer"]


class BurrowServer:
    """One Burrow with its JSON API on 127.0.0.1, reading offsets from `__consumer_offsets`."""

    def __init__(self, state_dir: Path, bootstrap: str, zookeeper: str) -> None:
        self.dir = state_dir
        self.port = free_port()
        self.bootstrap = bootstrap
        self.zookeeper = zookeeper
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30) -> None:
        binary = require_binary("/usr/bin/Burrow", "burrow")
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "burrow.toml").write_text(f"""
[general]
pidfile="{self.dir / 'burrow.pid'}"
[logging]
filename="{self.dir / 'burrow.log'}"
level="info"
[zookeeper]
servers=["{self.zookeeper}"]
root-path="/burrow"
[client-profile.k09]
kafka-version="0.9.0.1"
[cluster.local]
class-name="kafka"
servers=["{self.bootstrap}"]
client-profile="k09"
offset-refresh=1
topic-refresh=5
[consumer.local]
class-name="kafka"
cluster="local"
servers=["{self.bootstrap}"]
client-profile="k09"
offsets-topic="__consumer_offsets"
start-latest=false
[httpserver.default]
address="127.0.0.1:{self.port}"
[storage.default]
class-name="inmemory"
intervals=15
min-distance=0
[evaluator.default]
class-name="caching"
expire-cache=1
""", encoding="utf-8")
        self.process = subprocess.Popen([binary, "-config-dir", str(self.dir)], cwd=self.dir,
                                        stdout=open(self.dir / "burrow.out", "ab"), stderr=subprocess.STDOUT,
                                        start_new_session=True)
        wait_for(lambda: port_open(self.port), timeout, f"Burrow on 127.0.0.1:{self.port}")

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=10) as response:
            return json.loads(response.read())

    def lag(self, group: str) -> dict[tuple[str, int], int]:
        """current_lag per (topic, partition) of a group, as Burrow evaluates it."""
        status = self.get(f"/v3/kafka/local/consumer/{group}/lag")["status"]
        return {(p["topic"], p["partition"]): p["current_lag"] for p in status.get("partitions") or []}

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(20)
