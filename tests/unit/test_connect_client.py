"""The connect collector's REST client: basic auth and TLS against a local stand-in of the REST API,
and exception classes cut from Java traces. (The real worker, with TLS and basic auth, is in
tests/integration/test_connect.py.)"""

from __future__ import annotations

import base64
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from cdcwatch.connect import ConnectCollector
from cdcwatch.connect.collector import exception_class
from cdcwatch.failures import FailureKind, describe
from cdcwatch.validation import parse_config
from tests.stand_ins import JsonHandler

PASSWORD = "s3cret"
CONNECTORS = {"inv": {"status": {"connector": {"state": "FAILED", "worker_id": "w:8083",
                                               "trace": "org.apache.kafka.connect.errors.ConnectException: boom\n\tat x"},
                                 "tasks": [{"id": 0, "state": "FAILED", "trace": "io.debezium.DebeziumException: slot"}],
                                 "type": "source"},
                      "info": {"config": {"connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                                          "topic.prefix": "srv"}, "tasks": [{"connector": "inv", "task": 0}],
                               "type": "source"}}}


class Handler(JsonHandler):
    def do_GET(self) -> None:  # noqa: N802
        expected = "Basic " + base64.b64encode(f"monitor:{PASSWORD}".encode()).decode()
        if self.headers.get("Authorization") != expected:
            self.send_response(401)
            self.end_headers()
            return
        self.send_json({"version": "4.3.0", "commit": "c", "kafka_cluster_id": "k"} if self.path == "/" else CONNECTORS)


@pytest.fixture
def https_server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    if not shutil.which("openssl"):
        pytest.fail("openssl is needed to make the test certificate (apt-get install openssl)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], cert
    server.shutdown()


def collector(port: int, cert: Path, password: str) -> ConnectCollector:
    config = parse_config(f"connect:\n  - name: w\n    url: https://127.0.0.1:{port}\n    username: monitor\n"
                          f"    password: '{password}'\n    ca_file: {cert}\n")
    return ConnectCollector(config.connect[0])


def test_basic_auth_over_tls(https_server: tuple[int, Path]) -> None:
    port, cert = https_server
    collection = collector(port, cert, PASSWORD).collect()
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in collection.families for s in f.samples}
    failure = [dict(labels) for (name, labels) in samples if name == "cdcwatch_connect_task_failure_info"]
    assert failure == [{"connector": "inv", "exception": "io.debezium.DebeziumException", "server": "srv",
                        "target": "w", "task": "0", "type": "source"}]
    assert collection.summary == "1 connectors, 2 failed"


def test_a_wrong_password_fails_the_collection(https_server: tuple[int, Path]) -> None:
    port, cert = https_server
    with pytest.raises(Exception, match="401"):
        collector(port, cert, "wrong").collect()


@pytest.mark.parametrize("trace,expected", [
    ("org.apache.kafka.connect.errors.ConnectException: An exception occurred\n\tat a.b(C.java:1)",
     "org.apache.kafka.connect.errors.ConnectException"),
    ("io.debezium.DebeziumException", "io.debezium.DebeziumException"),
    ("java.lang.IllegalStateException$Inner: x", "java.lang.IllegalStateException$Inner"),
    ("", "other"), (None, "other"), ("Connection refused: no class here", "other"),
])
def test_exception_class(trace: str | None, expected: str) -> None:
    assert exception_class(trace) == expected


def test_a_wrong_password_reads_authentication_failed_at_the_url(https_server: tuple[int, Path]) -> None:
    port, cert = https_server
    with pytest.raises(Exception) as caught:
        collector(port, cert, "wrong").collect()
    failure = describe(caught.value, f"https://127.0.0.1:{port}", "the Connect worker")
    assert failure.kind is FailureKind.AUTHENTICATION
    assert failure.line.startswith(f"https://127.0.0.1:{port}: authentication failed: GET /: HTTP 401")


def test_an_untrusted_certificate_reads_tls_failed(https_server: tuple[int, Path]) -> None:
    port, _ = https_server
    config = parse_config(f"connect:\n  - name: w\n    url: https://127.0.0.1:{port}\n")
    with pytest.raises(Exception) as caught:
        ConnectCollector(config.connect[0]).collect()
    assert describe(caught.value, f"https://127.0.0.1:{port}", "the Connect worker").kind is FailureKind.TLS
