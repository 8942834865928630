"""The same rules and dashboards as Kubernetes and Grafana provisioning objects: a PrometheusRule for the
Prometheus operator, one ConfigMap per dashboard for Grafana's dashboard sidecar, and a file
provisioning provider for a Grafana that reads dashboards from disk."""

from __future__ import annotations

import json
from typing import Any

from cdcwatch.mixin.config import MixinConfig
from cdcwatch.mixin.dashboards import build_dashboards
from cdcwatch.mixin.rules import rule_groups

__all__ = ["dashboard_config_maps", "dashboard_provider", "prometheus_rule"]


def prometheus_rule(config: MixinConfig) -> dict[str, Any]:
    k8s = config.kubernetes
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": "cdcwatch", "namespace": k8s.namespace, "labels": dict(k8s.rule_labels)},
            "spec": rule_groups(config)}


def dashboard_config_maps(config: MixinConfig) -> list[dict[str, Any]]:
    k8s = config.kubernetes
    return [{"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": f"cdcwatch-dashboard-{name.removesuffix('.json').removeprefix('cdcwatch-')}",
                          "namespace": k8s.namespace, "labels": {k8s.dashboard_label: "1"},
                          "annotations": {"grafana_folder": k8s.dashboard_folder}},
             "data": {name: json.dumps(model, indent=2, sort_keys=True) + "\n"}}
            for name, model in build_dashboards(config).items()]


def dashboard_provider(config: MixinConfig) -> dict[str, Any]:
    """Grafana's provisioning/dashboards/*.yaml for the dashboards copied to `kubernetes.dashboards_path`."""
    k8s = config.kubernetes
    return {"apiVersion": 1, "providers": [
        {"name": "cdcwatch", "folder": k8s.dashboard_folder, "type": "file", "disableDeletion": True,
         "allowUiUpdates": False, "updateIntervalSeconds": 60, "options": {"path": k8s.dashboards_path}}]}
