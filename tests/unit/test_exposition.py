"""The fast renderings write exactly what prometheus_client writes, for any families, in every format a scraper
negotiates: the text format 0.0.4 and 1.0.0 and OpenMetrics, under each escaping."""

from __future__ import annotations

import gzip
import math
from functools import partial
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text
from prometheus_client.samples import Exemplar, Sample, Timestamp

from cdcwatch.exposition import PLAIN_TEXT, LabelBlocks, SeriesLine, metrics_app, negotiate, render_text
from cdcwatch.families import FamilyBuilder, LabelSet, RenderedFamily, merged
from cdcwatch.specs import MetricSpec

_LEGACY = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,12}", fullmatch=True)
_ANY_NAME = st.one_of(_LEGACY, st.text(min_size=1, max_size=8))  # some outside the legacy set
_COLLECTOR_LABEL = _LEGACY.filter(lambda name: not name.startswith("__"))
"""A label name a collector writes into its rendered lines: never one Prometheus reserves (`__`; the configuration
refuses such static labels), which prometheus_client 0.26's parser refuses to read back."""
_VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**20, 10**20),
                    st.sampled_from([0.0, -0.0, 1e6, 999999.99, 1234567.0, 1e16, 1e-7, 5e-324]))
_SUFFIXES = ("", "_total", "_bucket", "_sum", "_count", "_created", "_gsum", "_gcount", "_info")
_TRICKY = st.sampled_from(['a\\b', 'say "hi"', "two\nlines", 'all \\ " \n of them\\n', "ünïcødé ✓ 𝔘", "", " "])
"""Text that needs escaping (help, label values), more often than st.text draws it."""
_TEXT = st.one_of(st.text(max_size=12), _TRICKY)
_TIMESTAMPS = st.one_of(st.none(), st.floats(0, 2e9), st.builds(Timestamp, st.integers(0, 2 * 10**9), st.integers(0, 10**9 - 1)))


@st.composite
def families(draw: st.DrawFn) -> list[Metric]:
    found: list[Metric] = []
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.integers(0, 3)) == 0:
            found.append(draw(rendered_families()))
            continue
        name = draw(st.one_of(_LEGACY, _ANY_NAME) if draw(st.booleans()) else _LEGACY)
        kind = draw(st.sampled_from(["counter", "gauge", "histogram", "summary", "info", "stateset",
                                     "gaugehistogram", "unknown"]))
        metric = Metric(name, draw(st.one_of(st.text(max_size=30), _TRICKY)), kind,
                        draw(st.sampled_from(["", "", "", "seconds", "bytes"])))
        name = metric.name  # with its unit
        for _ in range(draw(st.integers(0, 6))):
            labels = draw(st.dictionaries(_ANY_NAME if draw(st.booleans()) else _LEGACY, _TEXT, max_size=4))
            if draw(st.booleans()):  # as a collector keeps them between scrapes, rendered before or not
                labels = _rendered_before(LabelSet(tuple(labels), tuple(labels.values())), draw(st.booleans()))
            exemplar = None
            if draw(st.integers(0, 9)) == 0:  # OpenMetrics writes it (or refuses it, as prometheus_client does)
                exemplar = Exemplar(draw(st.dictionaries(_LEGACY, _TEXT, max_size=2)), draw(_VALUES),
                                    draw(st.one_of(st.none(), st.floats(0, 2e9))))
            metric.samples.append(Sample(name + draw(st.sampled_from(_SUFFIXES)), labels, draw(_VALUES),
                                         draw(_TIMESTAMPS), exemplar))
        found.append(metric)
    return found


@st.composite
def rendered_families(draw: st.DrawFn) -> RenderedFamily:
    """A family of pre-rendered lines, as the kafka collector keeps them (legacy label names, any values)."""
    kind: Literal["gauge", "counter"] = draw(st.sampled_from(["gauge", "counter"]))
    name = draw(_LEGACY) + ("_total" if kind == "counter" else "")
    family = RenderedFamily(MetricSpec(name, kind, draw(st.one_of(st.text(max_size=30), _TRICKY))))
    for _ in range(draw(st.integers(0, 6))):
        labels = draw(st.dictionaries(_COLLECTOR_LABEL, _TEXT, max_size=4))
        line = SeriesLine(name, tuple(labels), tuple(labels.values()))
        family.lines.append(line.line(draw(_VALUES)))
    return family


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


