"""`/metrics` in the Prometheus text and OpenMetrics formats, rendered about five times faster than prometheus_client's.

`metrics_app` negotiates as prometheus_client does (its `choose_encoder`: the first OpenMetrics entry of the Accept
header with a version of 1.0.0 or more, or none, wins, then the first `text/plain` of version 1.0.0 or more, else the
text format 0.0.4; q-values are not weighed) and writes exactly the bytes prometheus_client's encoder for that
choice writes for the same families (property tests hold it to that), with the work per sample cut down: each
label set is escaped, sorted and formatted once and kept for the next scrape (`LabelBlocks`), each distinct value
is formatted once per scrape, values below a million (Go and Python print them alike) skip `floatToGoString`, and
a collector's pre-rendered lines (`RenderedFamily`) are written as they are, in either format: a sample line is
the same in both (OpenMetrics names the family itself without `_total`, escapes `"` in its help, writes a
timestamp in seconds and ends with `# EOF`). Left to prometheus_client: a family whose metric or label names are
outside the legacy character set (or, in OpenMetrics, a sample name with a colon) or whose samples carry exemplars
or native histograms; and a whole answer whose names the negotiated escaping rewrites (`escaping=dots`, and
`escaping=values` in OpenMetrics, where prometheus_client rewrites even legacy names).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from time import perf_counter
from typing import Any
from urllib.parse import parse_qs

from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, choose_encoder, gzip_accepted
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from zlib_ng import zlib_ng

from cdcwatch.families import LabelSet, RenderedFamily, sample_count

__all__ = ["ANSWER_PARTS", "PLAIN_TEXT", "Exposition", "LabelBlocks", "SeriesLine", "gzipped", "label_block", "metrics_app",
           "negotiate", "render_chunks", "render_text"]

_TYPES = {"counter": "counter", "info": "gauge", "stateset": "gauge", "gaugehistogram": "histogram",
          "unknown": "untyped", "gauge": "gauge", "histogram": "histogram", "summary": "summary"}
_NAME_SUFFIX = {"counter": "_total", "info": "_info"}
_OPENMETRICS_SUFFIXES = ("_created", "_gsum", "_gcount")


_NEG_INF = float("-inf")
# the classic text format's names (a family with other names goes to prometheus_client, which escapes them)
_LEGACY_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LEGACY_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
GZIP_LEVEL = 2
"""zlib-ng's, measured on 5.7 MB of kafka partition series: level 2 compresses in 2.5 ms to 167 KiB, the size
Python's own zlib reached at level 3 in 12 ms; zlib-ng's level 1 takes another method (221 KiB), level 3 4.4 ms
for 161 KiB. Level 9 (gzip's default, and prometheus_client's) took Python's zlib 100 ms."""


def format_value(value: float) -> str:
    """A sample value as prometheus_client writes it."""
    number = float(value)
    if number < 1e6 and number == number and number != _NEG_INF:  # Go and Python print these alike
        return repr(number)
    return str(floatToGoString(number))  # type: ignore[no-untyped-call]


def _escape_help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


def _escape_help_openmetrics(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class _NotLegacy(Exception):
    """A metric or label name outside the legacy character set: prometheus_client renders that family."""


def _label_pair(name: str, value: str) -> str:
    if not _LEGACY_LABEL_NAME.fullmatch(name):
        raise _NotLegacy(name)
    return name + '="' + value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"") + '"'


