"""Alertmanager inhibition rules: when a cause is firing, the alerts it explains stay quiet.

Which alerts a rule silences is data checked against the alerts' own example labels: an `equal` label
that the source or a target does not carry would make the rule silently useless.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import yaml

from cdcwatch.mixin.alerts import ALERTS
from cdcwatch.mixin.config import MixinConfig
from cdcwatch.mixin.rules import deployed_alerts

__all__ = ["INHIBITIONS", "SEVERITY_RANK", "Inhibition", "deployed_inhibitions", "inhibit_rules", "inhibit_yaml"]


@dataclass(frozen=True)
class Inhibition:
    why: str
    sources: tuple[str, ...]
    targets: tuple[str, ...]
    equal: tuple[str, ...]
    source_labels: tuple[tuple[str, str, str], ...] = ()
    """Further source matchers, as (label, operator, value): which of the source alerts' series inhibit."""
    target_labels: tuple[tuple[str, str, str], ...] = ()
    """Further target matchers, as (label, operator, value): which of the target alerts' series are inhibited."""


def _carrying(labels: tuple[str, ...], prefix: str = "Cdc", but: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The alerts named `prefix…` whose firing labels include all of `labels`."""
    return tuple(a.name for a in ALERTS if a.name.startswith(prefix) and a.name not in but
                 and set(labels) <= set(a.fires.labels or {}))


_DOWNSTREAM = ("CdcKafkaDataTooOld", "CdcSparkFreshnessTooOld", "CdcSparkApplyLagHigh", "CdcCanaryStale",
               "CdcPipelineStalled")
"""The alerts on how stale the pipeline's end is, and where it stalls: one upstream cause explains them all."""
_CATCHING_UP = ("CdcKafkaConsumerNotProgressing", "CdcKafkaConsumerLagHigh", "CdcReconcileCannotConfirm")
"""The alerts of a pipeline behind a connector's outage and catching up with its backlog: its consumer group lags and
commits in bursts, and reconciliation cannot confirm while the target is behind."""
_SOURCE_DOWN = ("CdcPostgresSourceUnreachable", "CdcMysqlSourceUnreachable")
_CONNECT_DOWN = ("CdcConnectTaskFailed", "CdcConnectConnectorFailed", "CdcConnectTaskNotRunning", "CdcConnectConnectorVanished")
_SINK_DOWNSTREAM = ("CdcCanaryStale", "CdcKafkaConsumerNotProgressing", "CdcKafkaConsumerLagHigh", "CdcReconcileCannotConfirm")
"""What a stopped sink connector explains: its target's stale canary, its consumer group's stall and lag, and
reconciliation that cannot confirm its target; never what is upstream of it (capture, Kafka) or beside it (another
consumer of the same topics, as the Spark job)."""

INHIBITIONS: tuple[Inhibition, ...] = (
    Inhibition("Prometheus cannot scrape cdcwatch or the Spark listener: the alerts on that endpoint's series",
               ("CdcwatchEndpointDown",), _carrying(("job", "instance"), but=("CdcwatchEndpointDown",)),
               ("job", "instance")),
    Inhibition("cdcwatch cannot collect from a target: the alerts on that target's series",
               ("CdcwatchTargetDown",), _carrying(("job", "instance", "target"), but=("CdcwatchTargetDown",)),
               ("job", "instance", "target")),
    Inhibition("a Kafka Connect worker does not answer: the alerts on its series",
               ("CdcConnectWorkerDown",), _carrying(("job", "instance", "target"), but=("CdcConnectWorkerDown",)),
               ("job", "instance", "target")),
    Inhibition("a Kafka Connect worker does not answer: the downstream, consumer and reconciliation alerts of the servers "
               "its connectors fed (through the catch-up after it)", ("CdcConnectWorkerDown",),
               _DOWNSTREAM + _CATCHING_UP, ("server",)),
    Inhibition("a Kafka Connect source connector or task is FAILED, PAUSED or UNASSIGNED, or the connector vanished: the "
               "Debezium, downstream, consumer and reconciliation alerts of its server (through the catch-up after it)", _CONNECT_DOWN,
               _carrying(("server",), "CdcDebezium") + _DOWNSTREAM + _CATCHING_UP, ("server",), (("type", "!=", "sink"),)),
    Inhibition("a Kafka Connect sink connector or task is FAILED, PAUSED or UNASSIGNED, or the sink vanished: the alerts of "
               "the target it applies its server's changes to (through the catch-up after it)", _CONNECT_DOWN,
               _SINK_DOWNSTREAM, ("server",), (("type", "=", "sink"),)),
    Inhibition("a Kafka Connect sink connector or task is FAILED, PAUSED or UNASSIGNED, or the sink vanished: its "
               "pipeline's stall at consume or apply, where the sink reads and applies (through the catch-up after it)",
               _CONNECT_DOWN, ("CdcPipelineStalled",), ("server",), (("type", "=", "sink"),),
               (("stage", "=~", "consume|apply"),)),
    Inhibition("a source database is unreachable: cdcwatch's failure to collect from it",
               _SOURCE_DOWN, ("CdcwatchTargetDown",), ("job", "instance", "target")),
    Inhibition("a source database is unreachable: the Debezium, downstream, consumer and reconciliation alerts of its "
               "server (through the catch-up after it)", _SOURCE_DOWN,
               _carrying(("server",), "CdcDebezium") + _DOWNSTREAM + _CATCHING_UP, ("server",)),
    Inhibition("a source database is unreachable: the Debezium beans that vanish from the same exporter's JVMs while "
               "its connectors' tasks restart (that alert names a JVM, not a server)", _SOURCE_DOWN,
               ("CdcDebeziumMetricsVanished",), ("job", "instance")),
    Inhibition("a connector vanished from its worker: the worker JVM's Debezium beans, gone with it",
               ("CdcConnectConnectorVanished",), ("CdcDebeziumMetricsVanished",), ("job", "instance", "target")),
    Inhibition("a sink task sends records to its dead letter queue: the same task's skipped records (the same records, "
               "kept)", ("CdcConnectSinkDeadLettering",), ("CdcConnectRecordsSkipped",),
               ("job", "instance", "target", "connector", "task")),
    Inhibition("Debezium is disconnected or stuck: the downstream alerts of its server",
               ("CdcDebeziumConnectorDisconnected", "CdcDebeziumNoEventsWhileSourceBusy"), _DOWNSTREAM, ("server",)),
    Inhibition("the pipeline is stalled at capture or publish (the first stalled stage from the source): how stale "
               "its end is, which the stall explains", ("CdcPipelineStalled",),
               tuple(a for a in _DOWNSTREAM if a != "CdcPipelineStalled"), ("server",), (("stage", "=~", "capture|publish"),)),
    Inhibition("the pipeline's target is stale: its stall at consume or apply, the same outage seen from the stages (a "
               "killed, frozen or hung apply job or sink, whose group stops committing; the stale target's alert names "
               "it, and pages first)", ("CdcSparkFreshnessTooOld", "CdcCanaryStale"), ("CdcPipelineStalled",), ("server",),
               target_labels=(("stage", "=~", "consume|apply"),)),
    Inhibition("the pipeline's target is stale: its consumer group's stall, the same outage seen from Kafka (a frozen "
               "or hung apply job or sink)", ("CdcSparkFreshnessTooOld", "CdcCanaryStale"),
               ("CdcKafkaConsumerNotProgressing",), ("server",)),
    Inhibition("the apply job's target is stale, or its pipeline stalled upstream: the Delta tables of its server, "
               "each of which stalls with it", ("CdcSparkFreshnessTooOld", "CdcPipelineStalled"), ("CdcDeltaTableStalled",),
               ("server",)),
    Inhibition("the apply job applies changes late: the end-to-end objective's warning about the same query (one "
               "notification about one number)", ("CdcSparkApplyLagHigh",), ("CdcPipelineStageSlow",),
               ("job", "instance", "query", "server")),
    Inhibition("the Spark query failed or hangs: its freshness and lag alerts",
               ("CdcSparkQueryFailed", "CdcSparkNoProgress"), ("CdcSparkFreshnessTooOld", "CdcSparkApplyLagHigh"), ("query",)),
    Inhibition("no Spark listener reports at all: the freshness alerts that remember its vanished series",
               ("CdcSparkDriverAbsent",), ("CdcSparkFreshnessTooOld",), ()),
    Inhibition("a replication slot already loses WAL, or is about to: the warnings about the same slot's WAL",
               ("CdcPostgresSlotWalAtRisk", "CdcPostgresSlotRunwayCritical"),
               ("CdcPostgresSlotRunwayShort", "CdcPostgresSlotSafeWalRunningOut", "CdcPostgresSlotRetainedWalHigh"),
               ("job", "instance", "target", "slot")),
    Inhibition("a replication slot already loses WAL: its runway", ("CdcPostgresSlotWalAtRisk",),
               ("CdcPostgresSlotRunwayCritical",), ("job", "instance", "target", "slot")),
    Inhibition("the binlog a MySQL connector needs is about to expire: the warning about the same connector's binlog",
               ("CdcMysqlBinlogRunwayCritical",), ("CdcMysqlBinlogRunwayShort",), ("job", "instance", "target", "server")),
    Inhibition("retention is about to overtake a consumer group: the warnings about the same group and topic",
               ("CdcKafkaRetentionRunwayCritical",), ("CdcKafkaRetentionRunwayShort", "CdcKafkaConsumerLagHigh"),
               ("job", "instance", "target", "group", "topic")),
)


def _names(names: tuple[str, ...]) -> str:
    return f'alertname="{names[0]}"' if len(names) == 1 else f'alertname=~"{"|".join(names)}"'


def _matchers(labels: tuple[tuple[str, str, str], ...]) -> list[str]:
    return [f'{label}{op}"{value}"' for label, op, value in labels]


SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}


