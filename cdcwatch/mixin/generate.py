"""Renders the committed outputs: `alerts/` (rules and their promtool tests), `alertmanager/` (inhibitions),
`dashboards/` (JSON and a Grafana provisioning provider), the Helm chart's `charts/cdcwatch/files/` (the same
rules, inhibitions and dashboards for each combination of stages its values choose) and its values schema's
generated parts, and the documentation's references (configuration, mixin configuration, metrics).
`cdcwatch mixin generate` is the one command writing them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from cdcwatch.mixin.chart_readme import chart_readme
from cdcwatch.mixin.config import MixinConfig
from cdcwatch.mixin.config_page import MIXIN_DOCS_PAGES
from cdcwatch.mixin.inhibit import inhibit_yaml
from cdcwatch.mixin.kubernetes import CHART_DASHBOARDS_DIR, CHART_RULES_FILE, chart_files, dashboard_provider
from cdcwatch.mixin.rules import promtool_tests, rule_groups
from cdcwatch.mixin.yaml_text import HEADER, to_yaml
from cdcwatch.reference import DOCS_PAGES

__all__ = ["CHART_DASHBOARDS_DIR", "CHART_RULES_FILE", "DASHBOARD_LINT_FILE", "DASHBOARD_PROVIDER_FILE", "DOCS_DIR",
           "INHIBIT_FILE", "RULES_FILE", "RULES_TEST_FILE", "render_files", "rules_yaml", "to_yaml",
           "write_files"]

RULES_FILE = "alerts/cdcwatch.rules.yml"
RULES_TEST_FILE = "alerts/cdcwatch.rules.test.yml"
INHIBIT_FILE = "alertmanager/cdcwatch-inhibit.yml"
DASHBOARD_PROVIDER_FILE = "dashboards/provisioning/cdcwatch.yaml"
DASHBOARD_LINT_FILE = "dashboards/.lint"
"""dashboard-linter's configuration of the dashboards' directory (it reads it from there)."""
DOCS_DIR = "docs"
"""The documentation site's pages (the repository's): its generated references are `DOCS_PAGES`."""
_HEADER = HEADER


def rules_yaml(config: MixinConfig) -> str:
    return to_yaml(rule_groups(config))


def render_files(config: MixinConfig) -> Mapping[str, str]:
    """Path (relative to the repository) → content; the chart's (`chart_files`) rendered once read."""
    from cdcwatch.mixin.dashboards import dashboard_files, lint_exclusions  # the dashboards extra's SDK

    rules = rules_yaml(config)
    files = {RULES_FILE: rules,
             RULES_TEST_FILE: to_yaml(promtool_tests(config, Path(RULES_FILE).name)),
             INHIBIT_FILE: inhibit_yaml(config, _HEADER),
             DASHBOARD_PROVIDER_FILE: to_yaml(dashboard_provider(config))}
    if exclusions := lint_exclusions(config):
        files[DASHBOARD_LINT_FILE] = to_yaml(exclusions)
    for name, text in dashboard_files(config).items():
        files[f"dashboards/{name}"] = text
    return chart_files(config, files)


CHART_DIR = Path("charts/cdcwatch")
CHART_README_FILE = CHART_DIR / "README.md"


def write_files(config: MixinConfig, root: Path) -> list[Path]:
    """Write the rendered rules, inhibitions and dashboards under `root`; where `root` holds the chart
    (`charts/cdcwatch/Chart.yaml`: the repository, or a copy of the chart) the chart's files too, and where it has a
    docs/ folder the generated reference pages: a directory of your own gets only what you deploy."""
    written = []
    chart = (root / CHART_DIR / "Chart.yaml").is_file()
    for relative, content in render_files(config).items():
        if not chart and Path(relative).is_relative_to(CHART_DIR):
            continue
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        written.append(path)
    if chart and (root / CHART_DIR / "values.yaml").is_file():  # its README, from its Chart.yaml and values.yaml
        readme = root / CHART_README_FILE
        readme.write_text(chart_readme(root / CHART_DIR), encoding="utf-8")
        written.append(readme)
    if (root / DOCS_DIR).is_dir():  # a repository: its generated reference pages too
        for relative, page in (DOCS_PAGES | MIXIN_DOCS_PAGES).items():
            path = root / relative
            path.write_text(page(), encoding="utf-8")
            written.append(path)
    return written
