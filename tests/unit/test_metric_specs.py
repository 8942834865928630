"""One MetricSpec per metric: the collectors build samples from it (label keys checked as they are added)
and the reference documents it."""

from __future__ import annotations

import re

import pytest

from cdcwatch.connect import CONNECT_METRICS
from cdcwatch.debezium import DEBEZIUM_METRICS
from cdcwatch.exporter import SELF_METRICS, Exporter, TargetResult
from cdcwatch.families import FamilyBuilder, MetricSpec, UndeclaredLabel, metric_specs
from cdcwatch.kafka import KAFKA_METRICS, KafkaCollector
from cdcwatch.postgres import SLOT_METRICS
from cdcwatch.reference import metrics_reference
from cdcwatch.spark.metrics import SPARK_METRICS, SinkOutcome, SparkMetrics

TABLES = {"self": SELF_METRICS, "debezium": DEBEZIUM_METRICS, "kafka": KAFKA_METRICS, "connect": CONNECT_METRICS,
          "slots": SLOT_METRICS, "spark": SPARK_METRICS}
ALL = [spec for table in TABLES.values() for spec in table.values()]


def test_a_sample_with_an_undeclared_label_is_refused() -> None:
    spec = KAFKA_METRICS["cdcwatch_kafka_consumergroup_members"]
    builder = FamilyBuilder()
    builder.add_spec(spec, 3, {"target": "main", "env": "prod"}, group="g")  # common labels are not the spec's
    with pytest.raises(UndeclaredLabel, match="topic"):
        builder.add_spec(spec, 3, {"target": "main"}, group="g", topic="t")
    [family] = builder.families()
    assert [s.labels for s in family.samples] == [{"target": "main", "env": "prod", "group": "g"}]


def test_the_kafka_collector_refuses_an_undeclared_label() -> None:
    collector = KafkaCollector.__new__(KafkaCollector)  # only the label plumbing, no cluster
    collector.target = "main"
    collector.cluster = type("Cluster", (), {"labels": {}})()
    with pytest.raises(UndeclaredLabel):
        collector._add(FamilyBuilder(), "cdcwatch_kafka_topic_partitions", 1, topic="t", partition="0")


def test_names_are_unique_and_types_and_units_follow_them() -> None:
    names = [spec.name for spec in ALL]
    assert len(names) == len(set(names))
    for spec in ALL:
        assert re.fullmatch(r"cdcwatch_[a-z0-9_]+", spec.name), spec.name
        assert spec.name.endswith("_total") == (spec.type == "counter"), spec.name
        assert spec.unit in ("", "seconds", "bytes") and spec.name.removesuffix("_total").endswith(spec.unit), spec.name
        assert all(re.fullmatch(r"[a-z_][a-z0-9_]*", label) for label in spec.labels), spec.name
        assert "target" not in spec.labels or spec in SELF_METRICS.values(), spec.name  # collectors add target themselves
    with pytest.raises(ValueError):
        MetricSpec("cdcwatch_x", "counter", "a counter without _total")
    with pytest.raises(ValueError):
        metric_specs(MetricSpec("cdcwatch_x", "gauge", "h"), MetricSpec("cdcwatch_x", "gauge", "h"))


def test_the_exporters_own_samples_carry_exactly_the_declared_labels() -> None:
    exporter = Exporter([])
    families = exporter.self_families([TargetResult("kafka", "main", True, 0.1)])
    for family in families:
        spec = next(s for s in SELF_METRICS.values() if s.name.removesuffix("_total") == family.name)
        assert family.type == spec.type and family.documentation == spec.help
        for sample in family.samples:
            assert tuple(sample.labels) == spec.labels, (family.name, sample.labels)


def test_the_spark_families_are_the_declared_ones() -> None:
    metrics = SparkMetrics(lambda: 100.0)
    metrics.terminated("q", "java.lang.OutOfMemoryError")
    metrics.progress("q", {"durationMs": {"triggerExecution": 10}}, {"server_min": "s", "server_max": "s", "newest_commit": 1.0})
    metrics.sink("q", SinkOutcome(applied=1))
    declared = {spec.name.removesuffix("_total"): spec for spec in SPARK_METRICS.values()}
    for family in metrics.collect():
        spec = declared.pop(family.name)
        assert family.type == spec.type and family.documentation == spec.help
        for sample in family.samples:
            assert set(sample.labels) - {"le"} == set(spec.labels), (family.name, sample.labels)
    assert declared == {}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_the_reference_lists_every_declared_metric(table: str) -> None:
    reference = metrics_reference()
    for spec in TABLES[table].values():
        labels = ", ".join(spec.labels) or "-"
        assert re.search(rf"^\| `{spec.name}` \| {spec.type} \| {re.escape(labels)} \|", reference, re.MULTILINE), spec.name