def deployed_inhibitions(config: MixinConfig) -> tuple[Inhibition, ...]:
    """The inhibitions among the alerts `config.stages` deploys: each with its sources and targets that exist, the
    targets only of a severity no higher than every source's (a warning never silences a page), and only while it
    has both."""
    present = {a.name: SEVERITY_RANK[a.severity] for a in deployed_alerts(config)}
    kept = []
    for inhibition in INHIBITIONS:
        sources = tuple(n for n in inhibition.sources if n in present)
        lowest = min((present[n] for n in sources), default=0)
        targets = tuple(n for n in inhibition.targets if n in present and present[n] <= lowest)
        if sources and targets:
            kept.append(replace(inhibition, sources=sources, targets=targets))
    return tuple(kept)


def inhibit_rules(config: MixinConfig | None = None) -> list[dict[str, object]]:
    config = config or MixinConfig()
    return [{"source_matchers": [_names(i.sources), *_matchers(i.source_labels)],
             "target_matchers": [_names(i.targets), *_matchers(i.target_labels)],
             **({"equal": list(i.equal)} if i.equal else {})} for i in deployed_inhibitions(config)]


def inhibit_yaml(config: MixinConfig, header: str) -> str:
    """The `inhibit_rules:` section to paste into (or merge with) alertmanager.yml, one comment per rule."""
    lines = [header.rstrip("\n"), "inhibit_rules:"]
    for inhibition, rule in zip(deployed_inhibitions(config), inhibit_rules(config), strict=True):
        lines.append(f"# {inhibition.why}")
        lines.append(yaml.safe_dump([rule], sort_keys=False, width=1000).rstrip("\n"))
    return "\n".join(lines) + "\n"
