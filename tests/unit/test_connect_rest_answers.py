"""Malformed answers of the Kafka Connect REST API, served by a local stand-in (what is tested is our own
reading of them): invalid JSON, error pages, truncated and oversized bodies, a server that stalls or trickles,
redirects, and documents of the wrong shape at every level. Each fails the collection with a one-line
ConnectRestError (up 0, counted in cdcwatch_scrape_errors_total) or keeps the parts that parse and counts the
rest in cdcwatch_connect_rest_malformed_total; never another exception, never a scrape past its deadline."""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdcwatch.connect import collector as connect_collector
from cdcwatch.connect.collector import CONNECTORS_PATH, ConnectCollector, ConnectRestError
from cdcwatch.exporter import Exporter, ScheduledCollector
from cdcwatch.validation import parse_config

ROOT = {"version": "4.1.0", "commit": "c", "kafka_cluster_id": "k"}
GOOD = {"status": {"connector": {"state": "RUNNING", "worker_id": "w:8083"}, "tasks": [{"id": 0, "state": "RUNNING"}],
                   "type": "source"},
        "info": {"config": {"connector.class": "io.debezium.connector.postgresql.PostgresConnector", "topic.prefix": "srv"},
                 "tasks": [{"connector": "good", "task": 0}], "type": "source"}}

Answer = Callable[[BaseHTTPRequestHandler], None]



STALL_SECONDS = 5.0
"""How long a stalling stand-in holds its answer: a collection that returns sooner ended at its own deadline."""

def send(status: int, body: bytes, content_type: str = "application/json", length: int | None = None) -> Answer:
    def answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body) if length is None else length))
        handler.end_headers()
        handler.wfile.write(body)
    return answer


def as_json(document: Any) -> Answer:
    return send(200, json.dumps(document).encode())


class StandIn:
    """A REST API whose answers each test sets per path (`/` answers ROOT unless set)."""

    def __init__(self) -> None:
        self.answers: dict[str, Answer] = {}
        self.requests: list[tuple[str, str | None]] = []
        self.release = threading.Event()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                stand_in.requests.append((self.path, self.headers.get("Authorization")))
                stand_in.answers.get(self.path, as_json(ROOT) if self.path == "/" else send(404, b"{}"))(self)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    server = StandIn()
    yield server
    server.close()


def make_collector(url: str, timeout: float = 5) -> ConnectCollector:
    config = parse_config(f"connect:\n  - name: w\n    url: {url}\n    timeout_seconds: {timeout}\n"
                          "    username: monitor\n    password: s3cret\n")
    return ConnectCollector(config.connect[0])


def samples(collection: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in collection.families for s in f.samples}


def malformed(collection: Any) -> dict[str, float]:
    return {dict(labels)["part"]: v for (name, labels), v in samples(collection).items()
            if name == "cdcwatch_connect_rest_malformed_total"}


@pytest.mark.parametrize("answer,problem", [
    (send(200, b'{"inv": {"status": '),
     r"GET /connectors\?expand=status&expand=info: the answer is no JSON \(application/json, 19 bytes\)"),
    (send(200, b"<html><body>Welcome</body></html>", "text/html"), r"the answer is no JSON \(text/html, 33 bytes\)"),
    (send(500, b"<html><h1>Internal Server Error</h1></html>", "text/html"), r"GET /connectors\S*: HTTP 500 "),
    (send(502, b"<html>Bad Gateway</html>", "text/html"), "HTTP 502 Bad Gateway"),
    (send(200, b'{"inv": {', length=100), "malformed HTTP answer: IncompleteRead"),
    (send(200, b"\xff\xfe{}"), "the answer is no JSON"),
    (send(200, b"{}", length=1 << 40), r"the answer is too large \(1099511627776 bytes"),
    (as_json(["inv", "orders"]), "expected a JSON object of connectors, got a list"),
    (as_json("connectors"), "expected a JSON object of connectors, got a string"),
    (as_json(None), "expected a JSON object of connectors, got null"),
], ids=["invalid-json", "html-200", "html-500", "html-502", "truncated", "not-utf8", "too-large-declared",
        "names-list", "string", "null"])
