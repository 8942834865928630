"""The one configuration the alert rules and dashboards are generated from: selectors, thresholds, `for`s.

`placeholders()` is the one place the PromQL and annotation templates (`%(name)s`) are filled from.
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field, PositiveFloat, create_model, field_validator, model_validator

from cdcwatch.collectors import COLLECTORS, Registry
from cdcwatch.config import StrictModel, load_yaml_model
from cdcwatch.mixin.stages import pipeline_stages
from cdcwatch.validation import config_model

__all__ = ["Durations", "KubernetesOutput", "MixinConfig", "Selectors", "Stages", "Thresholds", "exact", "load_mixin_config",
           "placeholders_of"]

_MATCHER = re.compile(r'\s*[a-zA-Z_]\w*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*')
_DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")


class Selectors(StrictModel):
    """PromQL label matchers (without braces) that pick cdcwatch's series out of a Prometheus."""

    cdcwatch: str = 'job="cdcwatch"'
    """The exporter (`cdcwatch serve`)."""
    spark: str = 'job="cdcwatch-spark"'
    """The Spark listener's /metrics in the apply job's driver (or its pushes to a Pushgateway)."""

    @field_validator("cdcwatch", "spark")
    @classmethod
    def _matchers(cls, value: str) -> str:
        if not all(_MATCHER.fullmatch(part) for part in _split_matchers(value)):
            raise ValueError(f'{value!r} is not a list of label matchers like job="cdcwatch"')
        return value


def _split_matchers(text: str) -> list[str]:
    """`a="x,y", b=~"z"` → its matchers (commas inside quotes do not split)."""
    return [m.group(0) for m in re.finditer(r'(?:[^,"]|"(?:[^"\\]|\\.)*")+', text)]


class Thresholds(StrictModel):
    """Where each alert fires: seconds, bytes, ratios (0.1 is 10 %) or counts, as each key's name says."""

    debezium_lag_seconds: PositiveFloat = 60
    """A streaming connector this far behind its source's commits (MilliSecondsBehindSource) warns: CdcDebeziumSourceLagHigh."""
    debezium_queue_free_ratio: PositiveFloat = 0.1
    """A connector's internal queue with less than this share free is saturated (CdcDebeziumQueueSaturated); the capture
    freshness stage reads it as backlogged."""
    snapshot_max_seconds: PositiveFloat = 6 * 3600
    """A snapshot running longer than this warns: CdcDebeziumSnapshotTooLong."""
    kafka_lag_seconds: PositiveFloat = 300
    """A consumer group this many seconds behind the newest message of its topic warns: CdcKafkaConsumerLagHigh."""
    kafka_data_age_seconds: PositiveFloat = 3600
    """The newest source commit in a CDC topic this old, with no heartbeat applied since to show the source is idle:
    CdcKafkaDataTooOld."""
    kafka_retention_runway_warning_seconds: PositiveFloat = 6 * 3600
    """As `kafka_retention_runway_critical_seconds`, warning earlier: CdcKafkaRetentionRunwayShort."""
    kafka_retention_runway_critical_seconds: PositiveFloat = 3600
    """Time left before retention.ms reaches the next message a group will consume (of a group that is past half
    of the topic's retention)."""
    spark_apply_lag_seconds: PositiveFloat = 120
    """The apply job's p99 apply lag (source commit to applied) above this warns: CdcSparkApplyLagHigh."""
    spark_freshness_seconds: PositiveFloat = 300
    """The newest change the apply job applied this much older than now (while the source moves) pages:
    CdcSparkFreshnessTooOld."""
    delta_table_stall_seconds: PositiveFloat = 600
    """A Delta table whose topic holds a newer change than the table and that has not committed for this long pages
    (CdcDeltaTableStalled); one whose newest change is older, with nothing newer in its topic, is idle, not stale."""
    spark_duplicates_ratio: PositiveFloat = 0.05
    """Duplicates (at-least-once replays) above this share of the changes applied warn: CdcSparkDuplicatesHigh."""
    spark_progress_max_age_seconds: PositiveFloat = 300
    """A streaming query with no progress reported for this long pages: CdcSparkNoProgress."""
    pipeline_latency_p99_seconds: PositiveFloat = 60
    """End-to-end objective: 99 % of the changes applied within this long after their source commit."""
    slot_retained_wal_bytes: PositiveFloat = 10 * 1024**3
    """A replication slot holding more WAL than this warns: CdcPostgresSlotRetainedWalHigh."""
    slot_safe_wal_horizon_seconds: PositiveFloat = 6 * 3600
    """How far ahead `predict_linear` looks for a slot's safe_wal_size reaching 0."""
    slot_wal_runway_warning_seconds: PositiveFloat = 6 * 3600
    """As `slot_wal_runway_critical_seconds`, warning earlier: CdcPostgresSlotRunwayShort."""
    slot_wal_runway_critical_seconds: PositiveFloat = 3600
    """Time left, at the current WAL rate, before a slot's safe_wal_size runs out (of a slot holding more WAL than it
    has left)."""
    binlog_runway_warning_seconds: PositiveFloat = 6 * 3600
    """As `binlog_runway_critical_seconds`, warning earlier: CdcMysqlBinlogRunwayShort."""
    binlog_runway_critical_seconds: PositiveFloat = 3600
    """Time left before the oldest binlog a MySQL connector still needs expires (binlog_expire_logs_seconds after
    its rotation)."""
    scrape_duration_seconds: PositiveFloat = 5
    """A scrape of cdcwatch taking longer than this warns (CdcwatchScrapeSlow): keep it under the scrape timeout."""
    connect_task_restarts: PositiveFloat = 2
    """Restarts of one task within 30 minutes that are still normal (a deploy, a rebalance); more is flapping."""
    canary_age_seconds: PositiveFloat = 300
    """The target's newest canary older than this pages (CdcCanaryStale): well above the canary's interval plus the
    pipeline's usual lag."""
    schema_drift_seconds: PositiveFloat = 600
    """A source column missing in the target this long warns (CdcReconcileSchemaDrift): longer than a sink that
    evolves its table takes to add it (with the first change that carries it)."""
    reconcile_pass_overdue_seconds: PositiveFloat = 21600
    """A table pair whose last full pass ended longer ago than this warns (CdcReconcilePassOverdue): above the
    longest pass of the largest pair plus its `pass_interval_seconds`."""
    freshness_idle_proof_seconds: PositiveFloat = 300
    """Freshness state: a stage where nothing moves is `idle` only while evidence from the source this recent shows
    it caught up (a heartbeat applied, the slot keeping up with the WAL); without it, `stalled`."""


