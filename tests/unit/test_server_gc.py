"""The cyclic garbage collector is off while /metrics answers are made (GcPause in cdcwatch/server.py) and on again
once none is; a collector turned off by someone else stays off."""

from __future__ import annotations

import gc
import threading
import urllib.request
from collections.abc import Iterator

import pytest

from cdcwatch.collection import Collection
from cdcwatch.exporter import Exporter, ScheduledCollector
from cdcwatch.server import GcPause, make_http_server


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


class Witness:
    """A target that records whether the garbage collector ran while it was collected."""

    kind = "postgres"
    target = "witness"

    def __init__(self) -> None:
        self.enabled: list[bool] = []

    def collect(self) -> Collection:
        self.enabled.append(gc.isenabled())
        return Collection([], "")

    def close(self) -> None:
        pass


def test_the_collector_is_off_during_a_scrape_and_on_after_it() -> None:
    witness = Witness()
    server = make_http_server("127.0.0.1", 0, Exporter([ScheduledCollector(witness, 5.0)]), None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        for _ in range(2):
            with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10) as answer:
                assert b'cdcwatch_up{collector="postgres",target="witness"} 1.0' in answer.read()
            assert gc.isenabled()
    finally:
        server.shutdown()
        server.server_close()
    assert witness.enabled == [False, False]


def test_overlapping_answers_share_one_pause() -> None:
    pause = GcPause()
    pause.__enter__()  # a first answer starts
    pause.__enter__()  # a second one starts before the first is written
    assert not gc.isenabled()
    pause.__exit__(None, None, None)  # the first is written
    assert not gc.isenabled()
    pause.__exit__(None, None, None)
    assert gc.isenabled()


def test_an_answer_that_fails_turns_the_collector_back_on() -> None:
    with pytest.raises(RuntimeError), GcPause():
        raise RuntimeError("rendering failed")
    assert gc.isenabled()


def test_a_collector_turned_off_elsewhere_stays_off() -> None:
    gc.disable()
    with GcPause():
        assert not gc.isenabled()
    assert not gc.isenabled()
