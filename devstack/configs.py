"""Exporter configurations built from Python data, so a test, the demo or a benchmark states what it configures
(sections, targets, settings) instead of writing YAML text by hand; the text is what `cdcwatch serve` reads."""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["exporter_config", "jmx_target"]


def exporter_config(**sections: Any) -> str:
    """The YAML text of an exporter configuration with `sections` (listen=..., debezium=[...], kafka=[...], ...),
    in the order given; a section given as None is left out."""
    return yaml.safe_dump({name: value for name, value in sections.items() if value is not None}, sort_keys=False)


def jmx_target(name: str, port: int, host: str = "127.0.0.1", jmx: dict[str, Any] | None = None, **settings: Any) -> dict[str, Any]:
    """One `debezium:` entry: the JVM whose JMX endpoint is `host`:`port` (`jmx`: more of its JMX settings;
    `settings`: the entry's own, such as timeout_seconds or labels)."""
    return {"name": name, **settings, "jmx": {"host": host, "port": port, **(jmx or {})}}
