"""Faults that must never cost a metric: a JMX port that speaks nonsense, one that accepts and never
answers, and a Kafka port that does the same. Each scrape returns within its deadline, the broken
target reads up 0, and the healthy target beside it is still served."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest

from devstack.configs import exporter_config, jmx_target, kafka_cluster, postgres_source
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
    serve = serve_factory(exporter_config(
        debezium=[jmx_target("jmx-garbage", garbage.port, timeout_seconds=DEADLINE),
                  jmx_target("jmx-silent", silent.port, timeout_seconds=DEADLINE)],
        kafka=[kafka_cluster("kafka-garbage", f"127.0.0.1:{garbage.port}", timeout_seconds=DEADLINE),
               kafka_cluster("kafka-silent", f"127.0.0.1:{silent.port}", timeout_seconds=DEADLINE)],
        postgres=[postgres_source("pg-garbage", garbage.port, timeout_seconds=DEADLINE),
                  postgres_source("healthy", postgres.port, timeout_seconds=DEADLINE)]))
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
        serve = serve_factory(exporter_config(postgres=[
            postgres_source("pg-fault", server.port, timeout_seconds=DEADLINE, slot_servers={"fault_slot": "faultsrv"})]))
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
