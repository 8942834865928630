"""The one configuration the alert rules and dashboards are generated from: selectors, thresholds, `for`s."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["MixinConfig", "Selectors", "load_mixin_config"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Selectors(_Strict):
    """PromQL label matchers (without braces) that pick cdcwatch's series out of a Prometheus."""

    cdcwatch: str = 'job="cdcwatch"'
    """The exporter (`cdcwatch serve`)."""
    spark: str = 'job="cdcwatch-spark"'
    """The Spark listener's /metrics in the apply job's driver."""


class Thresholds(_Strict):
    debezium_lag_seconds: float = 60
    debezium_queue_free_ratio: float = 0.1
    snapshot_max_seconds: float = 6 * 3600
    kafka_lag_seconds: float = 300
    kafka_data_age_seconds: float = 3600
    spark_apply_lag_seconds: float = 120
    spark_freshness_seconds: float = 300
    spark_duplicates_ratio: float = 0.05
    spark_progress_max_age_seconds: float = 300
    slot_retained_wal_bytes: float = 10 * 1024**3
    scrape_duration_seconds: float = 5


class Durations(_Strict):
    """`for` of the alerts, by urgency: `critical` for outages, `warning` for degradation."""

    critical: str = "2m"
    warning: str = "10m"
    instant: str = "1m"
    """For one-off events (a rewind, erroneous events, an aborted snapshot)."""


class MixinConfig(_Strict):
    selectors: Selectors = Field(default_factory=Selectors)
    thresholds: Thresholds = Field(default_factory=Thresholds)
    durations: Durations = Field(default_factory=Durations)
    runbook_url: str = "docs/runbook.md"
    """Where the runbook lives; each alert links to `<runbook_url>#<alert name in lower case>`."""
    datasource_uid: str = "${datasource}"


def load_mixin_config(path: str | Path | None) -> MixinConfig:
    """The defaults, or a YAML file's overrides of them; a clear ValueError names what is wrong."""
    if path is None:
        return MixinConfig()
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        return MixinConfig.model_validate(data)
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not YAML: {exc}") from None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"{path}: {problems}") from None
