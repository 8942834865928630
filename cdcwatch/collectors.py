"""The collector registry: each kind of target cdcwatch collects, registered once with its configuration section,
its collector class, its metric specs and its section of the metrics reference.

Everything that goes over the kinds of target reads this table: the configuration's checks (`cdcwatch.validation`:
a section to scrape, names unique within a section, static labels that clash with the ones a target's collector
sets), building the collectors, the failure lines (which service to check), the metrics reference and the mixin's
stage of each metric. A new collector is one module plus one entry in `COLLECTORS`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from cdcwatch.canary import CANARY_METRICS, CanaryCollector, CanaryReader
from cdcwatch.collection import TargetCollector
from cdcwatch.config import (
    CanaryConfig,
    ConnectWorkerConfig,
    DebeziumTargetConfig,
    DeltaTableLocation,
    KafkaClusterConfig,
    MysqlSourceConfig,
    PostgresSourceConfig,
    ReconcileConfig,
)
from cdcwatch.connect import jmx_rules
from cdcwatch.connect.collector import CONNECT_METRICS, ConnectCollector
from cdcwatch.connect.jmx_rules import CONNECT_JMX_METRICS
from cdcwatch.debezium import DEBEZIUM_METRICS, DebeziumCollector, mapping
from cdcwatch.debezium.mapping import DEBEZIUM_BEAN_METRICS, RULES
from cdcwatch.delta.canary import DeltaCanaryReader
from cdcwatch.delta.collector import DELTA_METRICS, DeltaCollector, DeltaTableConfig
from cdcwatch.jmx import make_client
from cdcwatch.kafka.cluster import client_problems
from cdcwatch.kafka.collector import KAFKA_METRICS, KafkaCollector
from cdcwatch.mysql.binlog import BINLOG_METRICS, BinlogCollector
from cdcwatch.postgres.slots import SLOT_METRICS, ReplicationSlotCollector
from cdcwatch.reconcile.collector import RECONCILE_METRICS, SCRAPE_TIMEOUT_SECONDS, ReconcileCollector
from cdcwatch.self_metrics import SELF_METRICS
from cdcwatch.specs import MetricSpec, reference_row
from cdcwatch.tables import make_side

__all__ = ["COLLECTORS", "EXPORTER_LABELS", "CollectorEntry", "Registry", "Stage", "exporter_labels", "registered"]

EXPORTER_LABELS = {
    "collector": "set by cdcwatch (the kind of target, on cdcwatch's own series)",
    "target": "set by cdcwatch (the target's name, on every series)",
    "job": "set by Prometheus (the scrape's job)",
    "instance": "set by Prometheus (the scraped address)",
    "le": "reserved by Prometheus (a histogram bucket's bound)",
    "quantile": "reserved by Prometheus (a summary's quantile)",
}
"""Labels no target's static labels may use, whatever its kind, and who sets them: `label name 'job' is <this>`."""


@dataclass(frozen=True)
class Stage:
    """A part of the pipeline a deployment runs or not: the mixin config's `stages` has a switch for each, and the
    rules and panels reading its series are generated only where it is on."""

    name: str
    what: str
    """The switch's meaning in the mixin config reference."""
    key: str = ""
    """The chart turns it on (`stages: auto`) when a target of the kind's section sets this key; "": any target."""


@dataclass(frozen=True, eq=False)
class CollectorEntry:
    """One kind of target."""

    kind: str
    """Its configuration section (a list of targets under this key) and the `collector` label of its targets' own
    series (`cdcwatch_up{collector=...}`)."""
    model: type[BaseModel]
    """The configuration of one target of the section."""
    summary: str
    """What the section's targets are, as the configuration reference says it."""
    what: str
    """What one target of the section is, as errors name it (`kafka cluster name 'a' is used twice`)."""
    service: str
    """What a failure line tells the user to check (`check that the Kafka broker is running`)."""
    build: Callable[[Any], TargetCollector]
    """The collector of one configured target."""
    metrics: tuple[Mapping[str, MetricSpec], ...]
    """Every metric spec table its collector exports from."""
    reference: Callable[[], list[str]]
    """Its section of the metrics reference (Markdown lines)."""
    series_labels: tuple[str, ...] = ()
    """Labels its series carry that no spec declares (Debezium's, from the MBean names)."""
    timeout: Callable[[Any], float] = lambda target: float(target.timeout_seconds)
    """The deadline of one collection from a target."""
    stages: tuple[Stage, ...] = ()
    """Its stages (default: one, named as the kind, described by `summary`)."""
    stage: Callable[[MetricSpec], str] | None = None
    """The stage of each of its metrics, when it has several stages."""
    problems: Callable[[Any], list[str]] = lambda target: []
    """What a target's configuration gets wrong that only its collector's library can tell (a Kafka client setting),
    one line each, led by the key path under the target's entry: refused before anything starts."""

    @property
    def section(self) -> str:
        return self.kind

    def pipeline_stages(self) -> tuple[Stage, ...]:
        return self.stages or (Stage(self.kind, self.summary),)

    def specs(self) -> Iterator[MetricSpec]:
        for table in self.metrics:
            yield from table.values()

    def stage_of(self, spec: MetricSpec) -> str:
        return self.stage(spec) if self.stage is not None else self.kind

    def reserved_labels(self) -> dict[str, str]:
        """Every label a static label of this kind's targets may not be named → who sets it (`label name 'x' is
        <this>`): the exporter-wide ones (`EXPORTER_LABELS`), then the ones this kind's series carry. Another kind's
        labels are free: they never meet this kind's series."""
        why = dict(EXPORTER_LABELS)
        for label in self.series_labels:
            why.setdefault(label, f"set by the {self.kind} collector (on every {self.kind} series)")
        for spec in self.specs():
            for label in spec.labels:
                why.setdefault(label, f"set by the {self.kind} collector (a label of {spec.name})")
        return why


