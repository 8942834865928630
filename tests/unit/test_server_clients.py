"""The endpoint under clients that misbehave: stalled connections, a stalled TLS handshake, a huge
`Accept` header. Each holds up only itself, and only for the
client timeout; every well-behaved scrape meanwhile is answered at once. And kept-alive connections:
scrapes in turn on one connection, closed when the client asks or the request leaves the connection
unusable."""

from __future__ import annotations

import gzip
import http.client
import socket
import ssl
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from cdcwatch.collection import Collection
from cdcwatch.exporter import Exporter, ScheduledCollector
from cdcwatch.server import make_http_server
from cdcwatch.web import TlsServerConfig, WebConfig
from devstack.procs import wait_for
from devstack.tls import make_pki

CLIENT_TIMEOUT = 1.0
SCRAPE_TIMEOUT = 5.0
"""A well-behaved scrape must be answered within this, however many clients stall (each stall is longer)."""


def _serve(web: WebConfig | None = None) -> Iterator[int]:
    server = make_http_server("127.0.0.1", 0, Exporter([]), web, client_timeout=CLIENT_TIMEOUT)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_port)
    server.shutdown()
    server.server_close()


@pytest.fixture
def port() -> Iterator[int]:
    yield from _serve()


@pytest.fixture
def tls(tmp_path: Path) -> Iterator[tuple[int, ssl.SSLContext]]:
    pki = make_pki(tmp_path / "pki")
    web = WebConfig(tls_server_config=TlsServerConfig(cert_file=str(pki.cert("server")), key_file=str(pki.key("server"))))
    for port in _serve(web):
        yield port, ssl.create_default_context(cafile=str(pki.ca))


def scrape(port: int, scheme: str = "http", context: ssl.SSLContext | None = None) -> bytes:
    with urllib.request.urlopen(f"{scheme}://127.0.0.1:{port}/metrics", timeout=SCRAPE_TIMEOUT, context=context) as answer:
        assert answer.status == 200
        return answer.read()


def stalled(port: int, first_bytes: bytes) -> socket.socket:
    client = socket.create_connection(("127.0.0.1", port), timeout=SCRAPE_TIMEOUT * 4)
    client.sendall(first_bytes)
    return client


def closed_by_server(client: socket.socket) -> bool:
    try:
        return client.recv(65536) == b""
    except ConnectionResetError:
        return True