def test_an_unusable_connectors_answer_fails_the_collection(stand_in: StandIn, answer: Answer, problem: str) -> None:
    stand_in.answers[CONNECTORS_PATH] = answer
    with pytest.raises(ConnectRestError, match=problem):
        make_collector(stand_in.url).collect()


@pytest.mark.parametrize("root", [[], "4.1.0", 42, None])
def test_a_root_document_of_the_wrong_shape_fails_the_collection(stand_in: StandIn, root: Any) -> None:
    stand_in.answers["/"] = as_json(root)
    with pytest.raises(ConnectRestError, match="GET /: expected a JSON object"):
        make_collector(stand_in.url).collect()


def test_a_body_larger_than_the_bound_is_not_read_to_its_end(stand_in: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connect_collector, "MAX_BODY_BYTES", 1 << 20)
    chunk = b" " * 65536

    def endless(handler: BaseHTTPRequestHandler) -> None:  # no Content-Length: the body ends when the server closes
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Connection", "close")
        handler.end_headers()
        for _ in range(64):  # 4 MiB
            handler.wfile.write(chunk)

    stand_in.answers[CONNECTORS_PATH] = endless
    with pytest.raises(ConnectRestError, match="too large"):
        make_collector(stand_in.url).collect()


def stall(stand_in: StandIn, trickle: bool) -> Answer:
    def answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", "100000")
        handler.end_headers()
        handler.wfile.write(b"{")
        handler.wfile.flush()
        ends = time.monotonic() + STALL_SECONDS  # long past the deadline: a collection that returns sooner gave up
        while not stand_in.release.wait(0.1 if trickle else 5) and time.monotonic() < ends:
            handler.wfile.write(b" ")  # a byte now and then: no single read waits long
            handler.wfile.flush()
    return answer


@pytest.mark.parametrize("trickle", [False, True], ids=["stall", "trickle"])
def test_a_stalling_server_ends_the_collection_at_its_deadline(stand_in: StandIn, trickle: bool) -> None:
    stand_in.answers[CONNECTORS_PATH] = stall(stand_in, trickle)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        make_collector(stand_in.url, timeout=1).collect()
    assert time.monotonic() - started < STALL_SECONDS  # gave up before the server ended its answer


def test_a_stalling_server_is_up_0_and_an_error_within_the_scrape_deadline(stand_in: StandIn) -> None:
    stand_in.answers[CONNECTORS_PATH] = stall(stand_in, trickle=False)
    exporter = Exporter([ScheduledCollector(make_collector(stand_in.url, timeout=1), 1)])
    try:
        for scrape in (1, 2):
            started = time.monotonic()
            [result] = exporter.scrape()
            assert time.monotonic() - started < STALL_SECONDS
            assert not result.up
            errors = {s.name: s.value for f in exporter.self_families([result]) for s in f.samples}
            assert errors["cdcwatch_scrape_errors_total"] == scrape
    finally:
        exporter.close()


def test_a_redirect_is_not_followed(stand_in: StandIn) -> None:
    elsewhere = StandIn()
    try:
        def redirect(handler: BaseHTTPRequestHandler) -> None:
            handler.send_response(302)
            handler.send_header("Location", elsewhere.url + CONNECTORS_PATH)
            handler.send_header("Content-Length", "0")
            handler.end_headers()

        stand_in.answers[CONNECTORS_PATH] = redirect
        elsewhere.answers[CONNECTORS_PATH] = as_json({"good": GOOD})
        with pytest.raises(ConnectRestError, match=r"HTTP 302 Found \(redirects are not followed\)"):
            make_collector(stand_in.url).collect()
        assert elsewhere.requests == [], "the credentials went to the redirect's target"
    finally:
        elsewhere.close()