# --- every format a scraper negotiates ----------------------------------------------------------------------------

_ESCAPINGS = (openmetrics.UNDERSCORES, openmetrics.ALLOWUTF8, openmetrics.DOTS, openmetrics.VALUES)
ACCEPTS = {
    "none": "",
    "any": "*/*",
    "text 0.0.4": "text/plain;version=0.0.4",
    "text 1.0.0": "text/plain;version=1.0.0",
    **{f"text 1.0.0 {e}": f"text/plain;version=1.0.0;escaping={e}" for e in _ESCAPINGS},
    "openmetrics": "application/openmetrics-text",
    "openmetrics 1.0.0": "application/openmetrics-text;version=1.0.0",
    **{f"openmetrics 1.0.0 {e}": f"application/openmetrics-text;version=1.0.0;escaping={e}" for e in _ESCAPINGS},
    "openmetrics 2.0.0": "application/openmetrics-text;version=2.0.0",
}
"""Each format and escaping prometheus_client answers in, by an Accept header that asks for it."""


def _outcome(render) -> object:
    """The bytes rendered, or the kind of error rendering raised (prometheus_client refuses an exemplar on a gauge)."""
    try:
        return render()
    except ValueError as exc:
        return type(exc)


@settings(max_examples=300, deadline=None)
@given(families())
def test_every_format_renders_what_prometheus_clients_encoder_for_it_renders(metrics: list[Metric]) -> None:
    collector = _Fixed(metrics)
    for accept in ACCEPTS.values():
        exposition = negotiate(accept)
        fast = _outcome(partial(render_text, collector, _KEPT, exposition))
        assert fast == _outcome(partial(exposition.encoder, collector)), accept


@settings(max_examples=100, deadline=None)
@given(families())
def test_the_app_answers_every_format_as_prometheus_client_does(metrics: list[Metric]) -> None:
    """Content-Type and body (gzip or not) of each answer: prometheus_client's `choose_encoder` and its encoder's."""
    from prometheus_client.exposition import choose_encoder

    collector = _Fixed(metrics)
    app = metrics_app(collector)
    for accept in ACCEPTS.values():
        encoder, content_type = choose_encoder(accept)
        try:
            expected = encoder(collector)
        except ValueError:  # families prometheus_client refuses in this format
            continue
        for encoding in ("", "gzip"):
            status, headers, body = _get(app, accept, encoding)
            assert status == "200 OK" and headers["Content-Type"] == content_type, accept
            assert (gzip.decompress(body) if encoding else body) == expected, (accept, encoding)


PROMETHEUS_2 = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
                "text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
"""Prometheus 2.x before scrape_protocols (2.42's)."""
PROMETHEUS_2_PROTOCOLS = ("application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,"
                          "text/plain;version=0.0.4;q=0.3,*/*;q=0.2")
"""Prometheus 2.49 and later: the default scrape_protocols."""
PROMETHEUS_3_0 = ("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,"
                  "application/openmetrics-text;version=0.0.1;escaping=allow-utf-8;q=0.5,"
                  "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;escaping=allow-utf-8;q=0.3,*/*;q=0.2")
"""Prometheus 3.0: the default scrape_protocols, UTF-8 names allowed (escaping on every entry)."""
PROMETHEUS_3 = ("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,"
                "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2")
"""Prometheus 3.x later: escaping only on the formats that know it."""
PROMETHEUS_3_LEGACY_NAMES = PROMETHEUS_3.replace("allow-utf-8", "underscores")
"""Prometheus 3 with metric_name_validation_scheme: legacy."""
PROMETHEUS_3_TEXT = "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.6,text/plain;version=0.0.4;q=0.5,*/*;q=0.4"
"""Prometheus 3 with scrape_protocols: [PrometheusText1.0.0, PrometheusText0.0.4]."""

_OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping="
REAL_HEADERS = {
    "Prometheus 2.x": (PROMETHEUS_2, "OpenMetricsText1.0.0", _OPENMETRICS + "underscores"),
    "Prometheus 2.49+": (PROMETHEUS_2_PROTOCOLS, "OpenMetricsText1.0.0", _OPENMETRICS + "underscores"),
    "Prometheus 3.0": (PROMETHEUS_3_0, "OpenMetricsText1.0.0", _OPENMETRICS + "allow-utf-8"),
    "Prometheus 3": (PROMETHEUS_3, "OpenMetricsText1.0.0", _OPENMETRICS + "allow-utf-8"),
    "Prometheus 3, legacy names": (PROMETHEUS_3_LEGACY_NAMES, "OpenMetricsText1.0.0", _OPENMETRICS + "underscores"),
    "Prometheus 3, text first": (PROMETHEUS_3_TEXT, "PrometheusText1.0.0",
                                 "text/plain; version=1.0.0; charset=utf-8; escaping=allow-utf-8"),
    "plain text": ("text/plain;version=0.0.4", "PrometheusText0.0.4", "text/plain; version=0.0.4; charset=utf-8"),
    "*/*": ("*/*", "PrometheusText0.0.4", "text/plain; version=0.0.4; charset=utf-8"),
    "none": ("", "PrometheusText0.0.4", "text/plain; version=0.0.4; charset=utf-8"),
}


@pytest.mark.parametrize("scraper", sorted(REAL_HEADERS))
def test_each_real_scrapers_header_is_answered_fast_in_the_format_it_prefers(scraper: str) -> None:
    accept, format, content_type = REAL_HEADERS[scraper]
    exposition = negotiate(accept)
    assert (exposition.format, exposition.content_type, exposition.fast) == (format, content_type, True)


def test_what_is_left_to_prometheus_client() -> None:
    """Escapings that rewrite even legacy names; an Accept header prometheus_client cannot read is answered in text."""
    for accept in ("application/openmetrics-text;version=1.0.0;escaping=dots",
                   "application/openmetrics-text;version=1.0.0;escaping=values", "text/plain;version=1.0.0;escaping=dots"):
        assert not negotiate(accept).fast, accept
    assert negotiate("text/plain;version=1.0.0;escaping=values").fast  # the text encoder leaves legacy names be
    assert negotiate("application/openmetrics-text;version=1.x") is PLAIN_TEXT  # prometheus_client raises TypeError


def _cluster() -> list[Metric]:
    """Families as a Kafka cluster's scrape has them: pre-rendered partition lines, plain families, a histogram,
    with every value and label text that needs care."""
    lag = RenderedFamily(MetricSpec("cdcwatch_kafka_consumergroup_lag_messages", "gauge", 'Lag "in" \\ messages\nof it.',
                                    ("group", "partition")))
    reads = RenderedFamily(MetricSpec("cdcwatch_kafka_message_reads_total", "counter", "Reads.", ("group",)))
    groups = ['orders', 'a\\b', 'say "hi"', "two\nlines", "ünïcødé ✓"]
    values = [0, -0.0, math.nan, math.inf, -math.inf, 1e16, 5e-324, 1234567.0, 0.25, -3]
    for n, (group, value) in enumerate((g, v) for g in groups for v in values):
        lag.lines.append(SeriesLine(lag.sample_name, ("target", "group", "partition"), ("main", group, str(n))).line(value))
    for n, group in enumerate(groups):
        reads.lines.append(SeriesLine(reads.sample_name, ("target", "group"), ("main", group)).line(n * 1e6 + 0.5))
    builder = FamilyBuilder()
    up = MetricSpec("cdcwatch_up", "gauge", "Up.", ("collector", "target"))
    errors = MetricSpec("cdcwatch_scrape_errors_total", "counter", "Errors.", ("collector", "target"))
    duration = MetricSpec("cdcwatch_x_duration_seconds", "histogram", "A histogram.", ("target",))
    for target in ("main", 'quoted "one"'):
        builder.add_spec(up, 1.0, collector="kafka", target=target)
        builder.add_spec(errors, 3.0, collector="kafka", target=target)
        builder.add_histogram(duration, [("0.5", 1.0), ("1.0", 2.0), ("+Inf", 4.0)], 3.25, target=target)
    return [lag, reads, *builder.families()]


