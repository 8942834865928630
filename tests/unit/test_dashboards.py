"""Properties of the generated dashboards, checked on their JSON: descriptions, thresholds equal to the
alerts', runbook links, value mappings, variables with All, and rate() only over counters."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from cdcwatch.mixin import MixinConfig
from cdcwatch.mixin.alerts import ALERTS, RECORDING_RULES
from cdcwatch.mixin.config import Thresholds
from cdcwatch.mixin.dashboards import build_dashboards
from cdcwatch.mixin.preview import thresholds
from cdcwatch.reference import metric_types

_ALERTS = {a.name: a for a in ALERTS}
# every threshold moved off its default, so a hard-coded default cannot pass
_MOVED = MixinConfig.model_validate({"thresholds": {k: v * 3 + 1 for k, v in Thresholds().model_dump().items()}})


def _panels(config: MixinConfig | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, model in build_dashboards(config or MixinConfig()).items():
        for panel in model["panels"]:
            if panel["type"] != "row":
                yield name, panel


def _exprs(panel: dict[str, Any]) -> list[str]:
    return [target["expr"] for target in panel.get("targets", [])]


def test_every_panel_has_a_description_a_unit_and_a_query() -> None:
    for name, panel in _panels():
        assert panel.get("description") and panel["fieldConfig"]["defaults"].get("unit") and _exprs(panel), (name, panel["title"])


def _linked_alerts(panel: dict[str, Any], config: MixinConfig) -> list[str]:
    return [link["url"].split("#")[1] for link in panel.get("links", []) if link["url"].startswith(config.runbook_base_url)]


def test_every_threshold_is_the_one_its_alert_uses() -> None:
    """The first runbook link of a panel with a threshold is its alert; that alert's expression compares
    with exactly one configured threshold, and the panel draws exactly that value."""
    drawn = 0
    for name, panel in _panels(_MOVED):
        if not thresholds(panel):
            continue
        alert = next(a for a in ALERTS if a.name.lower() == _linked_alerts(panel, _MOVED)[0])
        used = [t for t in Thresholds.model_fields if f"%({t})s" in alert.expr]
        assert len(used) == 1 and thresholds(panel) == [getattr(_MOVED.thresholds, used[0])], (name, panel["title"])
        drawn += 1
    assert drawn >= 10


def test_runbook_links_point_at_alerts() -> None:
    anchors = {a.name.lower() for a in ALERTS}
    config = MixinConfig()
    for name, panel in _panels(config):
        for link in panel.get("links", []):
            assert link["url"].startswith(config.runbook_base_url + "#") and link["url"].split("#")[1] in anchors, (name, link)


def test_connected_shows_disconnected_in_red() -> None:
    panels = [p for _, p in _panels() if any("cdcwatch_debezium_connected" in e for e in _exprs(p))]
    assert panels
    for panel in panels:
        options = [m["options"] for m in panel["fieldConfig"]["defaults"]["mappings"]]
        assert {"text": "disconnected", "color": "red", "index": 0} in [o.get("0") for o in options], panel["title"]


def test_every_variable_offers_all_and_several_values() -> None:
    for name, model in build_dashboards(MixinConfig()).items():
        variables = [v for v in model["templating"]["list"] if v["type"] == "query"]
        assert {"job", "instance"} <= {v["name"] for v in variables}, name
        assert all(v["includeAll"] and v["multi"] for v in variables), name


def _recorded_types() -> dict[str, str]:
    """Recording rules are gauges (a rate, a max, a ratio)."""
    return {r.record: "gauge" for r in RECORDING_RULES}


def test_rate_only_over_counters_and_deriv_only_over_gauges() -> None:
    types = {**metric_types(), **_recorded_types(), "cdcwatch_spark_batch_duration_seconds_bucket": "counter"}
    checked = 0
    for name, panel in _panels():
        for expr in _exprs(panel):
            for function, metric in re.findall(r"\b(rate|irate|increase|deriv)\(\s*([a-zA-Z_:][\w:]*)", expr):
                wanted = "gauge" if function == "deriv" else "counter"
                assert types[metric] == wanted, (name, panel["title"], f"{function}({metric}) over a {types[metric]}")
                checked += 1
    assert checked >= 10


def test_every_query_is_scoped_by_the_job_and_instance_variables() -> None:
    """Except series keyed by server across collectors (they have no job or instance): $server scopes them."""
    across = {r.record for r in RECORDING_RULES if r.pipeline}
    for name, panel in _panels():
        for expr in _exprs(panel):
            for selector in re.findall(r"[\w:]+\{[^}]*\}", expr):
                if selector.split("{")[0] in across:
                    assert 'server=~"$server"' in selector, (name, panel["title"], selector)
                    continue
                assert 'job=~"$job"' in selector and 'instance=~"$instance"' in selector, (name, panel["title"], selector)
