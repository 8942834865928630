"""A real Kafka Connect worker (Apache Kafka's connect-runtime) with the released Debezium plugins.

The runtime and the connector plugins come from devstack/jvm/pom.xml (`connect` on the classpath,
`plugins/` as `plugin.path`). Standalone (connector files, offsets in a file) or distributed
(configs, offsets and status in topics; connectors created by REST). The REST API can be served
over TLS and behind Kafka's basic-auth REST extension; JMX is on 127.0.0.1.
"""

from __future__ import annotations

import base64
import json
import signal
import ssl
import urllib.request
from pathlib import Path
from typing import Any

from devstack.kafka import log4j2_config
from devstack.procs import ServerProcess, free_port, jvm_dir, port_open, require_binary, wait_for
from devstack.tls import KEYSTORE_PASSWORD, Pki

__all__ = ["ConnectWorker"]

_BASIC_AUTH = "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"


class ConnectWorker:
    """One worker, REST and JMX on 127.0.0.1, stopped by PID. Standalone with `connectors`; else distributed."""

    def __init__(self, state_dir: Path, bootstrap: str, connectors: dict[str, dict[str, str]] | None = None,
                 offset_flush_ms: int = 1000, tls: Pki | None = None, users: dict[str, str] | None = None,
                 group: str = "cdcwatch-connect") -> None:
        self.dir = state_dir
        self.bootstrap = bootstrap
        self.connectors = connectors or {}
        self.rest_port = free_port()
        self.jmx_port = free_port()
        self.offset_flush_ms = offset_flush_ms
        self.tls = tls
        self.users = users or {}
        self.group = group
        self.plugins: tuple[str, ...] | None = None
        self.jvm_args: list[str] = []
        """More JVM flags (a `-javaagent:` for a benchmark's peer)."""
        """Plugin folders of `jvm/plugins` to offer (None: all); a connector whose plugin is left out fails."""
        self.server = ServerProcess("the Kafka Connect worker", state_dir / "worker.out")

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.rest_port}"

    @property
    def jmx_url(self) -> str:
        return f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{self.jmx_port}/jmxrmi"

    @property
    def offsets_file(self) -> Path:
        """Standalone mode's source offsets (rewritten at every offset flush)."""
        return self.dir / "offsets.dat"

    @property
    def process(self) -> Any:
        return self.server.process

    def _worker_properties(self) -> str:
        if self.connectors:
            mode = [f"offset.storage.file.filename={self.offsets_file}"]
        else:
            mode = [f"group.id={self.group}", f"config.storage.topic={self.group}-configs",
                    f"offset.storage.topic={self.group}-offsets", f"status.storage.topic={self.group}-status",
                    "config.storage.replication.factor=1", "offset.storage.replication.factor=1",
                    "status.storage.replication.factor=1", "offset.storage.partitions=1", "status.storage.partitions=1",
                    "scheduled.rebalance.max.delay.ms=5000"]
        lines = [*mode, f"bootstrap.servers={self.bootstrap}",
                 "key.converter=org.apache.kafka.connect.json.JsonConverter",
                 "value.converter=org.apache.kafka.connect.json.JsonConverter",
                 "key.converter.schemas.enable=true", "value.converter.schemas.enable=true",
                 f"offset.flush.interval.ms={self.offset_flush_ms}", f"plugin.path={self._plugin_path()}",
                 "plugin.discovery=service_load", f"listeners={self.url}", "rest.advertised.host.name=127.0.0.1",
                 "rest.advertised.port=" + str(self.rest_port)]
        if self.tls:
            lines += ["listeners.https.ssl.keystore.type=PKCS12",
                      f"listeners.https.ssl.keystore.location={self.tls.pkcs12('connect')}",
                      f"listeners.https.ssl.keystore.password={KEYSTORE_PASSWORD}",
                      f"listeners.https.ssl.key.password={KEYSTORE_PASSWORD}"]
        if self.users:
            lines.append(f"rest.extension.classes={_BASIC_AUTH}")
        return "\n".join(lines) + "\n"

    def _plugin_path(self) -> Path:
        if self.plugins is None:
            return jvm_dir("plugins")
        path = self.dir / ("plugins-" + "-".join(self.plugins or ("none",)))
        path.mkdir(parents=True, exist_ok=True)
        for name in self.plugins:
            if not (path / name).exists():
                (path / name).symlink_to(jvm_dir("plugins") / name)
        return path

    def _security_flags(self) -> list[str]:
        if not self.users:
            return []
        credentials = self.dir / "rest-users.properties"
        credentials.write_text("".join(f"{user}: {password}\n" for user, password in self.users.items()), encoding="utf-8")
        jaas = self.dir / "rest-jaas.conf"
        jaas.write_text("KafkaConnect {\n  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule "
                        f'required file="{credentials}";\n}};\n', encoding="utf-8")
        return [f"-Djava.security.auth.login.config={jaas}"]

    def start(self, timeout: float = 120) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        worker = self.dir / "worker.properties"
        worker.write_text(self._worker_properties(), encoding="utf-8")
        files = []
        for name, properties in self.connectors.items():
            path = self.dir / f"{name}.properties"
            path.write_text("".join(f"{k}={v}\n" for k, v in {"name": name, **properties}.items()), encoding="utf-8")
            files.append(str(path))
        jmx = [f"-Dcom.sun.management.jmxremote.port={self.jmx_port}", f"-Dcom.sun.management.jmxremote.rmi.port={self.jmx_port}",
               "-Dcom.sun.management.jmxremote.authenticate=false", "-Dcom.sun.management.jmxremote.ssl=false",
               "-Dcom.sun.management.jmxremote.host=127.0.0.1", "-Djava.rmi.server.hostname=127.0.0.1"]
        main = f"org.apache.kafka.connect.cli.Connect{'Standalone' if self.connectors else 'Distributed'}"
        command = [require_binary("java", "openjdk-17-jre-headless"), "-Xmx768m", "-Xms128m", "-XX:+UseSerialGC", *jmx, *self.jvm_args,
                   *self._security_flags(), f"-Dlog4j2.configurationFile={log4j2_config(self.dir, 'worker')}",
                   "-cp", f"{jvm_dir('connect')}/*", main, str(worker), *files]
        self.server.start(command, lambda: port_open(self.rest_port) and self.get("/") is not None, timeout, cwd=self.dir)

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.users:
            user, password = next(iter(self.users.items()))
            headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        context = ssl.create_default_context(cafile=str(self.tls.ca)) if self.tls else None
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            return json.loads(response.read() or b"null")

    def get(self, path: str) -> Any:
        return self._request("GET", path)

    def put(self, path: str, body: Any = None) -> Any:
        return self._request("PUT", path, body)

    def post(self, path: str, body: Any = None) -> Any:
        return self._request("POST", path, body)

    def delete(self, path: str) -> Any:
        return self._request("DELETE", path)

    def kill(self) -> None:
        """kill -9 the worker: no offset flush, no clean shutdown, as in a crash."""
        self.server.kill()

    def next_offset_flush(self, timeout: float) -> float:
        """Await the worker's next offset flush; its offsets file's mtime. A flush truncates the file, writes Java
        serialization's 4-byte stream header, then the offsets: a file of 4 bytes or less is a flush under way."""
        path = self.offsets_file

        def stamp() -> float:
            return path.stat().st_mtime if path.exists() else 0.0

        before = stamp()
        wait_for(lambda: stamp() > before and path.stat().st_size > 4, timeout, "an offset flush of the worker")
        return stamp()

    def kill_unless_flushed_since(self, flushed: float) -> bool:
        """kill -9 the worker unless an offset flush came after `flushed` (the offsets file's mtime then): False, the
        worker runs on. It is frozen (SIGSTOP) while the file is read, so no flush slips in between the check and
        the kill and a flush that came first costs no outage."""
        self.server.signal(signal.SIGSTOP)
        if self.offsets_file.stat().st_mtime == flushed:
            self.server.kill()
            return True
        self.server.signal(signal.SIGCONT)
        return False

    def stop(self) -> None:
        self.server.stop(30)
