"""The generated rules pass pint and every generated dashboard passes Grafana's dashboard-linter (both
installed by scripts/lint-tools.sh); each tool is first shown to catch a planted fault."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from cdcwatch.mixin import RULES_FILE, MixinConfig
from cdcwatch.mixin.dashboards import build_dashboards
from tests.tools import ROOT, tool

pytestmark = pytest.mark.dashboards  # builds the dashboards (the dashboards extra): the main suite runs them

PINT_CONFIG = ROOT / "alerts" / "pint.hcl"


def _pint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool("pint"), "--no-color", "--offline", "-c", str(PINT_CONFIG), "lint", str(path)],
                          capture_output=True, text=True, cwd=ROOT)


def _linter(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool("dashboard-linter"), "lint", "--strict", str(path)], capture_output=True, text=True)


def test_pint_finds_nothing_in_the_rules() -> None:
    linted = _pint(ROOT / RULES_FILE)
    assert linted.returncode == 0 and "Problems found" not in linted.stderr, linted.stdout + linted.stderr


def test_pint_catches_a_template_using_a_label_the_query_drops(tmp_path: Path) -> None:
    rules = (ROOT / RULES_FILE).read_text().replace("applied by {{ $labels.query }}", "applied by {{ $labels.instance }}", 1)
    assert rules != (ROOT / RULES_FILE).read_text()
    (tmp_path / "rules.yml").write_text(rules)
    linted = _pint(tmp_path / "rules.yml")
    assert linted.returncode != 0 and "`instance` label" in linted.stdout + linted.stderr


@pytest.mark.parametrize("name", sorted(build_dashboards(MixinConfig())))
def test_dashboard_linter_finds_nothing(name: str) -> None:
    linted = _linter(ROOT / "dashboards" / name)
    assert linted.returncode == 0, linted.stdout + linted.stderr


def test_dashboard_linter_catches_a_panel_without_description(tmp_path: Path) -> None:
    model = json.loads((ROOT / "dashboards" / "cdcwatch-overview.json").read_text())
    next(p for p in model["panels"] if p["type"] != "row")["description"] = ""
    (tmp_path / "board.json").write_text(json.dumps(model))
    linted = _linter(tmp_path / "board.json")
    assert linted.returncode != 0 and "missing title or description" in linted.stdout + linted.stderr
