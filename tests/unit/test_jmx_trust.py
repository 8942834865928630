"""The trust the JPype backend's TLS connections use: the default SSLContext of the exporter's JVM trusts the
configured `jmx.ca_file`s (swapped on reload), a CA file that cannot be read is named, and a handshake with a
certificate no trusted CA signed is reported as a TLS failure. The TLS peer is a local Python TLS socket (what
is tested is the JVM's side); the real JMX agent over TLS is in tests/integration/test_jmx_tls.py."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import jpype
import pytest

from cdcwatch.config import ConfigError
from cdcwatch.jmx import JmxError
from cdcwatch.jmx.jpype_client import JpypeClient
from cdcwatch.jmx.jvm import ca_file_problem, ensure_jvm, trust_ca_files
from cdcwatch.validation import parse_config
from devstack.tls import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), names=("server",))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("other"), names=(), ca_name="another CA")


@pytest.fixture
def tls_port(pki: Pki) -> Iterator[int]:
    """A TLS listener with the CA-signed certificate: completes the handshake, then closes."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.cert("server"), pki.key("server"))
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            connection.settimeout(5)
            try:
                with context.wrap_socket(connection, server_side=True) as tls:
                    tls.sendall(b"\0")
            except (OSError, ssl.SSLError):
                connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(5)
    listener.close()


@pytest.fixture(autouse=True)
def jvm() -> Iterator[None]:
    ensure_jvm()
    yield
    trust_ca_files([])


def handshake(port: int) -> str:
    factory = jpype.JClass("javax.net.ssl.SSLSocketFactory").getDefault()
    sock = factory.createSocket("127.0.0.1", port)
    try:
        sock.startHandshake()
        return "ok"
    except jpype.JException as exc:
        return str(exc.getClass().getSimpleName())
    finally:
        sock.close()


def test_the_default_context_trusts_the_configured_ca_files_and_follows_a_reload(pki: Pki, tls_port: int) -> None:
    assert handshake(tls_port) == "SSLHandshakeException"  # the JVM's default CAs do not know the private CA
    trust_ca_files([str(pki.ca)])
    assert handshake(tls_port) == "ok"
    trust_ca_files([])  # a reload without it: new connections no longer trust it
    assert handshake(tls_port) == "SSLHandshakeException"


def test_a_ca_file_that_cannot_be_read_is_named(tmp_path: Path, pki: Pki) -> None:
    junk, missing = tmp_path / "junk.pem", tmp_path / "missing.pem"
    junk.write_text("not a certificate")
    trust_ca_files([str(pki.ca), str(junk), str(missing)])
    assert ca_file_problem(str(pki.ca)) is None
    assert "No certificate" in (ca_file_problem(str(junk)) or "")
    assert "FileNotFoundException" in (ca_file_problem(str(missing)) or "")
    settings = parse_config(f"debezium:\n  - name: t\n    jmx: {{host: 127.0.0.1, port: 1, ssl: true, ca_file: {junk}}}\n")
    with pytest.raises(JmxError, match=f"TLS: jmx.ca_file {junk} cannot be used: CertificateException"):
        JpypeClient(settings.debezium[0].jmx, 5).query("java.lang:type=Runtime", ["StartTime"])


@pytest.mark.parametrize("trusted", [True, False])
def test_an_untrusted_certificate_is_a_tls_error(pki: Pki, other_ca: Pki, tls_port: int, trusted: bool) -> None:
    ca = pki.ca if trusted else other_ca.ca
    settings = parse_config(f"debezium:\n  - name: t\n    jmx: {{host: 127.0.0.1, port: {tls_port}, ssl: true,"
                            f" ca_file: {ca}}}\n").debezium[0].jmx
    with pytest.raises(JmxError) as raised:
        JpypeClient(settings, 5).query("java.lang:type=Runtime", ["StartTime"])
    message = str(raised.value)
    if trusted:  # the handshake succeeded; what follows is no JMX server
        assert "TLS" not in message, message
    else:
        assert message.startswith("TLS handshake failed (the JMX endpoint's certificate is not signed by a trusted CA"), message


@pytest.mark.parametrize("settings,problem", [
    ("ssl: false, ca_file: /ca.pem", "ca_file needs ssl: true"),
    ("ssl: true, ca_file: /ca.pem, backend: jmxquery", "ca_file needs the jpype backend"),
])
def test_ca_file_settings_that_cannot_work_are_refused(settings: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        parse_config(f"debezium:\n  - name: t\n    jmx: {{host: 127.0.0.1, port: 1, {settings}}}\n")
