"""The fast text rendering writes exactly what prometheus_client writes, for any families."""

from __future__ import annotations

import gzip
import math

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from cdcwatch.exposition import LabelBlocks, SeriesLine, metrics_app, render_text
from cdcwatch.families import LabelSet, MetricSpec, RenderedFamily, merged

_LEGACY = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,12}", fullmatch=True)
_ANY_NAME = st.one_of(_LEGACY, st.text(min_size=1, max_size=8))  # some outside the legacy set
_VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**20, 10**20),
                    st.sampled_from([0.0, -0.0, 1e6, 999999.99, 1234567.0, 1e16, 1e-7, 5e-324]))
_SUFFIXES = ("", "_total", "_bucket", "_sum", "_count", "_created", "_gsum", "_gcount", "_info")


@st.composite
def families(draw: st.DrawFn) -> list[Metric]:
    found = []
    for _ in range(draw(st.integers(0, 4))):
        name = draw(st.one_of(_LEGACY, _ANY_NAME) if draw(st.booleans()) else _LEGACY)
        kind = draw(st.sampled_from(["counter", "gauge", "histogram", "summary", "info", "stateset",
                                     "gaugehistogram", "unknown"]))
        metric = Metric(name, draw(st.text(max_size=30)), kind)
        for _ in range(draw(st.integers(0, 6))):
            labels = draw(st.dictionaries(_ANY_NAME if draw(st.booleans()) else _LEGACY, st.text(max_size=12),
                                          max_size=4))
            if draw(st.booleans()):  # as a collector keeps them between scrapes, rendered before or not
                labels = _rendered_before(LabelSet(tuple(labels), tuple(labels.values())), draw(st.booleans()))
            timestamp = draw(st.one_of(st.none(), st.floats(0, 2e9)))
            metric.samples.append(Sample(name + draw(st.sampled_from(_SUFFIXES)), labels, draw(_VALUES), timestamp))
        found.append(metric)
    return found


def _rendered_before(labels: LabelSet, rendered: bool) -> LabelSet:
    if rendered:
        metric = Metric("cdcwatch_before", "", "gauge")
        metric.samples.append(Sample("cdcwatch_before", labels, 1.0))
        render_text(_Fixed([metric]))
    return labels


class _Fixed:
    def __init__(self, metrics: list[Metric]) -> None:
        self.metrics = metrics

    def collect(self) -> list[Metric]:
        return self.metrics


@settings(max_examples=400, deadline=None)
@given(families())
def test_renders_what_prometheus_client_renders(metrics: list[Metric]) -> None:
    collector = _Fixed(metrics)
    assert render_text(collector) == generate_latest(collector)  # type: ignore[arg-type]


_KEPT = LabelBlocks()


@settings(max_examples=300, deadline=None)
@given(families(), families())
def test_label_blocks_kept_across_renderings_change_nothing(first: list[Metric], second: list[Metric]) -> None:
    """One LabelBlocks for every example: what earlier renderings kept never leaks into a later one."""
    for metrics in (first, second):
        collector = _Fixed(metrics)
        assert render_text(collector, _KEPT) == generate_latest(collector)  # type: ignore[arg-type]


def test_label_blocks_of_series_that_went_away_are_forgotten() -> None:
    many = Metric("cdcwatch_many", "Many.", "gauge")
    many.samples += [Sample("cdcwatch_many", {"n": str(n)}, 1.0) for n in range(5000)]
    few = Metric("cdcwatch_few", "Few.", "gauge")
    few.samples += [Sample("cdcwatch_few", {"n": str(n)}, 1.0) for n in range(10)]
    blocks = LabelBlocks()
    render_text(_Fixed([many]), blocks)
    assert len(blocks) == 5000  # kept for the next scrape
    render_text(_Fixed([few]), blocks)
    assert len(blocks) == 0  # 5,000 label sets gone from the exposition are not kept
    render_text(_Fixed([few]), blocks)
    assert len(blocks) == 10


def test_escapes_label_values_and_help_and_prints_go_floats() -> None:
    metric = Metric("cdcwatch_x", 'help with \\ and\nnewline', "gauge")
    metric.samples += [Sample("cdcwatch_x", {"b": 'say "hi"\\\n', "a": "1"}, 1234567.0),
                       Sample("cdcwatch_x", {}, math.inf), Sample("cdcwatch_x", {}, math.nan)]
    assert render_text(_Fixed([metric])).decode() == (
        "# HELP cdcwatch_x help with \\\\ and\\nnewline\n# TYPE cdcwatch_x gauge\n"
        'cdcwatch_x{a="1",b="say \\"hi\\"\\\\\\n"} 1.234567e+06\n'
        "cdcwatch_x +Inf\ncdcwatch_x NaN\n")


