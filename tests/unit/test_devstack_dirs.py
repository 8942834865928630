"""`devstack.procs.owned_dir`: a server's state directory kept in /tmp never serves an earlier run's data."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from devstack import procs


@pytest.mark.skipif(os.geteuid() != 0, reason="relocation happens only for root (CI and the development machines run as root)")
def test_a_relocated_state_dir_starts_empty_when_its_place_is_new(tmp_path: Path) -> None:
    """A server's directory that its user cannot reach is kept in /tmp, named after its wanted place: a new run at the
    same place (a state directory made again, a test's temporary directory named as an earlier run's) must not find
    the earlier run's data there."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    wanted = private / "state" / "source"
    first = procs.owned_dir(wanted, "postgres")
    assert first != wanted and wanted.resolve() == first.resolve()
    (first / "PG_VERSION").write_text("15")
    assert procs.owned_dir(wanted, "postgres") == first and (first / "PG_VERSION").exists()  # the same run: kept
    shutil.rmtree(private / "state")  # the next run makes its state directory again
    again = procs.owned_dir(wanted, "postgres")
    assert again == first and not (again / "PG_VERSION").exists()
    shutil.rmtree(again)
