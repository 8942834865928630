"""The dashboard preview against a stand-in Prometheus API: every variable (Grafana's $__rate_interval
included) is resolved before a query is sent, and each dashboard becomes a PNG on one HTML page."""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from cdcwatch.mixin import MixinConfig
from cdcwatch.mixin.dashboards import build_dashboards
from cdcwatch.mixin.preview import render_preview
from tests.stand_ins import JsonHandler

pytestmark = pytest.mark.preview  # plots with matplotlib (the preview extra)


class _Prometheus(JsonHandler):
    queries: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        url = urllib.parse.urlparse(self.path)
        params = urllib.parse.parse_qs(url.query)
        if url.path.startswith("/api/v1/label/"):
            data: object = ["a"]
        else:
            self.queries.append(params["query"][0])
            start, end = float(params["start"][0]), float(params["end"][0])
            data = {"resultType": "matrix", "result": [
                {"metric": {"query": "apply", "server": "inventory"},
                 "values": [[start + i * (end - start) / 10, str(i * 40)] for i in range(11)]}]}
        self.send_json({"status": "success", "data": data})


@pytest.fixture
def prometheus() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Prometheus.queries = []
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_preview_resolves_every_variable_and_renders_each_dashboard(prometheus: str, tmp_path: Path) -> None:
    index = render_preview(prometheus, MixinConfig(), tmp_path, "30m")
    boards = build_dashboards(MixinConfig())
    images = sorted(p.stem for p in tmp_path.glob("*.png"))
    assert images == sorted(name.removesuffix(".json") for name in boards)
    assert all(f"{name}.png" in index.read_text() for name in images)
    panels = sum(len(p.get("targets", [])) for model in boards.values() for p in model["panels"])
    assert len(_Prometheus.queries) == panels
    assert not [q for q in _Prometheus.queries if "$" in q]
