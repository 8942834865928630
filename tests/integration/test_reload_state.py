"""A reload keeps what the collectors learned: after a SIGHUP with the configuration unchanged, a running
`cdcwatch serve` still knows when each PostgreSQL slot last advanced (not the reload's time), each MariaDB binlog's
rotation time (though the server no longer lets it be read), and each Kafka consumer's status window, message
caches and counters. Each check fails where the replacing collector starts from nothing."""

from __future__ import annotations

import signal

import pytest
from confluent_kafka import Producer

from devstack.configs import exporter_config, mysql_source, postgres_source
from devstack.procs import wait_for
from tests.integration.conftest import value
from tests.integration.test_kafka_lag import client, commit, created_ms, event, kafka_config, status

pytestmark = pytest.mark.integration

RELOADED = "cdcwatch_config_last_reload_success_timestamp_seconds"


def reloaded(serve) -> dict:
    """SIGHUP with the file unchanged, and a scrape started once the reload took effect (one that shows the new
    reload time may have collected with the collectors it replaced)."""
    before = value(serve.scrape(), RELOADED)
    serve.process.send_signal(signal.SIGHUP)
    wait_for(lambda: value(serve.scrape(), RELOADED) > before, 30, "SIGHUP to reload the unchanged file")
    return serve.scrape()


def test_a_postgres_slots_last_advance_survives_a_reload(postgres, serve_factory) -> None:
    postgres.sql("SELECT pg_create_physical_replication_slot('reload_kept')")  # nothing ever advances it
    try:
        serve = serve_factory(exporter_config(postgres=[postgres_source("pg", postgres.port)]),
                              "--config-watch-interval", "0")
        metric = "cdcwatch_postgres_replication_slot_last_advance_timestamp_seconds"
        first_seen = value(serve.scrape(), metric, slot="reload_kept")
        assert first_seen is not None
        assert value(reloaded(serve), metric, slot="reload_kept") == first_seen
    finally:
        postgres.drop_slot("reload_kept")


def rotations(values) -> dict[str, float]:
    return {dict(labels)["file"]: v for (name, labels), v in values.items()
            if name == "cdcwatch_mysql_binlog_file_rotated_timestamp_seconds" and dict(labels)["target"] == "kept"}


def test_mysql_binlog_rotation_times_survive_a_reload(mariadb, serve_factory) -> None:
    mariadb.root_sql("CREATE USER IF NOT EXISTS 'reloadwatch'@'%' IDENTIFIED BY 'rw';"
                     "GRANT BINLOG MONITOR, REPLICATION SLAVE ON *.* TO 'reloadwatch'@'%'; FLUSH BINARY LOGS")
    try:
        serve = serve_factory(exporter_config(mysql=[mysql_source("kept", mariadb.port, "reloadwatch", password="rw")]),
                              "--config-watch-interval", "0")
        before = rotations(serve.scrape())
        assert before  # at least the binlog FLUSH BINARY LOGS closed
        # from now on a new collector could not read them again
        mariadb.root_sql("REVOKE REPLICATION SLAVE ON *.* FROM 'reloadwatch'@'%'")
        after = rotations(reloaded(serve))
        assert after == {name: rotated for name, rotated in before.items() if name in after} and after
    finally:
        mariadb.root_sql("DROP USER IF EXISTS 'reloadwatch'@'%'")


def test_kafka_status_windows_caches_and_counters_survive_a_reload(kafka, serve_factory) -> None:
    topic = "reloadsrv.public.kept"
    kafka.create_topic(topic, 1)
    producer = Producer(client(kafka))
    for index in range(5):
        producer.produce(topic, partition=0, value=event(0, index, created_ms(0, index)))
    assert producer.flush(10) == 0
    commit(kafka, "kept-job", {(topic, 0): 2})  # behind, and no member: STOP once the window is full
    serve = serve_factory(kafka_config(kafka, "kept"), "--config-watch-interval", "0")
    for _ in range(3):  # window_samples: 3
        values = serve.scrape()
    assert status(values, "kept-job", topic, 0) == "STOP"
    reads = {source: value(values, "cdcwatch_kafka_message_reads_total", target="kept", source=source)
             for source in ("broker", "cache")}
    assert reads["broker"] and reads["cache"]

    values = reloaded(serve)
    assert status(values, "kept-job", topic, 0) == "STOP"  # a new window would need 3 samples again
    assert value(values, "cdcwatch_kafka_message_reads_total", target="kept", source="broker") == reads["broker"]
    assert value(values, "cdcwatch_kafka_message_reads_total", target="kept", source="cache") > reads["cache"]
