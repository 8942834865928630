"""Building fresh metric families on every scrape (no global state, no stale series)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from cdcwatch.specs import MetricSpec

__all__ = ["FamilyBuilder", "LabelSet", "RenderedFamily", "head", "merged", "sample_count"]


class LabelSet(dict[str, str]):
    """A sample's labels, built once and kept by its collector while the series exists; never changed once built.

    `key` is the label names then the values, the renderer's lookup key; `block` is the rendered `{...} ` text,
    which the renderer fills in at the first rendering (it depends on the content only)."""

    __slots__ = ("block", "key")

    def __init__(self, names: tuple[str, ...], values: tuple[str, ...]) -> None:
        super().__init__(zip(names, values, strict=True))
        self.key = names + values
        self.block: str | None = None


class RenderedFamily(Metric):
    """A family whose collector writes its sample lines itself: the tens of thousands of steady per-partition series
    of a large cluster, each line kept from one scrape to the next and formatted again only when its value changes.

    The text renderer joins `lines` as they are. `samples`, for every other reader (OpenMetrics, `name[]` filters,
    the series cap, tests), are parsed from the lines when first read, so they say exactly what the lines say; a
    plain-text scrape parses none."""

    def __init__(self, spec: MetricSpec) -> None:
        base = spec.name.removesuffix("_total") if spec.type == "counter" else spec.name
        super().__init__(base, spec.help, spec.type)
        self.sample_name = spec.name
        self.lines: list[str] = []
        self._samples: list[Sample] | None = None

    @property
    def samples(self) -> list[Sample]:
        if self._samples is None:
            text = f"# TYPE {self.name} {self.type}\n" + "".join(self.lines)
            self._samples = [Sample(sample.name, sample.labels, sample.value)
                             for family in text_string_to_metric_families(text) for sample in family.samples]
        return self._samples

    @samples.setter
    def samples(self, samples: list[Sample]) -> None:
        self._samples = samples if samples else None  # Metric.__init__ sets [] before the lines exist


def merged(families: list[Metric]) -> Metric:
    """One family of the samples of `families` (one name, from several targets), in their order; a single family is
    returned as it is, and rendered families stay rendered."""
    if len(families) == 1:
        return families[0]
    first = families[0]
    if all(isinstance(family, RenderedFamily) for family in families):
        parts = cast(list[RenderedFamily], families)
        joined = RenderedFamily(MetricSpec(parts[0].sample_name, cast(Any, first.type), first.documentation))
        joined.lines = [line for part in parts for line in part.lines]
        return joined
    plain = Metric(first.name, first.documentation, first.type)
    for family in families:
        plain.samples.extend(family.samples)
    return plain


def head(family: Metric, count: int) -> Metric:
    """The family with only its first `count` samples; a rendered family stays rendered, cut to its first lines
    (parsing its lines into samples to cut them cost seconds and a gigabyte at a cap of 250,000)."""
    if isinstance(family, RenderedFamily):
        kept = RenderedFamily(MetricSpec(family.sample_name, cast(Any, family.type), family.documentation))
        kept.lines = family.lines[:count]
        return kept
    cut = Metric(family.name, family.documentation, family.type)
    cut.samples = family.samples[:count]
    return cut


def sample_count(family: Metric) -> int:
    """The family's samples, without building a rendered family's."""
    return len(family.lines) if isinstance(family, RenderedFamily) else len(family.samples)


class FamilyBuilder:
    """Collects samples into families by metric spec; counters get their `_total` sample name."""

    def __init__(self) -> None:
        self._families: dict[str, Metric] = {}

    def add_spec(self, spec: MetricSpec, value: float, common: Mapping[str, str] = {}, **labels: str) -> None:
        """A sample of `spec` with the collector's `common` labels and the spec's own `labels` (checked): the one way
        a sample is added, the spec named by its constant (`builder.add_spec(SLOT_ACTIVE, 1.0, common, slot=...)`)."""
        spec.check_labels(labels)
        self.family_of(spec).samples.append(Sample(spec.name, {**common, **labels}, value))

    def add_histogram(self, spec: MetricSpec, buckets: Iterable[tuple[str, float]], total: float,
                      common: Mapping[str, str] = {}, **labels: str) -> None:
        """The samples of one histogram series of `spec`, as `add_spec` adds one sample: `buckets` are (bound, cumulative
        count) pairs ending with +Inf, whose count is the series' `_count`; `total` its `_sum`."""
        spec.check_labels(labels)
        series, samples = {**common, **labels}, self.family_of(spec).samples
        count = 0.0
        for bound, count in buckets:
            samples.append(Sample(f"{spec.name}_bucket", {**series, "le": bound}, count))
        samples.append(Sample(f"{spec.name}_count", series, count))
        samples.append(Sample(f"{spec.name}_sum", series, total))

    def family_of(self, spec: MetricSpec) -> Metric:
        """The family of `spec`; hot paths append `Sample(spec.name, labels, value)` to its samples after
        `spec.check_labels` of their label keys."""
        family = self._families.get(spec.name)
        if family is None:
            family = Metric(spec.name.removesuffix("_total") if spec.type == "counter" else spec.name, spec.help, spec.type)
            self._families[spec.name] = family
        return family

    def rendered(self, spec: MetricSpec) -> RenderedFamily:
        """A family of `spec` whose sample lines the caller appends to its `lines` (see RenderedFamily)."""
        family = self._families[spec.name] = RenderedFamily(spec)
        return family

    def families(self) -> list[Metric]:
        return list(self._families.values())
