"""A real Debezium connector in its own process, with JMX on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from devstack.procs import ServerProcess, StackError, port_open, python_env

__all__ = ["DebeziumProcess", "jdbc_sink_properties", "mysql_connector_properties", "postgres_connector_properties"]


def postgres_connector_properties(state_dir: Path, pg_port: int, server: str, tables: str, slot: str = "cdcwatch_slot") -> dict[str, str]:
    """Properties of the Debezium PostgreSQL connector against a local server."""
    return {
        "name": f"{server}-connector",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput",
        "database.hostname": "127.0.0.1",
        "database.port": str(pg_port),
        "database.user": "postgres",
        "database.password": "postgres",
        "database.dbname": "postgres",
        "topic.prefix": server,
        "slot.name": slot,
        "publication.name": f"{slot}_pub",
        "publication.autocreate.mode": "filtered",
        "table.include.list": tables,
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(state_dir / "offsets.dat"),
        "offset.flush.interval.ms": "1000",
        "max.batch.size": "1024",
        "errors.max.retries": "0",
    }


def mysql_connector_properties(state_dir: Path, port: int, user: str, password: str, server: str, databases: str) -> dict[str, str]:
    """Properties of the Debezium MySQL connector against a local MariaDB, with file schema history."""
    return {
        "name": f"{server}-connector",
        "connector.class": "io.debezium.connector.mysql.MySqlConnector",
        "database.hostname": "127.0.0.1",
        "database.port": str(port),
        "database.user": user,
        "database.password": password,
        "database.server.id": "5401",
        "topic.prefix": server,
        "database.include.list": databases,
        "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
        "schema.history.internal.file.filename": str(state_dir / "schema-history.dat"),
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(state_dir / "offsets.dat"),
        "offset.flush.interval.ms": "1000",
        "include.schema.changes": "true",
    }


def jdbc_sink_properties(topics: str, url: str, user: str, password: str, **settings: str) -> dict[str, str]:
    """Properties of the Debezium JDBC sink connector (a Kafka Connect worker's plugin) writing the change topics
    `topics` (comma-separated) to the database at the JDBC `url`: upserts by the record key, deletes applied, each table
    named as the source table, created and evolved by the sink (`settings` override any of it)."""
    return {
        "connector.class": "io.debezium.connector.jdbc.JdbcSinkConnector",
        "tasks.max": "1",
        "topics": topics,
        "connection.url": url,
        "connection.username": user,
        "connection.password": password,
        "insert.mode": "upsert",
        "delete.enabled": "true",
        "primary.key.mode": "record_key",
        "schema.evolution": "basic",
        "collection.name.format": "${source.table}",
        **settings,
    }


class DebeziumProcess:
    """Starts, kills, stops and restarts one embedded-engine connector process."""

    def __init__(self, state_dir: Path, jmx_port: int, properties: dict[str, str], batch_pause_seconds: float = 0.0,
                 extra_spec: dict[str, Any] | None = None) -> None:
        self.dir = state_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.jmx_port = jmx_port
        self.events_file = self.dir / "events.jsonl"
        self.log = self.dir / "engine.log"
        self.spec_file = self.dir / "engine.json"
        self.spec: dict[str, Any] = {"properties": properties, "jmx_port": jmx_port, "events_file": str(self.events_file),
                                     "batch_pause_seconds": batch_pause_seconds, **(extra_spec or {})}
        self.server = ServerProcess("the Debezium engine", self.log)

    @property
    def jmx_url(self) -> str:
        return f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{self.jmx_port}/jmxrmi"

    def start(self, timeout: float = 90) -> None:
        if port_open(self.jmx_port):
            raise StackError(f"port {self.jmx_port} is taken: stop what listens there or pick another JMX port")
        self.spec_file.write_text(json.dumps(self.spec), encoding="utf-8")
        # cwd: the engine writes its own logs/ directory there
        self.server.start([sys.executable, "-m", "devstack.engine", str(self.spec_file)],
                          lambda: port_open(self.jmx_port), timeout, env=python_env(PYTHONUNBUFFERED="1"), cwd=self.dir)

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        return self.server.process

    def alive(self) -> bool:
        return self.server.alive

    def signal(self, signum: int) -> None:
        self.server.signal(signum)

    def kill(self) -> None:
        """kill -9: the JVM dies at once, as in a crash."""
        self.server.kill()

    def stop(self, timeout: float = 20) -> None:
        self.server.stop(timeout)
