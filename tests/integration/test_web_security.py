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

from devstack.configs import exporter_config, listen, postgres_source, web_config
from devstack.procs import free_port, port_open, wait_for

pytestmark = pytest.mark.integration

PASSWORD = "correct horse"


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """The test CA with a server and a client certificate, and a client certificate from a CA the server does not trust."""
    d = tmp_path_factory.mktemp("pki")
    for ca in ("ca", "rogue-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / f"{ca}.key"), "-out", str(d / f"{ca}.crt"),
                "-days", "1", "-subj", f"/CN=cdcwatch test {ca}")
    for name, ca, extra in (("server", "ca", ["-addext", "subjectAltName=IP:127.0.0.1"]), ("client", "ca", []),
                            ("rogue", "rogue-ca", [])):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / f"{name}.key"), "-out", str(d / f"{name}.csr"),
                "-subj", f"/CN={name}", *extra)
        openssl("x509", "-req", "-in", str(d / f"{name}.csr"), "-CA", str(d / f"{ca}.crt"), "-CAkey", str(d / f"{ca}.key"),
                "-CAcreateserial", "-out", str(d / f"{name}.crt"), "-days", "1", "-copy_extensions", "copy")
    return d


def client(pki: Path, cert: str | None) -> ssl.SSLContext:
    """A client trusting the test CA, presenting `cert` (client, rogue) or no certificate."""
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    if cert:
        context.load_cert_chain(str(pki / f"{cert}.crt"), str(pki / f"{cert}.key"))
    return context


def tls(pki: Path, client_auth_type: str, client_ca: bool = True) -> dict[str, str]:
    """The `tls_server_config:` section: the server's certificate, the test CA when `client_ca`."""
    return {"cert_file": str(pki / "server.crt"), "key_file": str(pki / "server.key"),
            **({"client_ca_file": str(pki / "ca.crt")} if client_ca else {}), "client_auth_type": client_auth_type}


def users(password: str) -> dict[str, str]:
    """The `basic_auth_users:` section: `prometheus` with `password`, bcrypt-hashed."""
    return {"prometheus": bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()}


def serve(tmp_path: Path, postgres, web: str) -> tuple[subprocess.Popen[bytes], int, Path]:
    port = free_port()
    (tmp_path / "web.yml").write_text(web, encoding="utf-8")
    (tmp_path / "cdcwatch.yml").write_text(exporter_config(
        listen=listen(port, web_config_file=str(tmp_path / "web.yml")),
        postgres=[postgres_source("main", postgres.port)]), encoding="utf-8")
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
    process, port, _ = serve(tmp_path, postgres, web_config(tls_server_config=tls(pki, "RequireAndVerifyClientCert"),
                                                            basic_auth_users=users(PASSWORD)))
    try:
        with_cert = client(pki, "client")
        assert get(port, with_cert, PASSWORD) == 200
        assert get(port, with_cert, None) == 401
        assert get(port, with_cert, "wrong") == 401
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            get(port, client(pki, None), PASSWORD)  # no client certificate
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            get(port, client(pki, "rogue"), PASSWORD)  # a certificate from a CA the server does not trust
        with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
            get(port, None, PASSWORD)  # plain HTTP to the TLS port
        assert get(port, with_cert, PASSWORD) == 200  # still serving after the failed handshakes
    finally:
        process.terminate()
        process.wait(30)


def served(port: int, context: ssl.SSLContext) -> bool:
    try:
        return get(port, context, None) == 200
    except (ssl.SSLError, ConnectionError, OSError):
        return False


# Go's crypto/tls, which exporter-toolkit's client_auth_type names: (no certificate, one from the CA, one from another CA)
CLIENT_AUTH = {
    "NoClientCert": (True, True, True),
    "RequestClientCert": (True, True, True),  # asked for, never verified
    "RequireAnyClientCert": (False, True, True),  # required, never verified
    "VerifyClientCertIfGiven": (True, True, False),
    "RequireAndVerifyClientCert": (False, True, False),
}


@pytest.mark.parametrize("client_auth_type", CLIENT_AUTH)
def test_client_auth_types_mean_what_they_mean_in_exporter_toolkit(pki: Path, postgres, tmp_path: Path,
                                                                   client_auth_type: str) -> None:
    process, port, _ = serve(tmp_path, postgres, web_config(
        tls_server_config=tls(pki, client_auth_type, client_ca=client_auth_type != "NoClientCert")))
    try:
        assert tuple(served(port, client(pki, cert)) for cert in (None, "client", "rogue")) == CLIENT_AUTH[client_auth_type]
    finally:
        process.terminate()
        process.wait(30)


def test_basic_auth_without_tls(postgres, tmp_path: Path) -> None:
    process, port, _ = serve(tmp_path, postgres, web_config(basic_auth_users=users(PASSWORD)))
    try:
        assert get(port, None, None) == 401
        assert get(port, None, "wrong") == 401
        assert get(port, None, PASSWORD) == 200
    finally:
        process.terminate()
        process.wait(30)


@pytest.mark.parametrize("web, complaint", [
    ("basic_auth_users:\n  prometheus: plaintext-password\n", "is not a bcrypt hash"),
    ("tls_server_config: {{cert_file: {pki}/server.crt, key_file: {pki}/server.key, client_ca_file: {pki}/ca.crt}}\n",
     "client_ca_file is set but client_auth_type is NoClientCert"),  # exporter-toolkit refuses it too
])
def test_a_bad_web_config_exits_before_serving(pki: Path, postgres, tmp_path: Path, web: str, complaint: str) -> None:
    (tmp_path / "web.yml").write_text(web.format(pki=pki), encoding="utf-8")
    (tmp_path / "cdcwatch.yml").write_text(exporter_config(postgres=[postgres_source("main", postgres.port)]),
                                           encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "cdcwatch.cli", "serve", "--config", str(tmp_path / "cdcwatch.yml"),
                           "--web.config.file", str(tmp_path / "web.yml")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert complaint in done.stderr and "plaintext-password" not in done.stderr
