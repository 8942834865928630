"""The local Kafka broker's storage format (devstack/kafka.py)."""

from __future__ import annotations

import uuid

import pytest

from devstack import kafka


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    """The storage tool reads `-t -...` as an option and refuses to format: such an id is drawn again."""
    dashed, plain = uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x04" + bytes(15))
    drawn = iter([dashed, plain])
    monkeypatch.setattr(kafka.uuid, "uuid4", lambda: next(drawn))
    assert kafka._cluster_id() == "BAAAAAAAAAAAAAAAAAAAAA"