def _get(app, accept: str = "", encoding: str = "", query: str = "", method: str = "GET"):
    seen: dict[str, object] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        seen["status"], seen["headers"] = status, dict(headers)

    body = b"".join(app({"REQUEST_METHOD": method, "HTTP_ACCEPT": accept, "HTTP_ACCEPT_ENCODING": encoding,
                         "QUERY_STRING": query, "PATH_INFO": "/metrics"}, start_response))
    return seen["status"], seen["headers"], body


def test_the_app_negotiates_like_prometheus_client() -> None:
    registry = CollectorRegistry(auto_describe=False)
    one, two = Metric("cdcwatch_one", "One.", "counter"), Metric("cdcwatch_two", "Two.", "gauge")
    one.samples.append(Sample("cdcwatch_one_total", {"a": "b"}, 3))
    two.samples.append(Sample("cdcwatch_two", {}, 2))
    registry.register(_Fixed([one, two]))  # type: ignore[arg-type]
    app = metrics_app(registry)
    status, headers, body = _get(app)
    assert status == "200 OK" and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert body == generate_latest(registry)
    _, headers, body = _get(app, accept="application/openmetrics-text; version=1.0.0")
    assert headers["Content-Type"].startswith("application/openmetrics-text") and body.endswith(b"# EOF\n")
    _, headers, body = _get(app, encoding="gzip")
    assert headers["Content-Encoding"] == "gzip" and gzip.decompress(body) == generate_latest(registry)
    _, headers, body = _get(app, accept="application/openmetrics-text; version=1.0.0", encoding="gzip")
    assert headers["Content-Encoding"] == "gzip" and gzip.decompress(body).endswith(b"cdcwatch_two 2.0\n# EOF\n")
    _, _, body = _get(app, query="name[]=cdcwatch_two")
    assert body == b"# HELP cdcwatch_two Two.\n# TYPE cdcwatch_two gauge\ncdcwatch_two 2.0\n"
    assert _get(app, method="POST")[0].startswith("405")


def test_rendered_families_of_several_targets_merge_into_one_that_renders_as_their_samples() -> None:
    """Two Kafka clusters' per-partition families share a name: the merged family renders both targets' lines, as
    prometheus_client renders the samples parsed from them; with a plain family among them it is plain."""
    spec = MetricSpec("cdcwatch_x_lag", "gauge", "Lag.", ("group",))
    first, second = RenderedFamily(spec), RenderedFamily(spec)
    first.lines = [SeriesLine(spec.name, ("group", "target"), ("a", "k1")).line(3)]
    second.lines = [SeriesLine(spec.name, ("group", "target"), ('b"', "k2")).line(-0.0)]
    joined = merged([first, second])
    assert isinstance(joined, RenderedFamily) and joined.lines == first.lines + second.lines
    assert [(s.labels, s.value) for s in joined.samples] == [({"group": "a", "target": "k1"}, 3.0),
                                                              ({"group": 'b"', "target": "k2"}, -0.0)]
    plain = Metric("cdcwatch_x_lag", "Lag.", "gauge")
    plain.samples = list(joined.samples)
    assert render_text(_Fixed([joined])) == generate_latest(_Fixed([plain]))
    other = Metric("cdcwatch_x_lag", "Lag.", "gauge")
    other.samples.append(Sample("cdcwatch_x_lag", {"group": "c", "target": "k3"}, 1.0))
    mixed = merged([first, other])
    assert not isinstance(mixed, RenderedFamily)
    assert [s.labels["group"] for s in mixed.samples] == ["a", "c"]
    assert merged([first]) is first


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.integers(-10**20, 10**20), st.integers(-2_000_000, 2_000_000),
                          st.sampled_from([0, -999_999, 999_999, 1_000_000, -1_000_000, 10**16 + 1])), min_size=1))
def test_a_line_of_ints_shows_what_a_line_of_any_value_shows(values: list[int]) -> None:
    """`count`, the shortcut for offsets, counts and codes, writes the line `line` writes, through any changes."""
    counted, general = SeriesLine("cdcwatch_x", ("a",), ("1",)), SeriesLine("cdcwatch_x", ("a",), ("1",))
    for value in values:
        counted.count(value)
        assert counted.text == general.line(value)