def test_stalled_requests_hold_up_only_themselves(port: int) -> None:
    clients = [stalled(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n") for _ in range(50)]
    assert b"cdcwatch_build_info" in scrape(port)
    for client in clients:  # each is cut off after the client timeout
        wait_for(lambda c=client: closed_by_server(c), SCRAPE_TIMEOUT, "the server to drop a stalled client")


def test_a_stalled_tls_handshake_holds_up_only_itself(tls: tuple[int, ssl.SSLContext]) -> None:
    port, context = tls
    silent = stalled(port, b"")  # connects, never sends a ClientHello
    assert b"cdcwatch_build_info" in scrape(port, "https", context)
    wait_for(lambda: closed_by_server(silent), SCRAPE_TIMEOUT, "the server to drop the silent client")


def test_a_huge_accept_header_is_refused_and_serving_goes_on(port: int) -> None:
    client = stalled(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: " + b"text/plain," * 100_000 + b"\r\n\r\n")
    answer = client.recv(65536)
    assert answer.startswith(b"HTTP/1.0 431") or answer.startswith(b"HTTP/1.1 431"), answer[:100]
    assert b"cdcwatch_build_info" in scrape(port)


def test_a_long_accept_list_is_negotiated(port: int) -> None:
    accept = ",".join(["application/json;q=0.9"] * 2000 + ["text/plain;version=0.0.4"])
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=SCRAPE_TIMEOUT) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert b"# TYPE cdcwatch_build_info" in answer.read()


def _answers(client: socket.socket, count: int, reader: BinaryIO | None = None) -> list[bytes]:
    """`count` whole answers read from `client` (each sized by its Content-Length)."""
    reader = reader or client.makefile("rb")
    found = []
    for _ in range(count):
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            line = reader.readline()
            assert line, f"the server closed the connection after {len(found)} answer(s)"
            head += line
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
        found.append(head + reader.read(length))
    return found


def test_scrapes_follow_one_another_on_one_connection(port: int) -> None:
    """As Prometheus scrapes (HTTP/1.1 keep-alive): no new connection, thread or TLS handshake per scrape."""
    client = stalled(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 2)
    first, second = _answers(client, 2)
    assert first.startswith(b"HTTP/1.1 200") and b"cdcwatch_build_info" in first
    assert second.startswith(b"HTTP/1.1 200") and b"cdcwatch_build_info" in second
    client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # and a third, later
    assert _answers(client, 1)[0].startswith(b"HTTP/1.1 200")
    wait_for(lambda: closed_by_server(client), SCRAPE_TIMEOUT, "the server to drop the idle connection")


def test_scrapes_in_turn_over_one_tls_connection(tls: tuple[int, ssl.SSLContext]) -> None:
    port, context = tls
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=SCRAPE_TIMEOUT)
    for _ in range(3):
        connection.request("GET", "/metrics")
        answer = connection.getresponse()
        assert answer.status == 200 and b"cdcwatch_build_info" in answer.read()
        assert not answer.will_close
    connection.close()


_NEXT = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
"""A request that, read as one, would get a second answer."""


@pytest.mark.parametrize("request_text", [
    b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" + _NEXT,  # the client asks for it
    b"GET /metrics HTTP/1.0\r\n\r\n" + _NEXT,  # HTTP/1.0 without keep-alive
    b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n" + _NEXT,  # its answer has a body the client will not read
    # a body would be taken for the next request: declared, declared twice, behind a header that does not parse
    b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 38\r\n\r\n" + _NEXT,
    b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 38\r\n\r\n" + _NEXT,
    b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length : 38\r\n\r\n" + _NEXT,
    b"POST /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n26\r\n" + _NEXT + b"\r\n0\r\n\r\n",
])
def test_the_connection_closes_after_one_answer_when_it_must(port: int, request_text: bytes) -> None:
    client = stalled(port, request_text)
    client.settimeout(CLIENT_TIMEOUT / 2)  # closed at once, not after the client timeout
    reader = client.makefile("rb")
    answer = _answers(client, 1, reader)[0]
    assert answer.split(b" ")[1] in (b"200", b"405")
    assert b"\r\nConnection: close\r\n" in answer  # said, so the client does not send another
    assert reader.read() == b""  # no second answer


class _Big:
    """A target whose answer (8 MB) outgrows the socket buffers of a client that does not read."""

    kind, target = "postgres", "big"

    def __init__(self) -> None:
        self.collections = 0

    def collect(self) -> Collection:
        self.collections += 1
        metric = Metric("cdcwatch_big", "Big.", "gauge")
        metric.samples.append(Sample("cdcwatch_big", {"v": "x" * 8_000_000}, 1.0))
        return Collection([metric])

    def close(self) -> None:
        pass


def test_an_answer_cut_off_ends_its_connection() -> None:
    """The client stops reading: once the write times out, the connection closes. Kept open, the next request
    would be answered, inside the cut-off body."""
    big = _Big()
    server = make_http_server("127.0.0.1", 0, Exporter([ScheduledCollector(big, 10)]), client_timeout=CLIENT_TIMEOUT)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.connect(("127.0.0.1", server.server_port))
        client.sendall(_NEXT * 2)
        wait_for(lambda: server.connections, SCRAPE_TIMEOUT, "the server to take the connection")
        wait_for(lambda: not server.connections, SCRAPE_TIMEOUT * 2, "the server to end the cut-off connection")
        assert big.collections == 1  # the second request was not answered
    finally:
        server.shutdown()
        server.server_close()


def test_closing_the_server_ends_the_kept_connections() -> None:
    server = make_http_server("127.0.0.1", 0, Exporter([]), client_timeout=60)  # idle connections would stay a minute
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = stalled(server.server_port, _NEXT)
    assert _answers(client, 1)[0].startswith(b"HTTP/1.1 200")
    server.shutdown()
    server.server_close()
    wait_for(lambda: closed_by_server(client), SCRAPE_TIMEOUT, "the server to end the kept connection")


PROMETHEUS_2 = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
"""The Accept header of Prometheus 2.x: OpenMetrics first."""


def test_the_answers_own_time_is_served_by_format_and_part(port: int) -> None:
    """Each answer counts in the self metrics of its format once sent: a later scrape shows the answers before it."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=SCRAPE_TIMEOUT)
    bodies = []
    for _ in range(2):
        connection.request("GET", "/metrics", headers={"Accept": PROMETHEUS_2, "Accept-Encoding": "gzip"})
        answer = connection.getresponse()
        assert answer.headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
        assert answer.headers["Content-Length"] and not answer.will_close
        bodies.append(gzip.decompress(answer.read()).decode())
    connection.close()
    assert "cdcwatch_metrics_responses" not in bodies[0]
    families = {family.name: family for family in text_string_to_metric_families(bodies[1])}
    [count] = families["cdcwatch_metrics_responses"].samples
    assert families["cdcwatch_metrics_responses"].type == "counter"
    assert (count.labels, count.value) == ({"format": "OpenMetricsText1.0.0"}, 1.0)
    seconds = {sample.labels["part"]: sample.value for sample in families["cdcwatch_metrics_response_seconds"].samples}
    assert list(seconds) == ["collect", "render", "compress", "send"] and all(value >= 0 for value in seconds.values())
    assert seconds["compress"] > 0
    # An answer counts once its last byte is sent, which can be after the client has read it: the count is awaited.
    # This scrape asks for the text format, so it adds nothing to the OpenMetrics count it waits on.
    wait_for(lambda: 'cdcwatch_metrics_responses_total{format="OpenMetricsText1.0.0"} 2.0' in scrape(port).decode(),
             SCRAPE_TIMEOUT, "the second OpenMetrics answer to be counted")
