"""The Grafana dashboards, one module per dashboard, linked to each other by the `cdcwatch` tag."""

from __future__ import annotations

import re
import warnings
from typing import Any

from cdcwatch.mixin.config import MixinConfig
from cdcwatch.mixin.dashboards.connect import CONNECT
from cdcwatch.mixin.dashboards.debezium import DEBEZIUM
from cdcwatch.mixin.dashboards.delta import DELTA
from cdcwatch.mixin.dashboards.kafka import KAFKA
from cdcwatch.mixin.dashboards.model import DashboardSpec, board_text, build, conditional_queries, deployed_rows, panel_queries
from cdcwatch.mixin.dashboards.overview import OVERVIEW
from cdcwatch.mixin.dashboards.reconcile import RECONCILE
from cdcwatch.mixin.dashboards.spark import SPARK

__all__ = ["DASHBOARDS", "build_dashboards", "conditional_exprs", "dashboard_files", "lint_exclusions", "panel_queries"]

DASHBOARDS: tuple[DashboardSpec, ...] = (OVERVIEW, DEBEZIUM, CONNECT, KAFKA, SPARK, DELTA, RECONCILE)


def build_dashboards(config: MixinConfig) -> dict[str, dict[str, Any]]:
    """File name → dashboard JSON model (the classic model every Grafana from 10 on imports; the SDK
    warns that it prefers its v2 resources, which older Grafanas cannot import)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return {f"{spec.uid}.json": build(spec, config) for spec in _deployed(config)}


def dashboard_files(config: MixinConfig) -> dict[str, str]:
    """File name → the text of `build_dashboards`'s model as the generator writes it (keys sorted, indented)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return {f"{spec.uid}.json": board_text(spec, config) for spec in _deployed(config)}


def _deployed(config: MixinConfig) -> list[DashboardSpec]:
    return [spec for spec in DASHBOARDS
            if (not spec.stage or spec.stage in config.stages.enabled()) and deployed_rows(spec, config)]


def conditional_exprs(config: MixinConfig) -> dict[str, str]:
    """Every dashboard query that is empty on a healthy pipeline → when it has series."""
    return {expr: when for spec in DASHBOARDS for expr, when in conditional_queries(spec, config).items()}


def lint_exclusions(config: MixinConfig) -> dict[str, Any]:
    """dashboard-linter's `.lint` for the dashboards' directory: its job and instance rules stand down for the
    panels that read only series keyed by server across collectors, or the firing alerts (they have neither label)."""
    from cdcwatch.mixin.alerts import RECORDING_RULES

    across = {r.record for r in RECORDING_RULES if r.pipeline} | {"ALERTS"}  # Prometheus' own: every alert's labels
    read: dict[tuple[str, str], set[str]] = {}
    for model in build_dashboards(config).values():
        for title, expr in panel_queries(model):
            read.setdefault((model["title"], title), set()).update(re.findall(r"([\w:]+)\{", expr))
    panels = [{"dashboard": board, "panel": title} for (board, title), names in read.items() if names and names <= across]
    if not panels:
        return {}
    return {"exclusions": {rule: {"entries": [dict(p) for p in panels]} for rule in ("target-job-rule", "target-instance-rule")}}
