"""The README's install block, run as written: in a copy of the checkout (what `git ls-files` holds), with a home
of its own, by a shell. It must install the exporter into a virtual environment, without PySpark, and print the
version the package declares."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from devstack.procs import REPO

pytestmark = pytest.mark.integration


def install_block() -> str:
    """The first `sh` block under the README's "Install" heading."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert found, "no sh block under the README's Install heading"
    return found[1]


def test_the_readmes_install_block_installs_the_exporter_without_spark(tmp_path: Path) -> None:
    checkout = tmp_path / "cdcwatch"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, checkout / name)
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8",
           "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")),
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}  # the wheels already fetched, not another download
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", install_block()], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    version = re.search(r'__version__ = "([^"]+)"', (REPO / "cdcwatch" / "__init__.py").read_text())
    assert version and done.stdout.strip().splitlines()[-1] == f"cdcwatch {version[1]}"
    python = home / ".local" / "share" / "cdcwatch" / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('pyspark') is None, "
                            "u.find_spec('pymysql') is not None)"], capture_output=True, text=True, timeout=60)
    assert probe.stdout.split() == ["True", "True"], probe.stdout + probe.stderr
