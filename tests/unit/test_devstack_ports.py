"""`devstack.procs.free_port` hands each port to one caller on the machine, even when the kernel offers it twice."""

from __future__ import annotations

import os
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
