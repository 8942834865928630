"""The JMX client interface every collector uses, whatever the backend."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["RUNTIME_BEAN", "JmxError", "JmxQuery", "JmxValue", "MBean", "JmxClient", "jvm_start_time_seconds",
           "parse_object_name", "pattern_matches"]

JmxScalar = None | bool | int | float | str
JmxValue = JmxScalar | list[JmxScalar] | dict[str, JmxScalar]
"""An attribute value as Python sees it: a scalar, a list (`String[]`, sets) or a map (TabularData)."""

JmxQuery = tuple[str, Sequence[str]]
"""An ObjectName pattern and the attributes to read from each bean it matches."""

RUNTIME_BEAN = "java.lang:type=Runtime"
"""The JVM's runtime bean: `StartTime` (milliseconds since the epoch) changes when the JVM restarts."""


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


def pattern_matches(pattern: str, name: str) -> bool:
    """Whether the ObjectName `name` matches the ObjectName `pattern`: `*` and `?` in the domain and in property
    values, and a trailing `*` (or `,*`) in the property list for "and any other properties"."""
    domain, keys = parse_object_name(name)
    wanted_domain, wanted = parse_object_name(pattern)
    open_ended = wanted.pop("*", None) is not None
    if not _glob(wanted_domain).fullmatch(domain) or (not open_ended and set(wanted) != set(keys)):
        return False
    return all(key in keys and _glob(value).fullmatch(keys[key]) for key, value in wanted.items())


def _glob(text: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in text))


def jvm_start_time_seconds(beans: Sequence[MBean]) -> float | None:
    """The JVM start time (Unix seconds) from the `RUNTIME_BEAN` among `beans`, if it was read."""
    for bean in beans:
        started = bean.attributes.get("StartTime")
        runtime = (bean.domain, bean.keys) == ("java.lang", {"type": "Runtime"})
        if runtime and isinstance(started, int) and not isinstance(started, bool) and started > 0:
            return started / 1000
    return None


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

    def query_many(self, queries: Sequence[JmxQuery]) -> list[list[MBean]]:
        """The beans of each (pattern, attributes) query, in order, read in one round trip where the backend can
        (jmxquery starts one JVM per call). Raises JmxError on any failure."""
        ...

    def close(self) -> None:
        """Release the connection; the next query reconnects."""
        ...