def _samples(families) -> list[tuple[str, tuple[tuple[str, str], ...], str]]:
    return [(s.name, tuple(sorted(s.labels.items())), repr(float(s.value))) for f in families for s in f.samples]


@pytest.mark.parametrize("encoding", ["", "gzip"])
@pytest.mark.parametrize("scraper", sorted(REAL_HEADERS))
def test_a_scrape_with_each_real_header_says_what_the_text_scrape_says(scraper: str, encoding: str) -> None:
    accept, format, content_type = REAL_HEADERS[scraper]
    registry = CollectorRegistry(auto_describe=False)
    families = _cluster()
    registry.register(_Fixed(families))
    app = metrics_app(registry)
    _, _, text = _get(app)
    status, headers, body = _get(app, accept, encoding)
    assert status == "200 OK" and headers["Content-Type"] == content_type
    assert headers.get("Content-Encoding") == ("gzip" if encoding else None)
    body = gzip.decompress(body) if encoding else body
    parse = parse_openmetrics if format.startswith("OpenMetrics") else parse_text
    assert body.endswith(b"\n# EOF\n") == format.startswith("OpenMetrics")
    assert _samples(parse(body.decode())) == _samples(parse_text(text.decode()))
    assert len(_samples(parse_text(text.decode()))) == 50 + 5 + 2 * (2 + 5)
    assert families[0]._samples is None  # type: ignore[attr-defined]  # answered from the kept lines, never parsed


def test_openmetrics_names_a_counter_without_total_and_escapes_quotes_in_help() -> None:
    _, headers, body = _get(metrics_app(_Fixed(_cluster()[:2])), PROMETHEUS_3)
    lines = body.decode().splitlines()
    assert lines[0] == '# HELP cdcwatch_kafka_consumergroup_lag_messages Lag \\"in\\" \\\\ messages\\nof it.'
    assert "# TYPE cdcwatch_kafka_message_reads counter" in lines
    assert 'cdcwatch_kafka_message_reads_total{group="say \\"hi\\"",target="main"} 2.0000005e+06' in lines
    assert not any("_created" in line for line in lines) and lines[-1] == "# EOF"


def test_a_name_filter_keeps_a_rendered_family_whole_and_unparsed() -> None:
    families = _cluster()
    app = metrics_app(_Fixed(families))
    _, _, body = _get(app, PROMETHEUS_2, query="name[]=cdcwatch_kafka_message_reads_total&name[]=cdcwatch_up")
    assert body.decode().count("# TYPE") == 2
    assert body.endswith(b'cdcwatch_up{collector="kafka",target="quoted \\"one\\""} 1.0\n# EOF\n')
    assert families[1]._samples is None  # type: ignore[attr-defined]  # its lines were written as they are


def test_the_app_tells_how_long_each_answer_took_once_written() -> None:
    told: list[tuple[str, dict[str, float]]] = []
    app = metrics_app(_Fixed(_cluster()), lambda format, parts: told.append((format, parts)))
    seen: dict[str, object] = {}
    answer = app({"REQUEST_METHOD": "GET", "HTTP_ACCEPT": PROMETHEUS_2, "HTTP_ACCEPT_ENCODING": "gzip", "QUERY_STRING": ""},
                 lambda status, headers: seen.update(headers=dict(headers)))
    assert len(answer) == 1 and not told  # type: ignore[arg-type]  # one chunk (the server says its length); not written yet
    answer.close()  # type: ignore[attr-defined]  # what a WSGI server does once it has written the answer
    [(format, parts)] = told
    assert format == "OpenMetricsText1.0.0" and list(parts) == ["collect", "render", "compress", "send"]
    assert all(seconds >= 0 for seconds in parts.values()) and parts["compress"] > 0
    answer.close()  # type: ignore[attr-defined]
    assert len(told) == 1
