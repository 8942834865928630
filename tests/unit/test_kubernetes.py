"""The Kubernetes and Grafana provisioning outputs carry exactly the committed rules and dashboards."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import yaml

from cdcwatch.mixin import MixinConfig, render_files
from cdcwatch.mixin.generate import DASHBOARD_CONFIGMAPS_FILE, DASHBOARD_PROVIDER_FILE, PROMETHEUS_RULE_FILE, RULES_FILE
from tests.tools import tool

_FILES = render_files(MixinConfig.model_validate({"kubernetes": {"namespace": "cdc", "rule_labels": {"release": "kps"}}}))


def test_the_prometheus_rule_holds_the_rule_file_and_promtool_accepts_it(tmp_path: Path) -> None:
    rule = yaml.safe_load(_FILES[PROMETHEUS_RULE_FILE])
    assert rule["kind"] == "PrometheusRule" and rule["metadata"]["namespace"] == "cdc"
    assert rule["metadata"]["labels"] == {"release": "kps"}
    assert rule["spec"] == yaml.safe_load(_FILES[RULES_FILE])
    (tmp_path / "spec.yml").write_text(yaml.safe_dump(rule["spec"]))
    checked = subprocess.run([tool("promtool"), "check", "rules", str(tmp_path / "spec.yml")], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_one_labelled_config_map_per_dashboard_with_its_json() -> None:
    maps = [m for m in yaml.safe_load_all(_FILES[DASHBOARD_CONFIGMAPS_FILE]) if m]
    dashboards = {name.removeprefix("dashboards/"): text for name, text in _FILES.items()
                  if name.startswith("dashboards/") and name.endswith(".json")}
    assert {key for m in maps for key in m["data"]} == set(dashboards)
    for config_map in maps:
        metadata = config_map["metadata"]
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", metadata["name"]) and metadata["namespace"] == "cdc"
        assert metadata["labels"] == {"grafana_dashboard": "1"}
        ((name, text),) = config_map["data"].items()
        assert text == dashboards[name] and json.loads(text)["uid"] == name.removesuffix(".json")
        # kubectl apply keeps the whole object in an annotation, limited to 256 KiB
        assert len(json.dumps(config_map)) < 262144, name


def test_the_provisioning_provider_reads_the_dashboards_folder() -> None:
    (provider,) = yaml.safe_load(_FILES[DASHBOARD_PROVIDER_FILE])["providers"]
    config = MixinConfig()
    assert provider["type"] == "file" and provider["options"]["path"] == config.kubernetes.dashboards_path
    assert provider["folder"] == config.kubernetes.dashboard_folder

