"""The canary collector's own logic on scripted sides: what each side's reading or failure exports, and its
configuration's checks. The reads themselves run on real PostgreSQL and MariaDB in tests/integration/test_canary.py."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import cast

import pytest

from cdcwatch.canary import CanaryCollector
from cdcwatch.config import CanaryConfig, ConfigError
from cdcwatch.tables.side import Side, SideError
from cdcwatch.validation import parse_config

SOURCE = {"engine": "postgres", "user": "u", "table": "public.cdc_canary"}
TARGET = {"engine": "mysql", "user": "u", "table": "sink.cdc_canary"}


class Table:
    """A side whose newest canary time is scripted: a number, None (no row) or an exception."""

    def __init__(self, newest: float | None | Exception) -> None:
        self.newest = newest
        self.closed = False

    def newest_time(self, column: str) -> float | None:
        if isinstance(self.newest, Exception):
            raise self.newest
        return self.newest

    def close(self) -> None:
        self.closed = True


def canary(**settings: object) -> CanaryConfig:
    return CanaryConfig.model_validate({"name": "shop-canary", "server": "shop", "interval_seconds": 10,
                                        "source": SOURCE, "target": TARGET, **settings})


def collector_of(sides: dict[str, Table]) -> CanaryCollector:
    return CanaryCollector(canary(), cast("dict[str, Side]", sides))


def samples(collector: CanaryCollector) -> dict[tuple[str, str | None], float]:
    return {(s.name, s.labels.get("side")): s.value for f in collector.collect().families for s in f.samples}


def test_both_sides_read_give_the_targets_age_the_sources_time_and_the_interval() -> None:
    now = time.time()
    collector = collector_of({"target": Table(now - 42), "source": Table(now - 3)})
    got = samples(collector)
    assert got[("cdcwatch_canary_target_timestamp_seconds", None)] == pytest.approx(now - 42)
    assert 42 <= got[("cdcwatch_canary_target_age_seconds", None)] < 42 + 5
    assert got[("cdcwatch_canary_source_timestamp_seconds", None)] == pytest.approx(now - 3)
    assert got[("cdcwatch_canary_interval_seconds", None)] == 10
    assert got[("cdcwatch_canary_readable", "target")] == 1 and got[("cdcwatch_canary_readable", "source")] == 1
    labels = {s.name: s.labels for f in collector.collect().families for s in f.samples}
    assert labels["cdcwatch_canary_target_age_seconds"] == {"target": "shop-canary", "server": "shop",
                                                            "topic": "shop.public.cdc_canary"}


def test_a_source_that_is_down_is_reported_beside_the_targets_reading() -> None:
    """A source down is the answer to why the target is stale: the target's reading stays, the source reads 0."""
    collector = collector_of({"target": Table(time.time() - 600),
                                           "source": Table(SideError("source", "connection refused"))})
    got = samples(collector)
    assert got[("cdcwatch_canary_readable", "source")] == 0
    assert got[("cdcwatch_canary_readable", "target")] == 1
    assert ("cdcwatch_canary_source_timestamp_seconds", None) not in got
    assert got[("cdcwatch_canary_target_age_seconds", None)] >= 600
    assert "source: connection refused" in collector.collect().summary


def test_a_target_without_a_canary_row_reads_unreadable_and_exports_no_age() -> None:
    collector = collector_of({"target": Table(None), "source": Table(time.time())})
    got = samples(collector)
    assert got[("cdcwatch_canary_readable", "target")] == 0
    assert ("cdcwatch_canary_target_age_seconds", None) not in got
    assert "no canary in the target yet" in collector.collect().summary


def test_every_side_failing_fails_the_collection_naming_both() -> None:
    collector = collector_of({"target": Table(SideError("target", "table sink.cdc_canary not found")),
                                           "source": Table(OSError("timed out"))})
    with pytest.raises(RuntimeError, match=r"target: table sink\.cdc_canary not found; source: timed out"):
        collector.collect()
    collector.close()
    assert all(side.closed for side in collector.sides.values())  # type: ignore[attr-defined]


def test_the_topic_defaults_to_debeziums_name_for_the_source_table() -> None:
    assert canary().kafka_topic == "shop.public.cdc_canary"
    assert canary(topic="canaries").kafka_topic == "canaries"
    assert canary(source=None).kafka_topic == ""


@pytest.mark.parametrize(("entry", "problem"), [
    ({"target": {**TARGET, "engine": "postgres", "table": None, "format": "apply"}, "source": None},
     "canary[0]: target: give table_id (the canary table as the Debezium event names it), or a source"),
    ({"source": {**SOURCE, "table": None, "format": "apply"}}, "canary[0]: source: format apply is a target format"),
    ({"interval_seconds": 0}, "canary[0].interval_seconds: must be greater than 0"),
    ({"labels": {"server": "x"}}, "canary[0].labels: label name 'server' is set by the canary collector"),
])
def test_a_bad_canary_is_named_with_what_to_do(entry: dict[str, object], problem: str) -> None:
    base = {"name": "c", "server": "shop", "interval_seconds": 10, "source": SOURCE, "target": TARGET}
    with pytest.raises(ConfigError) as error:
        parse_config(_yaml({**base, **entry}))
    assert any(line.startswith(problem) for line in error.value.problems), error.value.problems


def _yaml(entry: dict[str, object]) -> str:
    import yaml

    return yaml.safe_dump({"canary": [{k: v for k, v in entry.items() if v is not None}]})


def test_the_gate_takes_a_canary_or_a_url_not_both() -> None:
    pair = {"name": "p", "source": {**SOURCE, "table": "public.t"}, "target": {**TARGET, "table": "sink.t"}}
    both = {**pair, "freshness_url": "http://driver:4041/metrics", "freshness_canary": {"table": "sink.cdc_canary"}}
    with pytest.raises(ConfigError, match="give freshness_url or freshness_canary, not both"):
        parse_config(_yaml_pair(both))
    apply = {**pair, "target": {"engine": "postgres", "user": "u", "format": "apply"},
             "freshness_canary": {"table": "public.cdc_canary"}}
    with pytest.raises(ConfigError, match="give table_id with a target of format apply"):
        parse_config(_yaml_pair(apply))
    assert parse_config(_yaml_pair({**pair, "freshness_canary": {"table": "sink.cdc_canary"}})).reconcile


def _yaml_pair(pair: Mapping[str, object]) -> str:
    import yaml

    return yaml.safe_dump({"reconcile": [pair]})
