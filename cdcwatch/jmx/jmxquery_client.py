"""The `jmxquery` backend (PyPI jmxquery 0.6.0), kept because many users know it.

Its limits, which cdcwatch documents and tests:
- it starts a new JVM (`java -jar JMXQuery.jar`) on every scrape (about 0.5 s);
- Map/TabularData attributes (`RowsScanned`, `SourceEventPosition`) come back empty and
  `String[]` as `[Ljava.lang.String;@…`, so per-table and list-derived metrics are absent;
- its JSON output does not escape strings, so a query over every attribute breaks on
  `LastEvent`; cdcwatch therefore asks for the mapped attributes one by one, in one call;
- a timeout inside jmxquery returns an empty answer, so every call also reads
  `java.lang:type=Runtime/Uptime` and an answer without it counts as a failure;
- it starts one JVM per call, so `query_many` sends every pattern of a collection in one call and
  gives each bean to the patterns it matches;
- the password is passed on the java command line (visible to local users in `ps`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from cdcwatch.config import JmxSettings
from cdcwatch.jmx.client import JmxError, JmxQuery, JmxValue, MBean, parse_object_name, pattern_matches

__all__ = ["JmxqueryClient"]

_LIVENESS_BEAN = "java.lang:type=Runtime"
_LIVENESS_ATTRIBUTE = "Uptime"


def _convert(value: Any, java_type: str | None) -> JmxValue:
    if value is None:
        return None
    if isinstance(value, str) and value.startswith("[L"):
        return None  # an array printed by Object.toString(): its contents are not available
    if java_type == "Boolean" or isinstance(value, bool):
        return value if isinstance(value, bool) else str(value).lower() == "true"
    if isinstance(value, (int, float)):
        return value
    return str(value)


class JmxqueryClient:
    """A JMX client that runs the jmxquery jar once per query."""

    def __init__(self, settings: JmxSettings, timeout_seconds: float) -> None:
        self._settings = settings
        self._timeout = timeout_seconds

    def query(self, pattern: str, attributes: Sequence[str]) -> list[MBean]:
        return self.query_many([(pattern, attributes)])[0]

    def query_many(self, queries: Sequence[JmxQuery]) -> list[list[MBean]]:
        """Every query in one `java -jar` run; each bean goes to the queries whose pattern it matches."""
        from jmxquery import JMXConnection, JMXQuery

        password = self._settings.password.get_secret_value() if self._settings.password else None
        connection = JMXConnection(self._settings.service_url, self._settings.username, password)
        requests = [JMXQuery(_LIVENESS_BEAN, attribute=_LIVENESS_ATTRIBUTE)]
        requests += [JMXQuery(pattern, attribute=name) for pattern, attributes in queries for name in attributes]
        try:
            results = connection.query(requests, timeout=self._timeout)
        except Exception as exc:  # jmxquery raises CalledProcessError, JSONDecodeError, OSError...
            raise JmxError(f"jmxquery failed: {type(exc).__name__}") from None
        if not any(r.mBeanName == _LIVENESS_BEAN and r.attribute == _LIVENESS_ATTRIBUTE for r in results):
            raise JmxError("jmxquery got no answer from the JVM (unreachable or timed out)")
        grouped: dict[str, dict[str, JmxValue]] = defaultdict(dict)
        for result in results:
            if not result.attributeKey:
                grouped[result.mBeanName][result.attribute] = _convert(result.value, result.value_type)
        answers = []
        for pattern, attributes in queries:
            beans = []
            for name, values in sorted(grouped.items()):
                wanted = {k: v for k, v in values.items() if k in attributes}
                if wanted and pattern_matches(pattern, name):
                    domain, keys = parse_object_name(name)
                    beans.append(MBean(name, domain, keys, wanted))
            answers.append(beans)
        return answers

    def close(self) -> None:
        """Nothing to release: each query ran its own JVM."""