def label_block(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    """`{name="escaped value",...} ` as prometheus_client writes a sample's labels (sorted by name), or one space."""
    if not names:
        return " "
    return "{" + ",".join(_label_pair(n, v) for n, v in sorted(zip(names, values, strict=True))) + "} "


class SeriesLine:
    """One series' sample line, `name{labels} value`, kept with the value it shows: its labels are rendered once
    (they must be legacy names: a collector's own), its value again only when it changes. Only the line and where
    its value starts are kept, since a large cluster keeps tens of thousands."""

    __slots__ = ("cut", "shown", "text")

    def __init__(self, name: str, names: tuple[str, ...], values: tuple[str, ...]) -> None:
        self.shown = math.nan  # never equal: the first value is formatted
        self.text = name + label_block(names, values) + "\n"
        self.cut = len(self.text) - 1  # the value follows the labels' space

    def line(self, value: float) -> str:
        """The line showing `value` (an int is shown as the float it equals, as prometheus_client shows it)."""
        # NaN is never equal; 0.0 and -0.0 are, but print differently
        if value != self.shown or (not value and math.copysign(1.0, value) != math.copysign(1.0, self.shown)):
            self.shown = value
            self.text = self.text[:self.cut] + format_value(value) + "\n"
        return self.text

    def count(self, value: int) -> None:
        """`line` of a line that only ever shows ints (an offset, a count, a code): no zero with a sign, and below a
        million an int prints as the float it equals with ".0" (the bulk of the per-partition lines, every scrape)."""
        if value != self.shown:
            self.shown = value
            shown = f"{value}.0" if -1_000_000 < value < 1_000_000 else format_value(value)
            self.text = self.text[:self.cut] + shown + "\n"


Key = tuple[str, ...]
"""A label set as its names then its values, in the sample's order: one flat tuple, quick to build and hash."""


class LabelBlocks(dict[Key, str]):
    """`{name="escaped value",...} ` per label set, built on first use and kept from one rendering to the next.

    A scrape's label sets are nearly all the previous scrape's, so each steady series is escaped, sorted and
    formatted once, not on every scrape. Memory follows the series exported: once more label sets are kept
    than twice the samples of the latest rendering (series came and went), all are forgotten. Concurrent
    renderings stay correct, since blocks are keyed by content.
    """

    def __init__(self) -> None:
        super().__init__()
        self.pairs: dict[tuple[str, str], str] = {}

    def forget_beyond(self, samples: int) -> None:
        if len(self) > 2 * samples + 1024:
            self.clear()
            self.pairs.clear()

    def __missing__(self, key: Key) -> str:
        half = len(key) // 2
        parts = []
        for pair in sorted(zip(key[:half], key[half:], strict=True)):
            text = self.pairs.get(pair)
            if text is None:
                text = self.pairs[pair] = _label_pair(*pair)
            parts.append(text)
        block = self[key] = "{" + ",".join(parts) + "} "
        return block


def _label_block_and_value(sample_labels: Any, value: float, labels: LabelBlocks, values: dict[float, str]) -> tuple[str, str]:
    """A sample's `{labels} ` block and its value's text, as every format writes them: a kept label set's block is
    rendered once across scrapes, a value's text once per answer."""
    text = values.get(value)
    if text is None:
        text = format_value(value)
        if value == value and value != 0:
            values[value] = text
    if type(sample_labels) is LabelSet:  # kept from one scrape to the next: rendered once
        block = sample_labels.block
        if block is None:
            block = sample_labels.block = labels[sample_labels.key] if sample_labels else " "
    else:
        block = labels[(*sample_labels, *sample_labels.values())] if sample_labels else " "
    return block, text


def _family_text(metric: Metric, labels: LabelBlocks, values: dict[float, str], out: list[str]) -> None:
    """Appends the family's lines to `out`; raises _NotLegacy before appending anything it cannot render.

    `values` memoises the text of each value within one rendering (lags, states and codes repeat); zero is
    left out, since 0.0 and -0.0 are equal keys but print differently.
    """
    name = metric.name + _NAME_SUFFIX.get(metric.type, "")
    if not _LEGACY_METRIC_NAME.fullmatch(name):
        raise _NotLegacy(name)
    documentation = _escape_help(metric.documentation)
    lines = [f"# HELP {name} {documentation}\n# TYPE {name} {_TYPES[metric.type]}\n"]
    if type(metric) is RenderedFamily:  # its collector wrote its lines
        out.extend(lines)
        out.extend(metric.lines)
        return
    deferred: dict[str, list[str]] = {}
    routes: dict[str, list[str]] = {}  # sample name -> where its lines go (OpenMetrics-only ones at the end)
    last_name: str | None = None
    route = lines
    for sample in metric.samples:
        sample_name, sample_labels, value, timestamp = sample[0], sample[1], sample[2], sample[3]
        if sample_name is not last_name:  # samples of one name come together: look the route up once
            last_name = sample_name
            known = routes.get(sample_name)
            if known is None:
                if not _LEGACY_METRIC_NAME.fullmatch(sample_name):
                    raise _NotLegacy(sample_name)
                suffix = sample_name[len(metric.name):] if sample_name.startswith(metric.name) else ""
                known = routes[sample_name] = (
                    deferred.setdefault(suffix, []) if suffix in _OPENMETRICS_SUFFIXES else lines)
            route = known
        block, text = _label_block_and_value(sample_labels, value, labels, values)
        if timestamp is None:
            route.append(f"{sample_name}{block}{text}\n")
        else:
            route.append(f"{sample_name}{block}{text} {int(float(timestamp) * 1000):d}\n")
    for suffix, more in sorted(deferred.items()):
        if more:
            lines.append(f"# HELP {metric.name}{suffix} {documentation}\n# TYPE {metric.name}{suffix} gauge\n")
            lines.extend(more)
    out.extend(lines)


def _family_openmetrics(metric: Metric, labels: LabelBlocks, values: dict[float, str], out: list[str]) -> None:
    """`_family_text` in OpenMetrics, as `openmetrics.generate_latest` writes a family with names prometheus_client
    leaves as they are (escaping underscores or allow-utf-8): the family's own name (a counter's without `_total`)
    and type, a `# UNIT` line when it has a unit, the samples in their order (`_created` among them), a timestamp
    in seconds. A sample line is the text format's, so pre-rendered lines and label blocks serve both."""
    name = metric.name
    if not _LEGACY_METRIC_NAME.fullmatch(name):
        raise _NotLegacy(name)
    head = f"# HELP {name} {_escape_help_openmetrics(metric.documentation)}\n# TYPE {name} {metric.type}\n"
    if metric.unit:
        head += f"# UNIT {name} {metric.unit}\n"
    if type(metric) is RenderedFamily:  # its lines all name its sample
        if not _LEGACY_LABEL_NAME.fullmatch(metric.sample_name):
            raise _NotLegacy(metric.sample_name)
        out.append(head)
        out.extend(metric.lines)
        return
    lines = [head]
    last_name: str | None = None
    for sample in metric.samples:
        sample_name, sample_labels, value, timestamp = sample[0], sample[1], sample[2], sample[3]
        if sample_name is not last_name:
            # a sample name is written through the label-name alphabet: a colon would become `_` (underscores)
            if not _LEGACY_LABEL_NAME.fullmatch(sample_name):
                raise _NotLegacy(sample_name)
            last_name = sample_name
        if sample[4] is not None or sample[5] is not None:  # an exemplar or a native histogram
            raise _NotLegacy(sample_name)
        block, text = _label_block_and_value(sample_labels, value, labels, values)
        if timestamp is None:
            lines.append(f"{sample_name}{block}{text}\n")
        else:
            lines.append(f"{sample_name}{block}{text} {timestamp}\n")
    out.extend(lines)


class _One:
    def __init__(self, metric: Metric) -> None:
        self.metric = metric

    def collect(self) -> Iterable[Metric]:
        return [self.metric]


class _Named:
    """Only the samples named in `name[]` (the families are built at scrape time, so they are filtered then)."""

    def __init__(self, registry: Collector, names: Iterable[str]) -> None:
        self.registry, self.names = registry, frozenset(names)

    def collect(self) -> Iterable[Metric]:
        for metric in self.registry.collect():
            if type(metric) is RenderedFamily:  # its lines all name one sample: kept whole, or left out, unparsed
                if metric.sample_name in self.names and metric.lines:
                    yield metric
                continue
            samples = [sample for sample in metric.samples if sample.name in self.names]
            if samples:
                kept = Metric(metric.name, metric.documentation, metric.type, metric.unit)
                kept.samples = samples
                yield kept


_EOF = "# EOF\n"
_FAST_TEXT_ESCAPINGS = frozenset({openmetrics.UNDERSCORES, openmetrics.ALLOWUTF8, openmetrics.VALUES})
"""Escapings under which prometheus_client's text encoder leaves legacy names as they are."""
_FAST_OPENMETRICS_ESCAPINGS = frozenset({openmetrics.UNDERSCORES, openmetrics.ALLOWUTF8})
"""Likewise for its OpenMetrics encoder (with `values` it writes even a legacy sample name as `U__...`)."""


@dataclass(frozen=True)
class Exposition:
    """What a /metrics request is answered in: prometheus_client's choice for its Accept header."""

    format: str
    """The format, named as Prometheus' `scrape_protocols` name it: the `format` label of the answer's self metrics
    (a few values: PrometheusText0.0.4, PrometheusText1.0.0, OpenMetricsText1.0.0, OpenMetricsText2.0.0)."""
    content_type: str
    encoder: Callable[[Collector], bytes]
    """prometheus_client's encoder: it renders a family (or, when not `fast`, the answer) that is not rendered here."""
    openmetrics: bool = False
    fast: bool = True
    """Rendered here (every family with legacy names); else the whole answer is the encoder's."""

    def family(self, metric: Metric) -> str:
        """prometheus_client's rendering of one family in this format."""
        text = self.encoder(_One(metric)).decode("utf-8")
        return text.removesuffix(_EOF) if self.openmetrics else text


PLAIN_TEXT = Exposition("PrometheusText0.0.4", CONTENT_TYPE_PLAIN_0_0_4, generate_latest)
"""The text format 0.0.4: the answer to a request without an Accept header, or one that accepts only it or `*/*`."""


def negotiate(accept: str) -> Exposition:
    """The format prometheus_client answers `accept` in (its `choose_encoder`), and whether it is rendered here.

    An Accept header prometheus_client cannot read (`version=1.x`: it compares versions that do not parse) is
    answered in the text format 0.0.4 rather than an error."""
    try:
        encoder, content_type = choose_encoder(accept)
    except (TypeError, ValueError):
        return PLAIN_TEXT
    if encoder is generate_latest:
        return PLAIN_TEXT
    if isinstance(encoder, partial):
        escaping = encoder.keywords.get("escaping", openmetrics.UNDERSCORES)
        if encoder.func is generate_latest:
            return Exposition("PrometheusText1.0.0", content_type, encoder, fast=escaping in _FAST_TEXT_ESCAPINGS)
        if encoder.func is openmetrics.generate_latest:
            major = str(encoder.keywords.get("version", "1.0.0")).split(".")[0]
            return Exposition("OpenMetricsText1.0.0" if major == "1" else "OpenMetricsText2.0.0", content_type, encoder,
                              openmetrics=True, fast=escaping in _FAST_OPENMETRICS_ESCAPINGS)
    return Exposition("other", content_type, encoder, fast=False)  # a prometheus_client this module does not know


def render_chunks(registry: Collector, blocks: LabelBlocks | None = None,
                  exposition: Exposition = PLAIN_TEXT) -> Iterator[str]:
    """Everything `registry` collects in `exposition`'s format (a fast one), a family at a time: a large answer is
    compressed as it is written, never held whole as text and as bytes at once.

    `blocks`: the label blocks of earlier renderings, to reuse and to add this rendering's to.
    """
    labels = blocks if blocks is not None else LabelBlocks()
    values: dict[float, str] = {}
    samples = 0
    write = _family_openmetrics if exposition.openmetrics else _family_text
    for metric in registry.collect():
        samples += sample_count(metric)
        out: list[str] = []
        try:
            write(metric, labels, values, out)
        except _NotLegacy:
            out = [exposition.family(metric)]
        yield "".join(out)
    if exposition.openmetrics:
        yield _EOF
    labels.forget_beyond(samples)


def render_text(registry: Collector, blocks: LabelBlocks | None = None, exposition: Exposition = PLAIN_TEXT) -> bytes:
    """Everything `registry` collects, in the text format 0.0.4 unless `exposition` says otherwise: byte for byte
    what prometheus_client's encoder for that format writes."""
    if not exposition.fast:
        return exposition.encoder(registry)
    return "".join(render_chunks(registry, blocks, exposition)).encode("utf-8")


class _Stopwatch:
    """Time spent in one part of an answer, summed."""

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds = 0.0


def _compressed(chunks: Iterable[bytes], spent: _Stopwatch) -> bytes:
    compressor = zlib_ng.compressobj(GZIP_LEVEL, zlib_ng.DEFLATED, 16 + zlib_ng.MAX_WBITS)  # gzip header, trailer
    parts = []
    for chunk in chunks:
        started = perf_counter()
        parts.append(compressor.compress(chunk))
        spent.seconds += perf_counter() - started
    started = perf_counter()
    parts.append(compressor.flush())
    output = b"".join(parts)
    spent.seconds += perf_counter() - started
    return output


def gzipped(chunks: Iterable[bytes]) -> bytes:
    """The chunks as one gzip member, compressed with zlib-ng (zlib's format, about five times faster)."""
    return _compressed(chunks, _Stopwatch())


class _TimedCollection:
    """`source`, with the time spent waiting for its families (the targets' collections, the families built and
    merged) kept apart from the time spent rendering them."""

    def __init__(self, source: Collector) -> None:
        self.source = source
        self.waited = _Stopwatch()

    def collect(self) -> Iterator[Metric]:
        waited = self.waited
        started = perf_counter()
        for metric in self.source.collect():
            waited.seconds += perf_counter() - started
            yield metric
            started = perf_counter()
        waited.seconds += perf_counter() - started


ANSWER_PARTS = ("collect", "render", "compress", "send")
"""The parts of a /metrics answer `metrics_app` times: waiting for the families (the collection), rendering them,
gzip, and writing the answer to the client (until the server has handed its last byte to the connection)."""

AnswerRecorder = Callable[[str, dict[str, float]], None]
"""Told of each /metrics answer once it is written: its format (`Exposition.format`) and seconds per ANSWER_PARTS."""


class _Answer(list[bytes]):
    """The answer's body as one chunk (so the server says its length), telling `done` once the server has written it
    (or given up): WSGI servers call `close()` then."""

    def __init__(self, output: bytes, done: Callable[[], None]) -> None:
        super().__init__((output,))
        self._done: Callable[[], None] | None = done

    def close(self) -> None:
        done, self._done = self._done, None
        if done is not None:
            done()


def metrics_app(registry: Collector, record: AnswerRecorder | None = None) -> Callable[..., Iterable[bytes]]:
    """prometheus_client's `make_wsgi_app`, with the fast renderers for every format they render (label blocks kept
    from one scrape to the next); `record` is told how long each answer took, by part (ANSWER_PARTS)."""
    blocks = LabelBlocks()

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        started = perf_counter()
        method = environ["REQUEST_METHOD"]
        if method == "OPTIONS":
            start_response("200 OK", [("Allow", "OPTIONS,GET")])
            return [b""]
        if method != "GET":
            start_response("405 Method Not Allowed", [("Allow", "OPTIONS,GET")])
            return [f"# HTTP 405 Method Not Allowed: {method}; use OPTIONS or GET\n".encode()]
        exposition = negotiate(environ.get("HTTP_ACCEPT", ""))
        names = parse_qs(environ.get("QUERY_STRING", "")).get("name[]")
        source = _TimedCollection(_Named(registry, names) if names else registry)
        compressing = _Stopwatch()
        compressed = gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING", ""))
        if exposition.fast and compressed:
            output = _compressed((chunk.encode("utf-8") for chunk in render_chunks(source, blocks, exposition)),
                                 compressing)
        elif exposition.fast:
            output = "".join(render_chunks(source, blocks, exposition)).encode("utf-8")
        else:
            output = exposition.encoder(source)
            if compressed:
                output = _compressed((output,), compressing)
        headers = [("Content-Type", exposition.content_type)]
        if compressed:
            headers.append(("Content-Encoding", "gzip"))
        start_response("200 OK", headers)
        if record is None:
            return [output]
        made = perf_counter()
        waited, compressing_seconds = source.waited.seconds, compressing.seconds
        parts = {"collect": waited, "render": max(made - started - waited - compressing_seconds, 0.0),
                 "compress": compressing_seconds}
        return _Answer(output, lambda: record(exposition.format, {**parts, "send": perf_counter() - made}))

    return app
