"""Properties of the generated dashboards, checked on their JSON: descriptions, thresholds equal to the
alerts', runbook links, value mappings, variables with All, and rate() only over counters."""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdcwatch.mixin import MixinConfig, load_mixin_config
from cdcwatch.mixin.alerts import ALERTS, RECORDING_RULES
from cdcwatch.mixin.config import Thresholds
from cdcwatch.mixin.dashboards import DASHBOARDS, build_dashboards, panel_queries
from cdcwatch.mixin.dashboards.model import (
    CONNECT_STATES,
    FRESHNESS,
    QUERY_STATES,
    SCHEMA_HISTORY_STATES,
    SNAPSHOT_STATES,
    STATUS,
    board_placeholders,
)
from cdcwatch.mixin.preview import thresholds
from cdcwatch.mixin.stages import STAGES
from cdcwatch.reference import metric_types
from tests.tools import ROOT

pytestmark = pytest.mark.dashboards  # builds the dashboards (the dashboards extra): the main suite runs them

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
    across = {r.record for r in RECORDING_RULES if r.pipeline} | {"ALERTS"}
    for name, panel in _panels():
        for expr in _exprs(panel):
            for selector in re.findall(r"[\w:]+\{[^}]*\}", expr):
                if selector.startswith("ALERTS{"):
                    continue
                if selector.split("{")[0] in across:
                    assert 'server=~"$server"' in selector, (name, panel["title"], selector)
                    continue
                assert 'job=~"$job"' in selector and 'instance=~"$instance"' in selector, (name, panel["title"], selector)


_FIRST_SCREEN_ROWS = 24
"""Grid rows Grafana shows at 1920×1080 without scrolling (30 px a row)."""


def _first_screen(model: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in model["panels"] if p["type"] != "row" and p["gridPos"]["y"] + p["gridPos"]["h"] <= _FIRST_SCREEN_ROWS]


def test_the_overview_first_screen_is_at_most_eight_large_tiles_answering_where_it_is_stuck() -> None:
    for shape in ({}, {"spark": False}, {"spark": False, "canary": False}):
        model = build_dashboards(MixinConfig.model_validate({"stages": shape}))["cdcwatch-overview.json"]
        tiles = _first_screen(model)
        assert 1 <= len(tiles) <= 8 and all(p["type"] == "stat" and p["gridPos"]["w"] >= 6 for p in tiles), \
            [(p["title"], p["gridPos"]) for p in tiles]
        read = " ".join(e for p in tiles for e in _exprs(p))
        for needed in ("server_stage:cdcwatch_freshness:code", "cdcwatch_connect_task_state", "cdcwatch_debezium_connected",
                       "cdcwatch_kafka_consumergroup_topic_status", "runway_seconds", "cdcwatch_up", "ALERTS{"):
            assert needed in read, (shape, needed)
        # the target's freshness: the listener's, else the canary's, else the age of the newest change in Kafka
        assert ("cdcwatch_spark_freshness_seconds" in read) == (not shape), shape
        assert ("cdcwatch_canary_target_age_seconds" in read) == ("canary" not in shape), shape
        assert ("cdcwatch_kafka_newest_source_commit_timestamp_seconds" in read) == ("canary" in shape), shape
    assert "top to bottom" in model["description"] and "left to right" not in model["description"]


def test_counts_that_should_be_zero_read_zero_in_green_never_no_data() -> None:
    model = build_dashboards(MixinConfig())["cdcwatch-overview.json"]
    for title in ("Connect tasks not RUNNING", "Exporter targets down", "Firing CDC alerts"):
        panel = next(p for p in model["panels"] if p["title"] == title)
        assert all(e.endswith(" or vector(0)") for e in _exprs(panel)), title
        mappings = panel["fieldConfig"]["defaults"]["mappings"]
        assert mappings[0]["options"]["0"]["color"] == "green" and mappings[1]["options"]["result"]["color"] == "red", title


def test_panel_widths_follow_their_content() -> None:
    """No panel squeezed below a quarter of the screen, none past its right edge, graphs at least half of it."""
    for name, panel in _panels():
        width = panel["gridPos"]["w"]
        assert 6 <= width and panel["gridPos"]["x"] + width <= 24, (name, panel["title"], panel["gridPos"])
        if panel["type"] in ("timeseries", "heatmap", "state-timeline", "table"):
            assert width >= 12, (name, panel["title"])


