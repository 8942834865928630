"""`/metrics` behind TLS (with a client CA) and basic auth from a web config file, on a real `cdcwatch serve`.

Certificates come from openssl (a CA, a server and a client certificate); passwords are bcrypt hashes.
"""

from __future__ import annotations

import base64
import http.client
import ssl
import subprocess
import sys
from pathlib import Path

import bcrypt
import pytest

from devstack.procs import free_port, port_open, wait_for

pytestmark = pytest.mark.integration

PASSWORD = "correct horse"


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"),
            "-days", "1", "-subj", "/CN=cdcwatch test CA")
    for name, extra in (("server", ["-addext", "subjectAltName=IP:127.0.0.1"]), ("client", [])):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / f"{name}.key"), "-out", str(d / f"{name}.csr"),
                "-subj", f"/CN={name}", *extra)
        openssl("x509", "-req", "-in", str(d / f"{name}.csr"), "-CA", str(d / "ca.crt"), "-CAkey", str(d / "ca.key"),
                "-CAcreateserial", "-out", str(d / f"{name}.crt"), "-days", "1", "-copy_extensions", "copy")
    return d


def serve(tmp_path: Path, postgres, web: str) -> tuple[subprocess.Popen[bytes], int, Path]:
    port = free_port()
    (tmp_path / "web.yml").write_text(web, encoding="utf-8")
    (tmp_path / "cdcwatch.yml").write_text(
        f"listen: {{address: 127.0.0.1, port: {port}, web_config_file: {tmp_path / 'web.yml'}}}\n"
        f"postgres:\n  - name: main\n    host: 127.0.0.1\n    port: {postgres.port}\n", encoding="utf-8")
    log = tmp_path / "serve.log"
    process = subprocess.Popen([sys.executable, "-m", "cdcwatch.cli", "serve", "--config", str(tmp_path / "cdcwatch.yml")],
                               stdout=open(log, "ab"), stderr=subprocess.STDOUT)
    wait_for(lambda: port_open(port), 30, f"cdcwatch serve (log {log})")
    return process, port, log


def get(port: int, context: ssl.SSLContext | None, password: str | None) -> int:
    connection = (http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10) if context
                  else http.client.HTTPConnection("127.0.0.1", port, timeout=10))
    headers = {"Authorization": "Basic " + base64.b64encode(f"prometheus:{password}".encode()).decode()} if password else {}
    connection.request("GET", "/metrics", headers=headers)
    response = connection.getresponse()
    body = response.read()
    if response.status == 200:
        assert b'cdcwatch_up{collector="postgres",target="main"} 1.0' in body
    return response.status


def test_tls_client_ca_and_basic_auth(pki: Path, postgres, tmp_path: Path) -> None:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    process, port, _ = serve(tmp_path, postgres, (
        f"tls_server_config:\n  cert_file: {pki / 'server.crt'}\n  key_file: {pki / 'server.key'}\n"
        f"  client_ca_file: {pki / 'ca.crt'}\n  client_auth_type: RequireAndVerifyClientCert\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"))
    try:
        trusted = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        with_cert = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        with_cert.load_cert_chain(str(pki / "client.crt"), str(pki / "client.key"))
        assert get(port, with_cert, PASSWORD) == 200
        assert get(port, with_cert, None) == 401
        assert get(port, with_cert, "wrong") == 401
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            get(port, trusted, PASSWORD)  # no client certificate
        with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
            get(port, None, PASSWORD)  # plain HTTP to the TLS port
        assert get(port, with_cert, PASSWORD) == 200  # still serving after the failed handshakes
    finally:
        process.terminate()
        process.wait(30)


def test_a_bad_web_config_exits_before_serving(postgres, tmp_path: Path) -> None:
    (tmp_path / "web.yml").write_text("basic_auth_users:\n  prometheus: plaintext-password\n", encoding="utf-8")
    (tmp_path / "cdcwatch.yml").write_text(f"postgres:\n  - name: main\n    port: {postgres.port}\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "cdcwatch.cli", "serve", "--config", str(tmp_path / "cdcwatch.yml"),
                           "--web.config.file", str(tmp_path / "web.yml")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "is not a bcrypt hash" in done.stderr and "plaintext-password" not in done.stderr