Registry = tuple[CollectorEntry, ...]
"""A registry of kinds of target: `COLLECTORS`, or a test's own."""


def _table(intro: str, specs: Sequence[MetricSpec], source: Callable[[MetricSpec], str] | None = None,
           column: str = "source") -> list[str]:
    """A paragraph, then a table of `specs`; with `source`, a column named `column` tells where each is read."""
    if source is None:
        header = ["| metric | type | extra labels | help |", "|---|---|---|---|"]
    else:
        header = [f"| metric | type | extra labels | {column} | help |", "|---|---|---|---|---|"]
    return [intro, "", *header, *(reference_row(spec, source(spec) if source else None) for spec in specs)]


def _debezium_reference() -> list[str]:
    beans = "target, plugin, server, context (+ task, database, custom tags, static labels)"
    lines = ["### Debezium (JMX)", ""]
    lines += _table(f"Every series carries the labels {beans}; extra labels are listed per metric.",
                    [spec for _, spec in sorted(DEBEZIUM_BEAN_METRICS.items())],
                    lambda spec: ", ".join(f"`{a}`" for a in mapping.sources(spec)), "MBean attribute(s)")
    lines += ["", "Not exported (free text or unbounded values, never used as label values): "
              + ", ".join(f"`{r.attribute}`" for r in RULES if r.spec is None) + ".", ""]
    lines += _table("Per JVM, with the labels target and the target's static labels:", list(DEBEZIUM_METRICS.values()),
                    lambda spec: spec.source)
    return lines


def _kafka_reference() -> list[str]:
    return ["### Kafka (consumer groups, topics)", "",
            *_table("Every series carries the labels target (the cluster name) and the cluster's static labels; extra "
                    "labels are listed per metric.", list(KAFKA_METRICS.values()))]


def _connect_reference() -> list[str]:
    lines = ["### Kafka Connect workers", "",
             *_table("Every series carries the label target (the worker name) and the worker's static labels.",
                     list(CONNECT_METRICS.values()), lambda spec: spec.source or "REST")]
    return lines + [reference_row(spec, "JMX " + ", ".join(jmx_rules.sources(spec)))
                    for spec in CONNECT_JMX_METRICS.values()]


def _postgres_reference() -> list[str]:
    return ["### PostgreSQL replication slots", "",
            *_table("Every series carries the label target (the source name) and the source's static labels.",
                    list(SLOT_METRICS.values()))]


def _mysql_reference() -> list[str]:
    return ["### MySQL / MariaDB binary logs", "",
            *_table("Every series carries the label target (the source name) and the source's static labels; server "
                    "is the source's `server` setting.", list(BINLOG_METRICS.values()))]


def _reconcile_reference() -> list[str]:
    return ["### Reconciliation (source-to-target table pairs)", "",
            *_table("Every series carries the label target (the pair's name) and the pair's static labels.",
                    list(RECONCILE_METRICS.values()))]


def _canary_reference() -> list[str]:
    return ["### Canary (the target's freshness, for any sink)", "",
            *_table("Every series carries the labels target (the canary's name), server (the pipeline), topic (the "
                    "canary's Kafka topic, empty when unknown) and the canary's static labels.",
                    list(CANARY_METRICS.values()))]


def _delta_reference() -> list[str]:
    return ["### Delta Lake tables (transaction log)", "",
            *_table("Every series carries the label target (the table's name) and the table's static labels.",
                    list(DELTA_METRICS.values()))]


def _connect_stage(spec: MetricSpec) -> str:
    return "connect_jmx" if spec in CONNECT_JMX_METRICS.values() or spec.source.startswith("JMX") else "connect_rest"


