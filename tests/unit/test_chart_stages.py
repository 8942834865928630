"""The chart's `stages`: the PrometheusRule, the inhibitions and the dashboards `helm template` renders for a
deployment shape are what the mixin generates for the same stages (and selectors, runbook and Grafana addresses),
the rules pass that shape's promtool tests as the chart rendered them, and a stage left at `auto` follows what the
chart deploys, so a part of the pipeline that is not there cannot page."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdcwatch.mixin import MixinConfig
from cdcwatch.mixin.dashboards import build_dashboards
from cdcwatch.mixin.generate import _HEADER, rules_yaml
from cdcwatch.mixin.inhibit import inhibit_yaml
from cdcwatch.mixin.rules import promtool_tests
from cdcwatch.mixin.stages import STAGES
from tests.tools import tool
from tests.unit.test_chart import CHART, EXAMPLES, of_kind, rendered
from tests.unit.test_mixin import LITERAL_SHAPES, SHAPES, Outcome, RuleFile, _failures, _promtool_tests_run, _unproven

pytestmark = pytest.mark.chart

TARGET = {"postgres": [{"name": "db"}]}
"""One target: the chart renders nothing without one."""
MYSQL_ALONE = {stage: stage in ("debezium", "connect_rest", "connect_jmx", "mysql") for stage in STAGES}
"""test_mixin's MySQL-alone case (Debezium on MySQL, neither PostgreSQL, Kafka nor Spark)."""
CHART_SHAPES: dict[str, dict[str, bool]] = {
    **{name: {stage: shape.get(stage, True) for stage in STAGES} for name, shape in {**SHAPES, **LITERAL_SHAPES}.items()},
    "MySQL alone": MYSQL_ALONE,
    "nothing": dict.fromkeys(STAGES, False),
}
"""The shapes test_mixin proves (its named shapes and every stage left out once), its MySQL-alone case, and no stage:
every stage on and off."""


def test_every_stage_is_on_and_off_in_some_shape() -> None:
    assert {(stage, shape[stage]) for shape in CHART_SHAPES.values() for stage in STAGES} == \
        {(stage, on) for stage in STAGES for on in (True, False)}


def values(stages: dict[str, bool], **more: Any) -> str:
    return json.dumps({"config": TARGET, "stages": stages, **more})


def mixin(stages: dict[str, bool], **more: Any) -> MixinConfig:
    return MixinConfig.model_validate({"stages": stages, **more})


