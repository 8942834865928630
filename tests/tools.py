"""External tools the unit tests run: promtool and amtool from Debian (scripts/setup.sh), pint and
dashboard-linter and helm from scripts/lint-tools.sh. A missing tool fails the test that needs it, never skips it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GO_BIN = ROOT / ".cdcwatch" / "go" / "bin"
_INSTALLERS = {"promtool": "scripts/setup.sh (Debian package prometheus)",
               "amtool": "scripts/setup.sh (Debian package prometheus-alertmanager)",
               "prometheus-alertmanager": "scripts/setup.sh (Debian package prometheus-alertmanager)",
               "pint": "scripts/lint-tools.sh", "dashboard-linter": "scripts/lint-tools.sh", "helm": "scripts/lint-tools.sh"}


def tool(name: str) -> str:
    """The path of `name` (on PATH or in .cdcwatch/go/bin); fails the test when it is missing."""
    found = shutil.which(name) or shutil.which(name, path=str(GO_BIN))
    if found is None:
        pytest.fail(f"{name} is missing: install it with {_INSTALLERS[name]}")
    return found