def _canary(config: CanaryConfig) -> CanaryCollector:
    """A canary; one that lands in a Delta table is read from the table's log."""
    if not isinstance(config.target, DeltaTableLocation):
        return CanaryCollector(config)
    sides: dict[str, CanaryReader] = {"target": DeltaCanaryReader("target", config.target.uri)}
    if config.source is not None:
        sides["source"] = make_side("source", config.source, config.source)
    return CanaryCollector(config, sides)


def _debezium(target: DebeziumTargetConfig) -> DebeziumCollector:
    return DebeziumCollector(target, make_client(target.jmx, target.timeout_seconds))


COLLECTORS: Registry = (
    CollectorEntry("debezium", DebeziumTargetConfig, "JVMs whose Debezium MBeans are scraped.", "debezium target",
                   "the JVM's JMX agent", _debezium, (DEBEZIUM_BEAN_METRICS, DEBEZIUM_METRICS), _debezium_reference,
                   stages=(Stage("debezium", "Debezium connectors' MBeans over JMX (`debezium` targets, or a Connect "
                                 "worker's JMX)."),),
                   series_labels=("plugin", "server", "context", "task", "database")),
    CollectorEntry("kafka", KafkaClusterConfig, "Kafka clusters whose consumer lag is collected.", "kafka cluster",
                   "the Kafka broker", KafkaCollector, (KAFKA_METRICS,), _kafka_reference, problems=client_problems,
                   stages=(Stage("kafka", "Consumer groups, topics and retention (`kafka` targets)."),)),
    CollectorEntry("connect", ConnectWorkerConfig, "Kafka Connect workers to watch.", "connect worker",
                   "the Connect worker", ConnectCollector, (CONNECT_METRICS, CONNECT_JMX_METRICS), _connect_reference,
                   stages=(Stage("connect_rest", "Kafka Connect's REST API: connector and task states, failures, "
                                 "pipeline identity."),
                           Stage("connect_jmx", "Kafka Connect's own JMX beans: task restarts, records polled and "
                                 "written, errors, dead letter queue.", key="jmx")),
                   stage=_connect_stage),
    CollectorEntry("postgres", PostgresSourceConfig, "PostgreSQL / YugabyteDB sources whose replication slots are "
                   "watched.", "postgres source", "PostgreSQL", ReplicationSlotCollector, (SLOT_METRICS,),
                   _postgres_reference,
                   stages=(Stage("postgres", "PostgreSQL replication slots and WAL (`postgres` targets)."),)),
    CollectorEntry("mysql", MysqlSourceConfig, "MySQL / MariaDB sources whose binary logs are watched.", "mysql source",
                   "the MySQL server", BinlogCollector, (BINLOG_METRICS,), _mysql_reference,
                   stages=(Stage("mysql", "MySQL / MariaDB binary logs (`mysql` targets)."),)),
    # a scrape reads the pair's state: its deadline is short, whatever its passes take
    CollectorEntry("reconcile", ReconcileConfig, "Table pairs (source, target) compared continuously: does the target "
                   "hold what the source holds?", "reconcile pair", "the target", ReconcileCollector,
                   (RECONCILE_METRICS,), _reconcile_reference, timeout=lambda pair: SCRAPE_TIMEOUT_SECONDS,
                   stages=(Stage("reconcile", "Source-to-target reconciliation (`reconcile` table pairs)."),)),
    CollectorEntry("canary", CanaryConfig, "Canary rows read where they land: how fresh the target is, for any sink "
                   "(a connector, Spark, your own).", "canary", "the database holding the canary", _canary,
                   (CANARY_METRICS,), _canary_reference, series_labels=("server", "topic"),
                   stages=(Stage("canary", "The target's freshness from a canary row, for any sink (`canary` "
                                 "entries)."),)),
    CollectorEntry("delta", DeltaTableConfig, "Delta Lake tables a pipeline applies changes to, read from their "
                   "transaction log (no JVM, no Spark).", "delta table", "the table's storage", DeltaCollector,
                   (DELTA_METRICS,), _delta_reference,
                   stages=(Stage("delta", "Delta Lake tables from their transaction log (`delta` entries)."),)),
)
"""Every kind of target, in the order the collectors are built and the reference documents them."""


def registered(kind: str) -> CollectorEntry | None:
    """The entry of a `collector` kind."""
    return next((entry for entry in COLLECTORS if entry.kind == kind), None)


def exporter_labels() -> dict[str, str]:
    """Every label cdcwatch's series can carry, whichever the kind of target, → who sets it: the exporter-wide ones,
    those of cdcwatch's own series and every kind's. A target's static labels are checked against its own kind's
    only (`CollectorEntry.reserved_labels`, in `cdcwatch.validation`); this is for what cannot tell the kinds apart."""
    why = dict(EXPORTER_LABELS)
    for spec in SELF_METRICS.values():
        for label in spec.labels:
            why.setdefault(label, f"set by cdcwatch (a label of {spec.name})")
    for entry in COLLECTORS:
        for label, setter in entry.reserved_labels().items():
            why.setdefault(label, setter)
    return why
