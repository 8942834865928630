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
from cdcwatch.mixin.preview import render_board, render_preview, value_text
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


def _overview() -> dict:
    return build_dashboards(MixinConfig())["cdcwatch-overview.json"]


def _panel(model: dict, title: str) -> dict:
    return next(p for p in model["panels"] if p["title"] == title)


def test_states_and_counts_read_as_grafana_shows_them() -> None:
    """The word and colour of a state's code, the number in green at 0 and red above: from the panel's mappings."""
    overview = _overview()
    assert value_text(_panel(overview, "Pipeline state"), 4) == ("stalled", "red")
    assert value_text(_panel(overview, "Pipeline state"), 2) == ("flowing", "green")
    assert value_text(_panel(overview, "Connect tasks not RUNNING"), 0) == ("0", "green")
    assert value_text(_panel(overview, "Connect tasks not RUNNING"), 3) == ("3", "red")
    connect = build_dashboards(MixinConfig())["cdcwatch-connect.json"]
    assert value_text(_panel(connect, "Task state"), 6) == ("FAILED", "red")
    assert value_text(_panel(connect, "Task state"), 5) == ("UNASSIGNED", "orange")
    assert value_text(_panel(overview, "End-to-end freshness"), 900) == ("15m 0s", "red")


def _series(values: list[float]) -> list[tuple[str, list[dict]]]:
    return [("{{server}}", [{"metric": {"server": "inventory", "connector": "inventory-connector"},
                             "values": [[1_700_000_000 + 60 * i, str(v)] for i, v in enumerate(values)]}])]


def test_the_preview_draws_each_panel_as_its_kind_at_its_grid_position(tmp_path: Path) -> None:
    """Stats as tiles, timelines as bands, tables as tables, graphs as lines; an empty panel only says "No data";
    the image is the board's grid at 1920 px (24 columns, 30 px a row), no page title above it."""
    from PIL import Image

    model = _overview()
    panels = [p for p in model["panels"] if p["type"] != "row"]
    drawn = render_board(model, [(p, _series([1, 2, 4])) for p in panels], tmp_path / "full.png")
    kinds = {"stat": "stat", "table": "table", "state-timeline": "timeline", "timeseries": "graph"}
    assert drawn == {p["title"]: kinds[p["type"]] for p in panels}
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in model["panels"])
    assert Image.open(tmp_path / "full.png").size == (1920, rows * 30)
    empty = render_board(model, [(p, []) for p in panels], tmp_path / "empty.png")
    assert set(empty.values()) == {"no data"}
