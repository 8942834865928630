"""Collects every Debezium connector MBean of one JVM into Prometheus families, and when that JVM started."""

from __future__ import annotations

import re
from collections.abc import Sequence

from prometheus_client.samples import Sample

from cdcwatch.collection import Collection
from cdcwatch.config import DebeziumTargetConfig
from cdcwatch.debezium.mapping import DEBEZIUM_BEAN_METRICS, convert, requested_attributes
from cdcwatch.families import FamilyBuilder
from cdcwatch.jmx import RUNTIME_BEAN, JmxClient, MBean, jmx_address, jvm_start_time_seconds
from cdcwatch.specs import MetricSpec, metric_specs

__all__ = ["DEBEZIUM_BEAN_METRICS", "DEBEZIUM_METRICS", "MBEAN_PATTERN", "DebeziumCollector", "bean_labels"]

MBEAN_PATTERN = "debezium.*:type=connector-metrics,*"
"""Every Debezium connector bean: postgres, mysql, sql_server, oracle, mongodb, … in any key order."""

# per JVM: labels target and the target's static labels (the bean metrics are DEBEZIUM_BEAN_METRICS, in the
# mapping table)
DEBEZIUM_MBEANS = MetricSpec("cdcwatch_debezium_mbeans", "gauge", "Debezium connector MBeans found on the target.",
                             source="(bean count)")
DEBEZIUM_JVM_START_TIME_SECONDS = MetricSpec("cdcwatch_debezium_jvm_start_time_seconds", "gauge", (
    "When the target's JVM started (Unix time); a new value is a JVM restart, so "
    "`changes(…[1h])` counts them."),
    source="`java.lang:type=Runtime` `StartTime`")
DEBEZIUM_METRICS = metric_specs(
    DEBEZIUM_MBEANS,
    DEBEZIUM_JVM_START_TIME_SECONDS,
)

_STANDARD_KEYS = ("server", "context", "task", "database")
_INVALID_LABEL_CHARS = re.compile(r"[^a-zA-Z0-9_]")


def _tag_label(key: str, taken: set[str]) -> str:
    """A valid label name for a `custom.metric.tags` key that clashes with no other label."""
    name = _INVALID_LABEL_CHARS.sub("_", key)
    if not name or name[0].isdigit() or name.startswith("__"):
        name = "tag_" + name.lstrip("_")
    while name in taken:
        name = "tag_" + name
    return name


def bean_labels(bean: MBean, target: str, static: dict[str, str]) -> dict[str, str]:
    """Labels of one bean: target, plugin (from the domain), server, context, task/database, custom tags."""
    labels = {"target": target, **static}
    labels["plugin"] = bean.domain.removeprefix("debezium.")
    for key in _STANDARD_KEYS:
        if key in bean.keys:
            labels[key] = bean.keys[key]
    for key, value in sorted(bean.keys.items()):
        if key == "type" or key in _STANDARD_KEYS:
            continue
        labels[_tag_label(key, set(labels))] = value
    return labels


def _summary(beans: Sequence[MBean]) -> str:
    streaming = [b for b in beans if b.keys.get("context") == "streaming"]
    connected = sum(1 for b in streaming if b.attributes.get("Connected") is True)
    lags = [v for b in streaming if isinstance(v := b.attributes.get("MilliSecondsBehindSource"), (int, float)) and v >= 0]
    events = sum(v for b in beans if isinstance(v := b.attributes.get("TotalNumberOfEventsSeen"), int) and not isinstance(v, bool))
    servers = sorted({b.keys.get("server", "?") for b in beans})
    parts = [f"connectors={len(servers)}", f"beans={len(beans)}", f"connected={connected}/{len(streaming)}"]
    if lags:
        parts.append(f"lag={max(lags) / 1000:.3f}s")
    parts.append(f"events={events}")
    return " ".join(parts)


class DebeziumCollector:
    """Reads the Debezium beans of one target through a JMX client."""

    kind = "debezium"

    def __init__(self, target: DebeziumTargetConfig, client: JmxClient) -> None:
        self.target = target.name
        self.address = jmx_address(target.jmx)
        self._static = dict(target.labels)
        self._client = client
        self._attributes = requested_attributes()

    def collect(self) -> Collection:
        beans, runtime = self._client.query_many([(MBEAN_PATTERN, self._attributes), (RUNTIME_BEAN, ("StartTime",))])
        builder = FamilyBuilder()
        for bean in beans:
            labels = bean_labels(bean, self.target, self._static)
            for sample in convert(bean.attributes):  # label names checked against the spec as each rule was made
                builder.family_of(sample.spec).samples.append(
                    Sample(sample.spec.name, {**labels, **dict(sample.labels)}, sample.value))
        common = {"target": self.target, **self._static}
        builder.add_spec(DEBEZIUM_MBEANS, float(len(beans)), common)
        started = jvm_start_time_seconds(runtime)
        if started is not None:
            builder.add_spec(DEBEZIUM_JVM_START_TIME_SECONDS, started, common)
        return Collection(builder.families(), _summary(beans))

    def inherit(self, previous: DebeziumCollector) -> None:
        """Take over the JMX client of the collector this one replaces at a reload, with its connection and the bean
        listings and JVM constants it keeps; the replaced collector closes this one's unused client instead."""
        self._client, previous._client = previous._client, self._client

    def close(self) -> None:
        self._client.close()
