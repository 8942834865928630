"""The generated rules and dashboards: no drift from the committed files, promtool-valid and tested,
complete annotations, a runbook section per alert, and only metrics cdcwatch really produces."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cdcwatch.mixin import RULES_FILE, RULES_TEST_FILE, MixinConfig, load_mixin_config, render_files
from cdcwatch.mixin.dashboards import build_dashboards, panel_queries
from cdcwatch.mixin.rules import ALERTS, RECORDING_RULES, render_annotation, rule_groups
from cdcwatch.reference import metrics_reference
from spark_listeners.metrics import SparkMetrics

ROOT = Path(__file__).resolve().parents[2]
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool comes with scripts/setup.sh")


def test_committed_files_are_what_the_generator_writes() -> None:
    for relative, content in render_files(MixinConfig()).items():
        path = ROOT / relative
        assert path.exists(), f"{relative} is missing: run `cdcwatch mixin generate`"
        assert path.read_text(encoding="utf-8") == content, f"{relative} drifted: run `cdcwatch mixin generate`"


@needs_promtool
def test_promtool_checks_and_tests_every_rule() -> None:
    checked = subprocess.run([PROMTOOL, "check", "rules", str(ROOT / RULES_FILE)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run([PROMTOOL, "test", "rules", str(ROOT / RULES_TEST_FILE)], capture_output=True, text=True)
    assert tested.returncode == 0, tested.stdout + tested.stderr


@needs_promtool
def test_promtool_tests_fail_when_a_threshold_moves(tmp_path: Path) -> None:
    """The rule tests can fail: with a higher threshold the lag example no longer fires."""
    files = render_files(MixinConfig())
    moved = MixinConfig.model_validate({"thresholds": {"kafka_lag_seconds": 10_000}})
    (tmp_path / Path(RULES_FILE).name).write_text(render_files(moved)[RULES_FILE])
    (tmp_path / "test.yml").write_text(files[RULES_TEST_FILE])
    tested = subprocess.run([PROMTOOL, "test", "rules", str(tmp_path / "test.yml")], capture_output=True, text=True)
    assert tested.returncode != 0 and "CdcKafkaConsumerLagHigh" in tested.stdout + tested.stderr


def test_every_alert_is_complete_and_has_a_runbook_section() -> None:
    runbook = (ROOT / "docs" / "runbook.md").read_text(encoding="utf-8")
    anchors = {re.sub(r"[^a-z0-9]", "", line[3:].lower()) for line in runbook.splitlines() if line.startswith("## ")}
    for rule in rule_groups(MixinConfig())["groups"][1]["rules"]:
        assert rule["for"] and rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        assert {"summary", "description", "runbook_url"} <= set(rule["annotations"]), rule["alert"]
        assert rule["alert"].lower() in anchors, f"docs/runbook.md has no section for {rule['alert']}"


def test_each_example_fires_and_is_quiet_on_different_series() -> None:
    for alert in ALERTS:
        assert alert.example.fires and alert.example.quiet and alert.example.fires != alert.example.quiet, alert.name


def test_annotation_rendering() -> None:
    assert render_annotation('{{ $labels.server }} is {{ $value | printf "%.0f" }}s', {"server": "a"}, 12.6) == "a is 13s"
    assert render_annotation('{{ $value | printf "%.2f" }}', {}, 0.1) == "0.10"


def _produced_metrics() -> set[str]:
    names = set(re.findall(r"`(cdcwatch_[a-z0-9_]+)`", metrics_reference()))
    for family in SparkMetrics().collect():
        names.add(family.name + ("_total" if family.type == "counter" else ""))
        if family.type == "histogram":
            names |= {family.name + suffix for suffix in ("_bucket", "_sum", "_count")}
    return names


def test_rules_and_dashboards_use_only_metrics_cdcwatch_produces() -> None:
    produced = _produced_metrics() | {r.record for r in RECORDING_RULES}
    expressions = [r.expr(MixinConfig()) for r in RECORDING_RULES] + [a.expr(MixinConfig()) for a in ALERTS]
    expressions += [expr for model in build_dashboards(MixinConfig()).values() for _, expr in panel_queries(model)]
    used = {name for expr in expressions for name in re.findall(r"\b((?:[a-z_]+:)?cdcwatch_[a-z0-9_]+(?::[a-z0-9_]+)?)", expr)}
    assert used, "no metric found: the pattern is wrong"
    assert used <= produced, sorted(used - produced)


def test_dashboards_have_variables_units_and_links() -> None:
    for name, model in build_dashboards(MixinConfig()).items():
        variables = [v["name"] for v in model["templating"]["list"]]
        assert variables[0] == "datasource" and len(variables) >= 2, name
        assert model["links"] and model["links"][0]["tags"] == ["cdcwatch"], name
        for panel in model["panels"]:
            if panel["type"] != "row":
                assert panel["fieldConfig"]["defaults"]["unit"], (name, panel["title"])
                assert panel["datasource"]["uid"] == "${datasource}"
    overview = build_dashboards(MixinConfig())["cdcwatch-overview.json"]
    assert overview["panels"][0]["title"] == "End to end" and "Freshness" in overview["panels"][1]["title"]


def test_selectors_and_thresholds_come_from_the_config(tmp_path: Path) -> None:
    path = tmp_path / "mixin.yml"
    path.write_text("selectors: {cdcwatch: 'job=\"cdc\"'}\nthresholds: {spark_freshness_seconds: 42}\n")
    config = load_mixin_config(path)
    rules = render_files(config)[RULES_FILE]
    assert 'cdcwatch_up{job="cdc"} == 0' in rules and "cdcwatch_spark_freshness_seconds" in rules and "> 42" in rules


@pytest.mark.parametrize("text, error", [
    ("thresholds: {nope: 1}\n", "thresholds.nope"),
    ("thresholds: {kafka_lag_seconds: lots}\n", "thresholds.kafka_lag_seconds"),
    ("selectors: [\n", "not YAML"),
])
def test_bad_mixin_config_names_the_problem(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "mixin.yml"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(error)):
        load_mixin_config(path)
