"""The listener as users deploy it: where its /metrics listens, and the job it pushes under."""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import SimpleNamespace

import pytest

from cdcwatch.mixin.config import Selectors
from devstack.procs import free_port, port_open, wait_for

pytestmark = pytest.mark.spark  # needs pyspark (the spark extra)


class Session:
    """What attach() uses of a SparkSession: `streams.addListener`, and `conf` for the application's name."""

    def __init__(self, app: str = "shop-apply") -> None:
        self.added: list[object] = []
        self.streams = SimpleNamespace(addListener=self.added.append)
        self.conf = SimpleNamespace(get=lambda key, default=None: {"spark.app.name": app}.get(key, default))


def test_by_default_metrics_listen_on_every_interface() -> None:
    from spark_listeners import CdcMetricsListener

    port = free_port()
    session = Session()
    listener = CdcMetricsListener.attach(session, port=port)
    assert session.added == [listener]
    # 127.0.0.2 is another loopback address: only a socket bound to every interface answers there
    assert port_open(port, "127.0.0.2") and port_open(port, "127.0.0.1")


def test_an_address_restricts_where_metrics_listen() -> None:
    from spark_listeners import CdcMetricsListener

    port = free_port()
    CdcMetricsListener.attach(Session(), port=port, address="127.0.0.1")
    assert port_open(port, "127.0.0.1")
    assert not port_open(port, "127.0.0.2")


def test_the_apply_jobs_metrics_address_flag_reaches_its_settings() -> None:
    from spark_listeners.apply import parser as apply_parser

    parser = apply_parser()
    required = ["--bootstrap-servers", "b:9092", "--subscribe-pattern", "p", "--target", "t", "--checkpoint", "c"]
    assert parser.parse_args(required).metrics_address == "0.0.0.0"
    assert parser.parse_args([*required, "--metrics-address", "10.1.2.3"]).metrics_address == "10.1.2.3"


class Gateway(BaseHTTPRequestHandler):
    """A Pushgateway's push endpoint: records each request's method, path and body."""

    pushes: list[tuple[str, str, str]] = []

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        self.pushes.append(("PUT", self.path, body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def gateway():
    server = HTTPServer(("127.0.0.1", 0), Gateway)
    Gateway.pushes = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_pushes_go_under_the_job_the_rules_select(gateway) -> None:
    from spark_listeners import CdcMetricsListener

    selected = re.fullmatch(r'job="([^"]+)"', Selectors().spark)
    assert selected, Selectors().spark
    listener = CdcMetricsListener.attach(Session(), pushgateway=gateway)
    listener.onQueryStarted(SimpleNamespace(id="q-1", name="apply"))
    method, path, body = wait_for(lambda: Gateway.pushes and Gateway.pushes[-1], 10, "a push")
    assert (method, path) == ("PUT", f"/metrics/job/{selected.group(1)}/instance/shop-apply")
    assert 'cdcwatch_spark_query_state{query="apply",state="active"} 1.0' in body


def test_two_applications_push_to_groups_of_their_own(gateway) -> None:
    """A push replaces its whole group: under the job alone, one application's pushes would drop the other's."""
    from spark_listeners import CdcMetricsListener

    for app in ("orders-apply", "shop-apply"):
        listener = CdcMetricsListener.attach(Session(app), pushgateway=gateway)
        listener.onQueryStarted(SimpleNamespace(id=f"q-{app}", name="apply"))
        wait_for(lambda app=app: any(path.endswith(f"/instance/{app}") for _, path, _ in Gateway.pushes), 10,
                 f"a push of {app}")
    assert {path for _, path, _ in Gateway.pushes} == {"/metrics/job/cdcwatch-spark/instance/orders-apply",
                                                       "/metrics/job/cdcwatch-spark/instance/shop-apply"}