def test_malformed_parts_are_left_out_and_counted_the_rest_is_reported(stand_in: StandIn) -> None:
    stand_in.answers[CONNECTORS_PATH] = as_json({
        "good": GOOD,
        "number": 5,  # connector
        "nulls": {"status": None, "info": None},  # nothing malformed: absent parts
        "odd": {"status": {"connector": {"state": "DEGRADED", "worker_id": 7, "trace": ["x"]},  # state
                           "tasks": [{"id": 0, "state": 3}, "task", {"id": None}, {"id": True}, {"id": "1"}]},  # state, task x3
                "info": {"config": ["connector.class"], "tasks": {"task": 0}}},  # info x2
        "lists": {"status": [], "info": "text"},  # status, info
    })
    collector = make_collector(stand_in.url)
    collection = collector.collect()
    values = samples(collection)
    assert malformed(collection) == {"connector": 1, "status": 1, "info": 3, "task": 3, "state": 2}
    connectors = sorted(dict(labels)["connector"] for (name, labels) in values if name == "cdcwatch_connect_connector_info")
    assert connectors == ["good", "lists", "nulls", "odd"]
    assert values[("cdcwatch_connect_connectors", (("target", "w"),))] == 4
    good_state = {dict(labels)["state"]: v for (name, labels), v in values.items()
                  if name == "cdcwatch_connect_connector_state" and dict(labels)["connector"] == "good"}
    assert good_state["RUNNING"] == 1 and sum(good_state.values()) == 1
    odd_tasks = sorted({dict(labels)["task"] for (name, labels) in values
                        if name == "cdcwatch_connect_task_state" and dict(labels)["connector"] == "odd"})
    assert odd_tasks == ["0", "1"]
    odd_state = [v for (name, labels), v in values.items()
                 if name == "cdcwatch_connect_connector_state" and dict(labels)["connector"] == "odd"]
    assert odd_state and not any(odd_state)  # an unknown state: every known one reads 0
    assert malformed(collector.collect())["connector"] == 2  # counted again in the next answer


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=5)
                    | st.sampled_from(["RUNNING", "FAILED", "id", "task", "state", "tasks", "connector"]),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                        st.sampled_from(["status", "info", "connector", "tasks", "state", "id", "task", "config",
                                         "trace", "type", "worker_id", "topic.prefix", "connector.class", "x"]),
                        inner, max_size=4),
                    max_leaves=20)
ENTRY = st.fixed_dictionaries({}, optional={"status": st.fixed_dictionaries({}, optional={
    "connector": st.fixed_dictionaries({}, optional={"state": JSON, "worker_id": JSON, "trace": JSON}) | JSON,
    "tasks": st.lists(st.fixed_dictionaries({}, optional={"id": JSON, "state": JSON, "trace": JSON}) | JSON, max_size=3)
    | JSON}) | JSON, "info": st.fixed_dictionaries({}, optional={
        "config": st.dictionaries(st.sampled_from(["connector.class", "topic.prefix", "slot.name", "database.dbname"]),
                                  JSON, max_size=3) | JSON,
        "tasks": st.lists(st.fixed_dictionaries({}, optional={"task": JSON}) | JSON, max_size=3) | JSON,
        "type": JSON}) | JSON}) | JSON


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(root=JSON | st.just(ROOT), connectors=st.dictionaries(st.text(min_size=1, max_size=8), ENTRY, max_size=4) | JSON)
def test_any_json_is_reported_or_refused_never_a_crash(root: Any, connectors: Any) -> None:
    collector = make_collector("http://127.0.0.1:9")
    collector._get = lambda path, deadline: root if path == "/" else connectors  # type: ignore[method-assign]
    try:
        collection = collector.collect()
    except ConnectRestError:
        assert not isinstance(root, dict) or not isinstance(connectors, dict)
        return
    for family in collection.families:
        for sample in family.samples:
            assert math.isfinite(sample.value) and sample.value >= 0
            assert all(isinstance(v, str) for v in sample.labels.values())