class Durations(StrictModel):
    """`for` of the alerts by pace (`critical` outages, `warning` degradation, `instant` one-off events), and
    how long rules remember series that vanished (a Spark driver gone)."""

    critical: str = "2m"
    """`for` of the alerts on outages (a Connect worker down, a target unreachable)."""
    warning: str = "10m"
    """`for` of the alerts on degradation (lag, saturation, runway)."""
    instant: str = "1m"
    """`for` of the alerts on states that are wrong at once (a task FAILED, records skipped or dead-lettered)."""
    memory: str = "6h"
    """How long the rules remember a series that vanished (a Spark driver gone): its alert still fires meanwhile."""
    stalled: str = "10m"
    """`for` of CdcPipelineStalled: longer than a connector or worker restart takes."""
    freshness_window: str = "5m"
    """Freshness state: the window over which a stage counts as moving (its counters rose) and its lag as growing."""
    abandoned: str = "6h"
    """A consumer group STOP (no member, no commit) this long is abandoned: it no longer pages, it warns to be
    retired (deleted, or left out with the Kafka target's `groups.deny`)."""
    loss_window: str = "10m"
    """How far back the alerts on lost or set-aside records look (skipped, dead-lettered, erroneous events): each
    stays firing this long after the last such record."""
    recovery: str = "5m"
    """How long a Kafka Connect connector's or task's alert (FAILED, PAUSED, UNASSIGNED) keeps firing once it runs
    again (`keep_firing_for`): the alerts on its pipeline's staleness stay inhibited while it catches up with its
    backlog, so a recovery does not page again."""
    catch_up: str = "1m"
    """How long a stale target's alert (`CdcSparkFreshnessTooOld`) keeps firing once fresh again: the stall of its
    consumer group, which it inhibits, clears as the group's status window fills with commits. Shorter than
    `recovery`, so that it ends before a Connect outage's alert, which inhibits it, does."""
    scrape_gap: str = "2m"
    """How long the replication slot alerts read a slot's last values when its scrapes fail (a source too busy to
    answer within the target's deadline, which is when its WAL piles up): a failed scrape does not restart their
    `for`. At least two scrape intervals; a dropped slot's alert resolves this much later."""

    @field_validator("critical", "warning", "instant", "memory", "stalled", "freshness_window", "abandoned",
                     "loss_window", "recovery", "catch_up", "scrape_gap")
    @classmethod
    def _duration(cls, value: str) -> str:
        if not _DURATION.match(value):
            raise ValueError(f"{value!r} is not a Prometheus duration like 90s, 2m or 1h30m")
        return value


class KubernetesOutput(StrictModel):
    """Where Grafana's file provisioning finds the dashboards. (The PrometheusRule and dashboard ConfigMaps, their
    namespace and labels, are the Helm chart's: charts/cdcwatch/values.yaml.)"""

    dashboard_folder: str = "cdcwatch"
    """Grafana folder of the dashboards (provisioning provider)."""
    dashboards_path: str = "/var/lib/grafana/dashboards/cdcwatch"
    """Directory the file provisioning provider reads the dashboards' JSON from."""


