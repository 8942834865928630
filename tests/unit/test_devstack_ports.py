"""`devstack.procs.free_port` hands each port to one caller on the machine, even when the kernel offers it twice."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

from devstack import procs


class _OfferedSocket:
    """A socket whose port 0 binds to the next of `offered`, as the kernel may offer a just-freed port again."""

    offered: list[int] = []

    def __enter__(self) -> _OfferedSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def bind(self, address: tuple[str, int]) -> None:
        self.port = self.offered.pop(0)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


def test_a_port_offered_twice_is_handed_out_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procs, "_HANDED_OUT", tmp_path)
    monkeypatch.setattr(socket, "socket", _OfferedSocket)
    _OfferedSocket.offered = [41001, 41001, 41002]
    assert [procs.free_port(), procs.free_port()] == [41001, 41002]
    # a hand-out older than any stack runs is forgotten
    old = tmp_path / "41001"
    old.touch()
    stale = old.stat().st_mtime - procs._HANDED_OUT_SECONDS - 1
    os.utime(old, (stale, stale))
    _OfferedSocket.offered = [41001]
    assert procs.free_port() == 41001


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
