"""The JMX client interface every collector uses, whatever the backend."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["JmxError", "JmxValue", "MBean", "JmxClient", "parse_object_name"]

JmxScalar = None | bool | int | float | str
JmxValue = JmxScalar | list[JmxScalar] | dict[str, JmxScalar]
"""An attribute value as Python sees it: a scalar, a list (`String[]`, sets) or a map (TabularData)."""


class JmxError(Exception):
    """The JVM could not be reached or did not answer; the message is safe to log."""


@dataclass(frozen=True)
class MBean:
    """One MBean's name, its key properties and the attribute values read from it."""

    name: str
    domain: str
    keys: dict[str, str]
    attributes: dict[str, JmxValue] = field(default_factory=dict)


def parse_object_name(name: str) -> tuple[str, dict[str, str]]:
    """Split ``domain:k1=v1,k2=v2`` into its domain and key properties (any key order)."""
    domain, _, rest = name.partition(":")
    keys: dict[str, str] = {}
    for part in _split_keys(rest):
        key, _, value = part.partition("=")
        if value.startswith('"') and value.endswith('"') and len(value) >= 2:
            value = value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        keys[key] = value
    return domain, keys


def _split_keys(rest: str) -> list[str]:
    parts, current, quoted = [], "", False
    for ch in rest:
        if ch == '"' and not current.endswith("\\"):
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current:
        parts.append(current)
    return parts


class JmxClient(Protocol):
    """Reads MBeans matching an ObjectName pattern. Raises JmxError on any failure."""

    def query(self, pattern: str, attributes: Sequence[str]) -> list[MBean]:
        """Every bean matching `pattern`, with those of `attributes` it has."""
        ...

    def close(self) -> None:
        """Release the connection; the next query reconnects."""
        ...