class StageSwitches(StrictModel):
    """The parts of the pipeline this deployment runs and cdcwatch collects, a switch each (`stages_model`). A stage
    set to false gets no alert, recording rule, inhibition or dashboard panel, and no other stage's rule reads its
    series (a team that runs Debezium → Kafka → its own consumers sets `spark: false`)."""

    def enabled(self) -> frozenset[str]:
        return frozenset(name for name, on in self.model_dump().items() if on)


def stages_model(registry: Registry = COLLECTORS) -> type[StageSwitches]:
    """A switch per stage of the registry's kinds and the Spark listener's (`pipeline_stages`), each on by default."""
    switches: dict[str, Any] = {stage.name: (bool, Field(True, description=stage.what))
                                for stage in pipeline_stages(registry)}
    model: type[StageSwitches] = create_model("Stages", __base__=StageSwitches, __module__=__name__, **switches)
    model.__doc__ = StageSwitches.__doc__
    return model


if TYPE_CHECKING:
    Stages = StageSwitches
else:
    Stages = stages_model()


class MixinConfig(StrictModel):
    stages: Stages = Field(default_factory=Stages)
    selectors: Selectors = Field(default_factory=Selectors)
    thresholds: Thresholds = Field(default_factory=Thresholds)
    durations: Durations = Field(default_factory=Durations)
    runbook_base_url: str = "docs/runbook.md"
    """Where the runbook is published; each alert links to `<runbook_base_url>#<alert name in lower case>`. The
    default is the runbook's path in the documentation, relative: set the address your on-call reads it at
    (`https://docs.example.com/cdcwatch/runbook/`), once, and every alert and dashboard link follows."""
    datasource_uid: str = "${datasource}"
    """The Prometheus data source of the dashboards' panels; the default is a dashboard variable to pick it in
    Grafana."""
    kubernetes: KubernetesOutput = Field(default_factory=KubernetesOutput)

    grafana_url: str = ""
    """Grafana's address (`https://grafana.example.com`): each alert's `dashboard_url` is built on it; empty, the
    links are relative to whatever Grafana the alert is read in (`/d/<uid>?var-server=...`)."""

    @model_validator(mode="before")
    @classmethod
    def _not_the_exporters(cls, data: Any) -> Any:
        """The exporter's configuration given where the mixin config is read: name the flag each one goes to."""
        if isinstance(data, dict) and set(data) & {*config_model().model_fields, "targets"}:
            raise ValueError("this is the exporter's configuration (debezium, kafka, postgres, ...): serve and check read "
                             "it (`--config.file FILE`); the mixin commands take a mixin config (`--mixin.file`)")
        return data

    @field_validator("runbook_base_url")
    @classmethod
    def _runbook(cls, value: str) -> str:
        if not re.fullmatch(r"(https?://[^/\s#]+[^\s#]*|[^\s#:]+)", value):
            raise ValueError(f"{value!r} is neither an http(s) address nor a relative path without '#' "
                             "(the alert's anchor is added to it)")
        return value

    @field_validator("grafana_url")
    @classmethod
    def _grafana(cls, value: str) -> str:
        if value and not re.fullmatch(r"https?://[^/\s]+(/[^\s#?]*)?", value):
            raise ValueError(f"{value!r} is not an http(s) address like https://grafana.example.com")
        return value.rstrip("/")

    def placeholders(self) -> dict[str, str]:
        """What `%(name)s` in rule and annotation templates stands for: the selectors, every threshold
        (written exactly) and every duration."""
        return dict(placeholders_of(self.selectors, self.thresholds, self.durations))

    def runbook(self, alert: str) -> str:
        return f"{self.runbook_base_url}#{alert.lower()}"


@lru_cache(maxsize=64)
def placeholders_of(selectors: Selectors, thresholds: Thresholds, durations: Durations) -> dict[str, str]:
    """`MixinConfig.placeholders()` of the config with these sections, computed once per distinct sections (the
    models are frozen, so they key the cache by value): every rule, annotation and panel of each deployment shape
    fills its templates from them. Callers must not change the dict."""
    return {**selectors.model_dump(), **{k: exact(v) for k, v in thresholds.model_dump().items()}, **durations.model_dump()}


def exact(value: float) -> str:
    """A number as PromQL and people read it: 10737418240, 0.05, never 1.07374e+10."""
    text = format(Decimal(repr(float(value))), "f")
    return text[:-2] if text.endswith(".0") else text


def load_mixin_config(path: str | Path | None) -> MixinConfig:
    """The defaults, or a YAML file's overrides of them; a ConfigError lists each problem with its key path
    (`cdcwatch.config.load_yaml_model`, the loader of every cdcwatch config file). `${...}` is taken as written."""
    return MixinConfig() if path is None else load_yaml_model(path, MixinConfig)