def chart_rules(objects: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    (rule,) = of_kind(objects, "PrometheusRule")
    return dict(rule["spec"])


def chart_inhibitions(objects: tuple[dict[str, Any], ...]) -> str:
    (config_map,) = [m for m in of_kind(objects, "ConfigMap") if "cdcwatch-inhibit.yml" in m["data"]]
    return str(config_map["data"]["cdcwatch-inhibit.yml"])


def chart_dashboards(objects: tuple[dict[str, Any], ...]) -> dict[str, str]:
    return {name: text for m in of_kind(objects, "ConfigMap") if m["metadata"]["name"].count("-dashboard-")
            for name, text in m["data"].items()}


def mixin_dashboards(config: MixinConfig) -> dict[str, str]:
    return {name: json.dumps(model, indent=2, sort_keys=True) + "\n" for name, model in build_dashboards(config).items()}


@pytest.mark.parametrize("shape", CHART_SHAPES)
def test_the_chart_carries_what_the_mixin_generates_for_the_shape(shape: str) -> None:
    stages = CHART_SHAPES[shape]
    objects = rendered(values(stages))
    config = mixin(stages)
    assert chart_rules(objects) == yaml.safe_load(rules_yaml(config))
    assert chart_inhibitions(objects) == inhibit_yaml(config, _HEADER)
    assert chart_dashboards(objects) == mixin_dashboards(config)
    (rule,) = of_kind(objects, "PrometheusRule")
    assert rule["metadata"]["annotations"]["cdcwatch.io/stages"] == ",".join(s for s in STAGES if stages[s])


def test_selectors_runbook_and_grafana_addresses_reach_rules_and_dashboards_as_the_mixin_writes_them() -> None:
    stages = CHART_SHAPES["no spark"]
    objects = rendered(values(stages, jobs={"exporter": "cdc-exporter", "spark": "cdc-spark"},
                              prometheusRule={"runbookBaseUrl": "https://docs.example.com/cdcwatch/runbook/",
                                              "grafanaUrl": "https://grafana.example.com/"}))
    config = mixin(stages, selectors={"cdcwatch": 'job="cdc-exporter"', "spark": 'job="cdc-spark"'},
                   runbook_base_url="https://docs.example.com/cdcwatch/runbook/", grafana_url="https://grafana.example.com")
    assert chart_rules(objects) == yaml.safe_load(rules_yaml(config))
    assert chart_dashboards(objects) == mixin_dashboards(config)
    assert "runbook.md" not in json.dumps(chart_dashboards(objects))


def test_promtool_passes_each_shapes_tests_on_the_rules_the_chart_rendered(tmp_path: Path) -> None:
    """Each shape's generated promtool test file, run on the chart's PrometheusRule of that shape, in one promtool
    run; a check whose outcome exactly the same check, rules (the chart's) and series decide is run once (test_mixin's
    `_unproven`), each test on the rules that can take part in its outcome (test_mixin's `_seeing`)."""
    proven: set[Outcome] = set()
    suites = []
    for shape, stages in CHART_SHAPES.items():
        rules = RuleFile(chart_rules(rendered(values(stages)))["groups"])
        if (tests := _unproven(promtool_tests(mixin(stages), "rules.yml"), rules, proven))["tests"]:
            suites.append((shape, rules, tests))
    assert len(suites) > 1 and suites[0][0] == "everything" and len(suites[0][2]["tests"]) > 100
    tested = _promtool_tests_run(tmp_path, suites)
    assert tested.returncode == 0, _failures(tested)


def stages_of(objects: tuple[dict[str, Any], ...]) -> set[str]:
    (rule,) = of_kind(objects, "PrometheusRule")
    return set(filter(None, rule["metadata"]["annotations"]["cdcwatch.io/stages"].split(",")))


@pytest.mark.parametrize(("chart_values", "expected"), [
    ({"config": {"kafka": [{"name": "k", "bootstrap_servers": "b:9092"}]}}, {"kafka"}),
    ({"config": {"connect": [{"name": "c", "url": "http://c:8083"}]}}, {"connect_rest"}),
    ({"config": {"connect": [{"name": "c", "url": "http://c:8083", "jmx": {"host": "c", "port": 9999}}]}},
     {"connect_rest", "connect_jmx"}),
    ({"config": {"debezium": [{"name": "d", "jmx": {"host": "d", "port": 9999}}], "mysql": [{"name": "m", "user": "u"}]}},
     {"debezium", "mysql"}),
    ({"config": TARGET, "podMonitor": {"enabled": True}}, {"postgres", "spark"}),
    ({"config": {"reconcile": [{"name": "r", "source": {"engine": "postgres", "user": "u", "table": "s.t"},
                                "target": {"engine": "postgres", "user": "u", "format": "apply"}}]}}, {"reconcile"}),
    ({"config": TARGET, "stages": {"spark": True, "postgres": False}}, {"spark"}),
    ({"config": TARGET, "podMonitor": {"enabled": True}, "stages": {"spark": False}}, {"postgres"}),
], ids=["kafka", "connect", "connect-jmx", "debezium-mysql", "podmonitor", "reconcile", "spark-forced", "spark-off"])
def test_auto_stages_follow_what_the_chart_deploys(chart_values: dict[str, Any], expected: set[str]) -> None:
    assert stages_of(rendered(json.dumps(chart_values))) == expected


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_a_cluster_without_spark_gets_no_spark_alert_and_no_spark_board(example: Path) -> None:
    """Each example without the Spark drivers' PodMonitor (values-cluster.yaml's Spark job left out)."""
    objects = rendered(str(example), '{"podMonitor": {"enabled": false}}')
    assert "spark" not in stages_of(objects)
    alerts = [r["alert"] for g in chart_rules(objects)["groups"] for r in g["rules"] if "alert" in r]
    assert alerts and not [a for a in alerts if "Spark" in a]
    assert "CdcSparkDriverAbsent" not in chart_inhibitions(objects)
    boards = chart_dashboards(objects)
    assert boards and "cdcwatch-spark.json" not in boards and "cdcwatch_spark" not in json.dumps(boards)
    with_spark = rendered(str(example), '{"podMonitor": {"enabled": true}}')
    assert "CdcSparkDriverAbsent" in json.dumps(chart_rules(with_spark)) and "cdcwatch-spark.json" in chart_dashboards(with_spark)


def test_values_yaml_lists_every_stage_at_auto() -> None:
    assert yaml.safe_load((CHART / "values.yaml").read_text())["stages"] == dict.fromkeys(STAGES, "auto")


OVERRIDES = {"disabled": {"CdcSparkDriverAbsent": True}, "additionalRuleLabels": {"team": "data"},
             "customRules": {"CdcPostgresSlotInactive": {"for": "45m", "severity": "critical", "labels": {"tier": "1"}}}}
"""kube-prometheus-stack's overrides: an alert left out, a label on every alert, one alert's `for`, severity and
labels."""
SLOT_INACTIVE = 'cdcwatch_postgres_replication_slot_active{job="cdcwatch",instance="e:1",target="pg",slot="s",server="inventory"}'


def overridden(rule: dict[str, Any]) -> dict[str, Any] | None:
    """What OVERRIDES make of a generated rule (None: left out), said of each rule for the test."""
    if "record" in rule:
        return rule  # a recording rule keeps its labels: the alerts join on its series
    if rule["alert"] == "CdcSparkDriverAbsent":
        return None
    rule = {**rule, "labels": {**rule["labels"], "team": "data"}}
    if rule["alert"] == "CdcPostgresSlotInactive":
        assert rule["for"] == "10m" and "for 10m" in rule["annotations"]["description"]
        rule |= {"for": "45m", "labels": {**rule["labels"], "severity": "critical", "tier": "1"},
                 "annotations": {**rule["annotations"],
                                 "description": rule["annotations"]["description"].replace("for 10m", "for 45m")}}
    return rule


def test_rule_overrides_reach_only_their_alerts_and_prometheus_evaluates_them(tmp_path: Path) -> None:
    stages = CHART_SHAPES["everything"]
    spec = chart_rules(rendered(values(stages, prometheusRule=OVERRIDES)))
    generated = yaml.safe_load(rules_yaml(mixin(stages)))
    assert spec == {"groups": [{**group, "rules": [r for r in map(overridden, group["rules"]) if r is not None]}
                               for group in generated["groups"]]}
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(spec))
    checked = subprocess.run([tool("promtool"), "check", "rules", str(tmp_path / "rules.yml")], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # the slot without a consumer: not yet a page at 44 minutes, a page with the added labels at 46
    alert = {"exp_labels": {"job": "cdcwatch", "instance": "e:1", "target": "pg", "slot": "s", "server": "inventory",
                            "severity": "critical", "team": "data", "tier": "1"},
             "exp_annotations": {
                 "summary": "Replication slot s has no consumer",
                 "description": "Nobody has read slot s (server inventory) for 45m; it keeps WAL on the database's disk "
                                "until its connector comes back.",
                 "runbook_url": "docs/runbook.md#cdcpostgresslotinactive",
                 "dashboard_url": "/d/cdcwatch-overview?var-job=cdcwatch&var-instance=e:1&var-server=inventory"}}
    (tmp_path / "test.yml").write_text(yaml.safe_dump({"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": [{"series": SLOT_INACTIVE, "values": "0x60"}],
        "alert_rule_test": [{"eval_time": "44m", "alertname": "CdcPostgresSlotInactive", "exp_alerts": []},
                            {"eval_time": "46m", "alertname": "CdcPostgresSlotInactive", "exp_alerts": [alert]}]}]}))
    tested = subprocess.run([tool("promtool"), "test", "rules", str(tmp_path / "test.yml")], capture_output=True, text=True)
    assert tested.returncode == 0, tested.stdout + tested.stderr
