"""The health endpoints Kubernetes probes (charts/cdcwatch): `/-/healthy` and `/-/ready` answer without scraping
any target, readiness does not depend on the targets being up, both answer without basic auth (which still guards
/metrics) and only over the web config's TLS, and `/-/ready` turns 503 once the service is shutting down."""

from __future__ import annotations

import base64
import http.client
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from cdcwatch.collection import Collection
from cdcwatch.exporter import Exporter, ScheduledCollector
from cdcwatch.server import HEALTHY_PATH, READY_PATH, Service, make_http_server
from cdcwatch.validation import load_config
from cdcwatch.web import TlsServerConfig, WebConfig
from devstack.tls import make_pki

TIMEOUT = 10.0


class DownTarget:
    """A target that is down, counting how often it was asked."""

    kind = "postgres"
    target = "down"

    def __init__(self) -> None:
        self.collections = 0

    def collect(self) -> Collection:
        self.collections += 1
        raise ConnectionRefusedError("connection refused")

    def close(self) -> None:
        pass


def get(url: str, context: ssl.SSLContext | None = None, auth: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": auth} if auth else {})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def serving(web: WebConfig | None = None, exporter: Exporter | None = None) -> Iterator[int]:
    server = make_http_server("127.0.0.1", 0, exporter or Exporter([]), web)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_port)
    server.shutdown()
    server.server_close()


def test_probes_touch_no_target_and_readiness_holds_while_the_target_is_down() -> None:
    target = DownTarget()
    for port in serving(exporter=Exporter([ScheduledCollector(target, 5.0)])):
        base = f"http://127.0.0.1:{port}"
        assert get(base + HEALTHY_PATH)[0] == 200
        assert get(base + READY_PATH)[0] == 200
        assert target.collections == 0
        status, metrics = get(base + "/metrics")
        assert status == 200 and 'cdcwatch_up{collector="postgres",target="down"} 0.0' in metrics
        assert target.collections == 1
        assert get(base + READY_PATH)[0] == 200


PASSWORD = "probe-test-password"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, ssl.SSLContext]]:
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    web = WebConfig(tls_server_config=TlsServerConfig(cert_file=str(pki.cert("server")), key_file=str(pki.key("server"))),
                    basic_auth_users={"prometheus": hashed})
    for port in serving(web):
        yield port, ssl.create_default_context(cafile=str(pki.ca))


@pytest.mark.parametrize("path", [HEALTHY_PATH, READY_PATH])
def test_probes_answer_without_basic_auth_over_tls_only(secured: tuple[int, ssl.SSLContext], path: str) -> None:
    port, context = secured
    assert get(f"https://127.0.0.1:{port}{path}", context)[0] == 200
    with pytest.raises((urllib.error.URLError, http.client.HTTPException, ConnectionError)):  # no plain HTTP there
        get(f"http://127.0.0.1:{port}{path}")


def test_metrics_stay_behind_basic_auth(secured: tuple[int, ssl.SSLContext]) -> None:
    port, context = secured
    assert get(f"https://127.0.0.1:{port}/metrics", context)[0] == 401
    assert get(f"https://127.0.0.1:{port}/-/other", context)[0] == 401  # only the two health paths are exempt
    token = base64.b64encode(f"prometheus:{PASSWORD}".encode()).decode()
    status, text = get(f"https://127.0.0.1:{port}/metrics", context, auth=f"Basic {token}")
    assert status == 200 and "cdcwatch_build_info" in text


def test_readiness_ends_when_the_service_is_shutting_down(tmp_path: Path) -> None:
    config = tmp_path / "cdcwatch.yml"
    config.write_text("postgres:\n  - name: down\n    port: 1\n    timeout_seconds: 1\n", encoding="utf-8")
    service = Service(config, load_config(config), "127.0.0.1", 0)
    thread = threading.Thread(target=service.server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{service.port}"
        assert get(base + READY_PATH)[0] == 200
        service.stopping.set()  # what shutdown() sets first, before serving stops
        assert get(base + READY_PATH) == (503, "cdcwatch is shutting down.\n")
        assert get(base + HEALTHY_PATH)[0] == 200
    finally:
        service.server.shutdown()
        service.server.server_close()
        service.exporter.close()