_STATES = {"cdcwatch_connect_connector_state": CONNECT_STATES, "cdcwatch_connect_task_state": CONNECT_STATES,
           "cdcwatch_debezium_snapshot_state": SNAPSHOT_STATES, "cdcwatch_debezium_schema_history_state": SCHEMA_HISTORY_STATES,
           "cdcwatch_spark_query_state": QUERY_STATES, "cdcwatch_kafka_consumergroup_topic_status": STATUS,
           "server_stage:cdcwatch_freshness:code": FRESHNESS}


def test_every_state_shows_its_latest_value_as_a_word_on_its_colour() -> None:
    """Every panel showing a state (not counting one) maps each of its codes to the state's word and colour, and a
    tile reads the latest value (an instant query), never one tile per state held in the time range."""
    shown = set()
    for name, panel in _panels():
        for expr in _exprs(panel):
            metric = next((m for m in _STATES if f"{m}{{" in expr), None)
            if metric is None or expr.startswith("count("):
                continue
            mappings = {code: (result.get("text"), result.get("color")) for m in panel["fieldConfig"]["defaults"]["mappings"]
                        for code, result in m["options"].items()}
            assert mappings == {str(s.value): (s.text, s.color) for s in _STATES[metric]}, (name, panel["title"])
            if panel["type"] == "stat":
                assert all(t.get("instant") and not t.get("range") for t in panel["targets"]), (name, panel["title"])
            shown.add(metric)
    assert shown == set(_STATES)
    words = {s.text: s.color for s in CONNECT_STATES}
    assert words["FAILED"] == "red" and words["PAUSED"] == words["UNASSIGNED"] == "orange" and words["RUNNING"] == "green"


def test_variables_of_a_label_that_may_be_empty_match_it_with_all() -> None:
    """A replication slot without a server, a group on no change topic: "All" must not hide them."""
    for name, model in build_dashboards(MixinConfig()).items():
        for variable in (v for v in model["templating"]["list"] if v["type"] == "query"):
            assert variable["allValue"] == (".+" if variable["name"] in ("job", "instance") else ".*"), (name, variable["name"])


def test_task_restarts_read_the_same_on_every_board() -> None:
    restarts = [(name, p["title"], e) for name, p in _panels() for e in _exprs(p) if "cdcwatch_connect_task_restarts_total" in e]
    assert {name for name, _, _ in restarts} == {"cdcwatch-overview.json", "cdcwatch-connect.json"}
    unscoped = {re.sub(r"\{[^}]*\}", "{}", e) for _, _, e in restarts}  # each board's own selector aside
    assert {title for _, title, _ in restarts} == {"Task restarts in 30 minutes"} and unscoped == {
        "sum by (connector, task) (round(increase(cdcwatch_connect_task_restarts_total{}[30m])))"}, restarts


_SHAPES = {"everything": {}, **{f"no {stage}": {stage: False} for stage in STAGES}}
"""Every stage left out once: the placeholders that list a deployment's series (`server_series`) change with it."""


def _board_files() -> dict[str, Path]:
    """Dashboard uid → the module it is written in (cdcwatch/mixin/dashboards/<board>.py)."""
    return {spec.uid: Path(next(m.__file__ for m in list(sys.modules.values())
                                if m.__name__.startswith("cdcwatch.mixin.dashboards.") and spec in vars(m).values()))
            for spec in DASHBOARDS}


@pytest.mark.parametrize("config", [*_SHAPES, "mixin-valid.yaml"])
def test_every_panel_query_is_one_literal_block_of_its_board_file(config: str) -> None:
    """Grepping a metric's name in cdcwatch/mixin finds the whole query of each panel reading it: each query the
    generator writes (for each deployment shape, and for other selectors) is, its placeholders filled, verbatim in
    its board's module (at the indentation of the code around it)."""
    mixin = (load_mixin_config(ROOT / "tests" / "conffiles" / config) if config.endswith(".yaml")
             else MixinConfig.model_validate({"stages": _SHAPES[config]}))
    values = board_placeholders(mixin)
    files = _board_files()
    checked = 0
    for model in build_dashboards(mixin).values():
        source = files[model["uid"]].read_text(encoding="utf-8")
        filled = re.sub(r"%\((\w+)\)s", lambda m: values.get(m[1], m[0]), source)
        for title, expr in panel_queries(model):
            assert any(textwrap.indent(expr, " " * n) in filled for n in range(0, 81)), (
                f"{model['uid']}: a query of {title!r} is not written in {files[model['uid']].name} as the dashboard has it")
            checked += 1
    assert checked >= 50
