"""The systemd unit docs/deploy/vm.md gives: systemd's own checker accepts every line of it, and its commands are
cdcwatch's."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from cdcwatch.cli import _parser
from tests.unit.test_docs import ROOT, blocks

PAGE = ROOT / "docs" / "deploy" / "vm.md"


def _unit() -> str:
    [unit] = blocks(PAGE, "ini")
    return unit


def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: apt-get install systemd"
    cdcwatch = Path(sys.executable).with_name("cdcwatch")  # the unit's ExecStart must exist for systemd to accept it
    (tmp_path / "cdcwatch.service").write_text(_unit().replace("/opt/cdcwatch/bin/cdcwatch", str(cdcwatch)))
    checked = subprocess.run([analyze, "verify", str(tmp_path / "cdcwatch.service")], capture_output=True, text=True)
    assert checked.returncode == 0 and not checked.stderr.strip(), checked.stderr


def test_the_units_command_is_cdcwatch_serve() -> None:
    [start] = re.findall(r"^ExecStart=(.*)$", _unit(), flags=re.M)
    program, *arguments = shlex.split(start)
    assert program == "/opt/cdcwatch/bin/cdcwatch"
    parsed = _parser().parse_args(arguments)
    assert parsed.command == "serve" and parsed.config == "/etc/cdcwatch/cdcwatch.yml"
