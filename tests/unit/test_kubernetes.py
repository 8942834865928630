"""The Helm chart's copies of the mixin (charts/cdcwatch/files/, read by its PrometheusRule and dashboard
ConfigMaps) are exactly the generated rules and dashboards, and nothing else; and the Grafana file provisioning
provider reads the dashboards' folder. (tests/unit/test_chart.py checks what the chart makes of them.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from cdcwatch.mixin import RULES_FILE, MixinConfig, render_files
from cdcwatch.mixin.generate import DASHBOARD_PROVIDER_FILE
from cdcwatch.mixin.kubernetes import CHART_DASHBOARDS_DIR, CHART_RULES_FILE
from tests.tools import tool

ROOT = Path(__file__).resolve().parents[2]
_CONFIG = MixinConfig.model_validate({"thresholds": {"kafka_lag_seconds": 42}, "kubernetes": {"dashboard_folder": "cdc"}})
_FILES = render_files(_CONFIG)


def test_the_chart_rules_are_the_rule_file_and_promtool_accepts_them(tmp_path: Path) -> None:
    assert _FILES[CHART_RULES_FILE] == _FILES[RULES_FILE]
    assert "42" in _FILES[CHART_RULES_FILE]  # rendered from the given config, not copied from the defaults
    (tmp_path / "rules.yml").write_text(_FILES[CHART_RULES_FILE])
    checked = subprocess.run([tool("promtool"), "check", "rules", str(tmp_path / "rules.yml")], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_chart_dashboards_are_the_dashboards() -> None:
    dashboards = {name.removeprefix("dashboards/"): text for name, text in _FILES.items()
                  if name.startswith("dashboards/") and name.endswith(".json")}
    in_chart = {name.removeprefix(f"{CHART_DASHBOARDS_DIR}/"): text for name, text in _FILES.items()
                if name.startswith(f"{CHART_DASHBOARDS_DIR}/")}
    assert dashboards and in_chart == dashboards


def test_the_chart_holds_no_file_the_generator_does_not_write() -> None:
    """A dashboard the mixin dropped must leave the chart too (test_mixin checks the ones it writes)."""
    generated = {name for name in render_files(MixinConfig()) if name.startswith("charts/")}
    committed = {str(path.relative_to(ROOT)) for path in (ROOT / CHART_RULES_FILE).parent.rglob("*") if path.is_file()}
    assert committed == generated


def test_the_provisioning_provider_reads_the_dashboards_folder() -> None:
    (provider,) = yaml.safe_load(_FILES[DASHBOARD_PROVIDER_FILE])["providers"]
    assert provider["type"] == "file" and provider["options"]["path"] == _CONFIG.kubernetes.dashboards_path
    assert provider["folder"] == "cdc"
