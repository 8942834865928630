"""What the Helm chart (charts/cdcwatch) reads of the mixin: the rule groups of its PrometheusRule and the
dashboards of its ConfigMaps, written into the chart's `files/` (`.Files.Get`/`.Files.Glob` can read nothing
outside the chart), and the file provisioning provider for a Grafana that reads dashboards from disk."""

from __future__ import annotations

from typing import Any

from cdcwatch.mixin.config import MixinConfig

__all__ = ["CHART_DASHBOARDS_DIR", "CHART_RULES_FILE", "dashboard_provider"]

CHART_RULES_FILE = "charts/cdcwatch/files/cdcwatch.rules.yml"
"""The rule groups of the chart's PrometheusRule: the same text as alerts/cdcwatch.rules.yml."""
CHART_DASHBOARDS_DIR = "charts/cdcwatch/files/dashboards"
"""The dashboards of the chart's ConfigMaps, one ConfigMap per file: the same JSON as dashboards/."""


def dashboard_provider(config: MixinConfig) -> dict[str, Any]:
    """Grafana's provisioning/dashboards/*.yaml for the dashboards copied to `kubernetes.dashboards_path`."""
    k8s = config.kubernetes
    return {"apiVersion": 1, "providers": [
        {"name": "cdcwatch", "folder": k8s.dashboard_folder, "type": "file", "disableDeletion": True,
         "allowUiUpdates": False, "updateIntervalSeconds": 60, "options": {"path": k8s.dashboards_path}}]}
