"""Exporter configurations built from Python data, so a test, the demo or a benchmark states what it configures
(sections, targets, settings) instead of writing YAML text by hand; the text is what `cdcwatch serve` reads.

Each builder is one entry of one section of `cdcwatch.config.Config` (or of the web configuration file, `web_config`):
its required keys are parameters, every other key of the entry is a keyword argument written as given, so a key the
schema does not know is refused by cdcwatch's own loader as it would be in a user's file.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["canary", "connect_worker", "exporter_config", "jmx", "jmx_target", "kafka_cluster", "listen", "mysql_source",
           "postgres_source", "reconcile_pair", "reconcile_side", "web_config"]

LOOPBACK = "127.0.0.1"


def exporter_config(**sections: Any) -> str:
    """The YAML text of an exporter configuration with `sections` (listen=..., debezium=[...], kafka=[...], ...),
    in the order given; a section given as None is left out."""
    return yaml.safe_dump({name: value for name, value in sections.items() if value is not None}, sort_keys=False)


def web_config(**sections: Any) -> str:
    """The YAML text of a web configuration file (`tls_server_config={...}`, `basic_auth_users={...}`)."""
    return exporter_config(**sections)


def listen(port: int, address: str = LOOPBACK, **settings: Any) -> dict[str, Any]:
    """The `listen:` section: the HTTP endpoint on `address`:`port` (`settings`: web_config_file)."""
    return {"address": address, "port": port, **settings}


def jmx(port: int, host: str = LOOPBACK, **settings: Any) -> dict[str, Any]:
    """A `jmx:` mapping: the JMX endpoint `host`:`port` (`settings`: username, password, ssl, ca_file, ...)."""
    return {"host": host, "port": port, **settings}


def jmx_target(name: str, port: int, host: str = LOOPBACK, jmx: dict[str, Any] | None = None, **settings: Any) -> dict[str, Any]:
    """One `debezium:` entry: the JVM whose JMX endpoint is `host`:`port` (`jmx`: more of its JMX settings;
    `settings`: the entry's own, such as timeout_seconds or labels)."""
    return {"name": name, **settings, "jmx": {"host": host, "port": port, **(jmx or {})}}


def kafka_cluster(name: str, bootstrap_servers: str, **settings: Any) -> dict[str, Any]:
    """One `kafka:` entry: the cluster at `bootstrap_servers` (`settings`: client, groups, topics, timeout_seconds, ...)."""
    return {"name": name, "bootstrap_servers": bootstrap_servers, **settings}


def connect_worker(name: str, url: str, jmx_port: int | None = None, **settings: Any) -> dict[str, Any]:
    """One `connect:` entry: the worker whose REST API is `url`, its JVM's JMX on the loopback `jmx_port` when given
    (`settings`: username, password, ca_file, timeout_seconds, ...)."""
    return {"name": name, "url": url, **settings, **({"jmx": jmx(jmx_port)} if jmx_port is not None else {})}


def postgres_source(name: str, port: int, host: str = LOOPBACK, **settings: Any) -> dict[str, Any]:
    """One `postgres:` entry: the server at `host`:`port` (`settings`: user, slots, slot_servers, timeout_seconds, ...)."""
    return {"name": name, "host": host, "port": port, **settings}


def mysql_source(name: str, port: int, user: str, host: str = LOOPBACK, **settings: Any) -> dict[str, Any]:
    """One `mysql:` entry: the server at `host`:`port` read as `user` (`settings`: password, server, tables, ...)."""
    return {"name": name, "host": host, "port": port, "user": user, **settings}


def reconcile_side(engine: str, port: int, user: str, host: str = LOOPBACK, **settings: Any) -> dict[str, Any]:
    """The `source:` or `target:` of a `reconcile:` entry: a table on the `engine` server at `host`:`port`
    (`settings`: table, password, dbname, format, ...)."""
    return {"engine": engine, "host": host, "port": port, "user": user, **settings}


def canary(name: str, server: str, interval_seconds: float, target: dict[str, Any], source: dict[str, Any] | None = None,
           **settings: Any) -> dict[str, Any]:
    """One `canary:` entry: the pipeline `server`'s canary, written every `interval_seconds`, read in `target` (and
    `source`, tables as `reconcile_side` gives them; `settings`: column, topic, timeout_seconds, ...)."""
    return {"name": name, "server": server, "interval_seconds": interval_seconds, "target": target,
            **({"source": source} if source is not None else {}), **settings}


def reconcile_pair(name: str, source: dict[str, Any], target: dict[str, Any], **settings: Any) -> dict[str, Any]:
    """One `reconcile:` entry: the table pair `source` → `target` (`settings`: key, chunk_rows, settle_seconds, ...)."""
    return {"name": name, "source": source, "target": target, **settings}
