"""Faults that must never cost a metric: a JMX port that speaks nonsense, one that accepts and never
answers, and a Kafka port that does the same. Each scrape returns within its deadline, the broken
target reads up 0, and the healthy target beside it is still served."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest

from tests.integration.conftest import value

pytestmark = pytest.mark.integration

DEADLINE = 3


class Nonsense:
    """A TCP server on 127.0.0.1 that answers every connection with garbage (or with silence)."""

    def __init__(self, silent: bool) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.silent = silent
        self.open: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:
                return
            self.open.append(connection)  # kept open: a peer that never finishes
            if not self.silent:
                try:
                    connection.sendall(os.urandom(512) + b"\r\nHTTP/1.0 418 nonsense\r\n\r\n")
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()
        for connection in self.open:
            connection.close()


@pytest.fixture
def nonsense() -> Iterator[tuple[Nonsense, Nonsense]]:
    garbage, silent = Nonsense(silent=False), Nonsense(silent=True)
    yield garbage, silent
    garbage.close()
    silent.close()


def test_garbage_and_silent_peers_are_up_0_within_the_deadline(nonsense, postgres, serve_factory) -> None:
    garbage, silent = nonsense
    serve = serve_factory(
        "debezium:\n"
        f"  - name: jmx-garbage\n    timeout_seconds: {DEADLINE}\n    jmx: {{host: 127.0.0.1, port: {garbage.port}}}\n"
        f"  - name: jmx-silent\n    timeout_seconds: {DEADLINE}\n    jmx: {{host: 127.0.0.1, port: {silent.port}}}\n"
        "kafka:\n"
        f"  - name: kafka-garbage\n    timeout_seconds: {DEADLINE}\n    bootstrap_servers: 127.0.0.1:{garbage.port}\n"
        f"  - name: kafka-silent\n    timeout_seconds: {DEADLINE}\n    bootstrap_servers: 127.0.0.1:{silent.port}\n"
        "postgres:\n"
        f"  - name: pg-garbage\n    timeout_seconds: {DEADLINE}\n    port: {garbage.port}\n"
        f"  - name: healthy\n    timeout_seconds: {DEADLINE}\n    port: {postgres.port}\n")
    for _ in range(3):  # again and again: nothing piles up behind a broken peer
        values, took = serve.timed_scrape()
        assert took < DEADLINE + 1.5
        for target in ("jmx-garbage", "jmx-silent", "kafka-garbage", "kafka-silent", "pg-garbage"):
            assert value(values, "cdcwatch_up", target=target) == 0, target
        assert value(values, "cdcwatch_up", target="healthy") == 1


def test_postgres_stopped_is_up_0_and_recovers_without_a_restart(stack_dir, serve_factory) -> None:
    from devstack.postgres import PostgresServer
    from devstack.procs import free_port, wait_for

    server = PostgresServer(stack_dir / "pg-fault", free_port())
    server.start()
    try:
        server.sql("SELECT pg_create_logical_replication_slot('fault_slot', 'pgoutput')")
        serve = serve_factory(
            f"postgres:\n  - name: pg-fault\n    timeout_seconds: {DEADLINE}\n    port: {server.port}\n"
            f"    slot_servers: {{fault_slot: faultsrv}}\n")
        assert value(serve.scrape(), "cdcwatch_postgres_replication_slot_active", slot="fault_slot") == 0
        server.stop()
        for _ in range(3):
            values, took = serve.timed_scrape()
            assert took < DEADLINE + 1.5
            assert value(values, "cdcwatch_up", target="pg-fault") == 0
            assert value(values, "cdcwatch_postgres_replication_slot_active", slot="fault_slot") is None
        server.start()
        values = wait_for(lambda: (v := serve.scrape()) and value(v, "cdcwatch_up", target="pg-fault") == 1 and v, 30,
                          "the collector to reconnect")
        assert value(values, "cdcwatch_postgres_replication_slot_active", slot="fault_slot", server="faultsrv") == 0
        assert value(values, "cdcwatch_scrape_errors_total", target="pg-fault") >= 3
    finally:
        server.stop()
