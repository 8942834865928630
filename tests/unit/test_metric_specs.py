"""One MetricSpec per metric: the collectors build samples from it (label keys checked as they are added)
and the reference documents it."""

from __future__ import annotations

import re

import pytest

from cdcwatch.collectors import COLLECTORS
from cdcwatch.config import DebeziumTargetConfig
from cdcwatch.connect import CONNECT_JMX_METRICS, CONNECT_METRICS, ConnectCollector
from cdcwatch.connect.jmx_rules import CONNECT_RULES, STATUS_RULES, ConnectRule
from cdcwatch.debezium import DEBEZIUM_BEAN_METRICS, DEBEZIUM_METRICS, DebeziumCollector, bean_labels
from cdcwatch.debezium.mapping import RULES, SNAPSHOT_STATE_RULE, Conversion, Rule, convert
from cdcwatch.exporter import SELF_METRICS, Exporter, TargetResult
from cdcwatch.families import FamilyBuilder
from cdcwatch.jmx import MBean
from cdcwatch.kafka import KAFKA_METRICS
from cdcwatch.kafka.collector import KAFKA_TOPIC_PARTITIONS
from cdcwatch.postgres import SLOT_METRICS
from cdcwatch.reference import metric_types, metrics_reference
from cdcwatch.spark import SPARK_METRICS
from cdcwatch.specs import MetricSpec, UndeclaredLabel, metric_specs, referenced_specs
from spark_listeners.metrics import SinkOutcome, SparkMetrics
from tests.fixtures import read_dump
from tests.tools import ROOT

TABLES = {"self": SELF_METRICS, "debezium": DEBEZIUM_METRICS, "debezium_beans": DEBEZIUM_BEAN_METRICS,
          "kafka": KAFKA_METRICS, "connect": CONNECT_METRICS, "connect_jmx": CONNECT_JMX_METRICS, "slots": SLOT_METRICS,
          "spark": SPARK_METRICS}
ALL = [spec for table in TABLES.values() for spec in table.values()]


def test_a_sample_with_an_undeclared_label_is_refused() -> None:
    spec = KAFKA_METRICS["cdcwatch_kafka_consumergroup_members"]
    builder = FamilyBuilder()
    builder.add_spec(spec, 3, {"target": "main", "env": "prod"}, group="g")  # common labels are not the spec's
    with pytest.raises(UndeclaredLabel, match="topic"):
        builder.add_spec(spec, 3, {"target": "main"}, group="g", topic="t")
    [family] = builder.families()
    assert [s.labels for s in family.samples] == [{"target": "main", "env": "prod", "group": "g"}]


def test_a_sample_with_a_label_its_spec_does_not_declare_is_refused() -> None:
    with pytest.raises(UndeclaredLabel):
        FamilyBuilder().add_spec(KAFKA_TOPIC_PARTITIONS, 1, {"target": "main"}, topic="t", partition="0")


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


# --- the Debezium mapping table and the Connect worker's JMX rules ------------------------------------------------

def test_a_rule_with_a_label_its_spec_does_not_declare_is_refused() -> None:
    """A rule's label names (fixed labels, key label, state) are checked when it is made: the samples need none."""
    plain = MetricSpec("cdcwatch_debezium_x", "gauge", "h")
    with pytest.raises(UndeclaredLabel, match="operation"):
        Rule("A", plain, labels=(("operation", "create"),))
    with pytest.raises(UndeclaredLabel, match="table"):
        Rule("A", plain, Conversion.PER_KEY, key_label="table")
    with pytest.raises(UndeclaredLabel, match="state"):
        Rule("A", plain, Conversion.STATE, states=("RUNNING",))
    with pytest.raises(ValueError, match="not all of"):  # a declared label the rule's samples would lack
        Rule("A", MetricSpec("cdcwatch_debezium_x", "gauge", "h", ("operation", "table")), Conversion.PER_KEY,
             key_label="table")
    with pytest.raises(ValueError, match="free text"):
        Rule("A", None)
    Rule("A", MetricSpec("cdcwatch_debezium_x", "gauge", "h", ("operation", "table")), Conversion.PER_KEY,
         key_label="table", labels=(("operation", "create"),))
    with pytest.raises(UndeclaredLabel, match="state"):
        ConnectRule("connector-task-metrics", "a", MetricSpec("cdcwatch_connect_x", "gauge", "h", ("connector",)),
                    labels=(("state", "running"),))


def test_rules_of_one_family_share_its_one_declaration() -> None:
    """Help and type live in the spec alone; a second spec of the same name (other help, or even equal) is refused."""
    shared = MetricSpec("cdcwatch_debezium_x_total", "counter", "h", ("operation",))
    rules = [Rule(a, shared, labels=(("operation", a),)) for a in ("create", "update")]
    assert metric_specs(*referenced_specs(r.spec for r in rules if r.spec)) == {shared.name: shared}
    for other in (MetricSpec(shared.name, "counter", "other help", ("operation",)),
                  MetricSpec(shared.name, "counter", "h", ("operation",))):
        rules.append(Rule("delete", other, labels=(("operation", "delete"),)))
        with pytest.raises(ValueError, match="declared twice"):
            metric_specs(*referenced_specs(r.spec for r in rules if r.spec))
        rules.pop()


def test_every_rule_exports_into_a_declared_family_and_every_family_has_a_rule() -> None:
    for rule in RULES:
        assert rule.spec is None or DEBEZIUM_BEAN_METRICS[rule.spec.name] is rule.spec, rule.attribute
    used = {id(r.spec) for r in RULES} | {id(SNAPSHOT_STATE_RULE.spec)}
    assert all(id(spec) in used for spec in DEBEZIUM_BEAN_METRICS.values())
    for connect_rule in CONNECT_RULES:
        assert CONNECT_JMX_METRICS[connect_rule.spec.name] is connect_rule.spec, connect_rule.attribute
    used = {id(r.spec) for r in CONNECT_RULES} | {id(spec) for spec in STATUS_RULES.values()}
    assert all(id(spec) in used for spec in CONNECT_JMX_METRICS.values())


def _value_for(rule: Rule) -> object:
    """A value of the attribute's type that gives samples."""
    return {Conversion.BOOLEAN: True, Conversion.COUNT: ["a.b"], Conversion.PER_KEY: {"a.b": 5},
            Conversion.NUMERIC_TEXT: "42", Conversion.FILE_INDEX: "mysql-bin.000004", Conversion.PRESENT: "chunk-1",
            Conversion.STATE: rule.states[0] if rule.states else ""}.get(rule.conversion, 1234)


def _every_attribute() -> dict[str, object]:
    attributes = {rule.attribute: _value_for(rule) for rule in RULES if rule.spec is not None}
    return attributes | {attribute: True for _, attribute in SNAPSHOT_STATE_RULE.sources}


def test_every_rules_samples_carry_exactly_its_specs_labels() -> None:
    for rule in RULES:
        if rule.spec is not None:
            samples = list(convert({rule.attribute: _value_for(rule)}))
            assert samples, rule.attribute
            for sample in samples:
                assert sample.spec is rule.spec and tuple(name for name, _ in sample.labels) == rule.spec.labels, \
                    (rule.attribute, sample)


class _Jmx:
    """The beans a JMX query answers, for the label plumbing (no JVM)."""

    def __init__(self, *answers: list[MBean]) -> None:
        self.answers = list(answers)

    def query_many(self, queries: object) -> list[list[MBean]]:
        return self.answers

    def close(self) -> None:
        pass


_BEANS = ("postgres-mbeans-after-dml.tsv", "mysql-mbeans-with-schema-history.tsv")
_STREAMING = MBean("debezium.postgres:type=connector-metrics,context=streaming,server=s,custom.tag=x", "debezium.postgres",
                   {"type": "connector-metrics", "context": "streaming", "server": "s", "custom.tag": "x"}, _every_attribute())


def _debezium_beans() -> list[MBean]:
    """The recorded beans and one with every exported attribute set."""
    return [*(bean for dump in _BEANS for bean in read_dump(dump)), _STREAMING]


def _debezium_families() -> list:
    beans = _debezium_beans()
    target = DebeziumTargetConfig.model_validate({"name": "t", "labels": {"env": "prod"},
                                          "jmx": {"url": "service:jmx:rmi:///jndi/rmi://h:1/jmxrmi"}})
    return DebeziumCollector(target, _Jmx(beans, [])).collect().families


def test_the_debezium_collectors_families_are_the_declared_ones() -> None:
    """Every bean family, each with its spec's type and help, each sample with the bean's labels and the spec's."""
    declared = {spec.name.removesuffix("_total"): spec for spec in DEBEZIUM_BEAN_METRICS.values()}
    bean_label_sets = {tuple(bean_labels(b, "t", {"env": "prod"})) for b in _debezium_beans()}
    families = {family.name: family for family in _debezium_families()}
    for name, spec in declared.items():
        family = families[name]
        assert family.type == spec.type and family.documentation == spec.help, name
        for sample in family.samples:
            keys = tuple(sample.labels)
            assert keys[len(keys) - len(spec.labels):] == spec.labels, (name, sample.labels)
            assert keys[: len(keys) - len(spec.labels)] in bean_label_sets, (name, sample.labels)


def _connect_families() -> list:
    collector = ConnectCollector.__new__(ConnectCollector)  # only the JMX label plumbing, no worker
    collector.target = "w"
    collector.common = {"target": "w", "env": "prod"}
    every = {rule.attribute: 7 for rule in CONNECT_RULES} | {"status": "RUNNING"}
    beans = [MBean("kafka.connect:type=x", "kafka.connect", keys, every) for keys in (
        {"type": "connect-worker-metrics"}, {"type": "connect-worker-metrics", "connector": "c"},
        {"type": "connector-metrics", "connector": "c"}, *({"type": kind, "connector": "c", "task": "0"} for kind in
                                                          ("connector-task-metrics", "source-task-metrics", "sink-task-metrics",
                                                           "task-error-metrics")))]
    builder = FamilyBuilder()
    for bean in beans:
        collector._bean(builder, bean, {"c": "srv"})
    return builder.families()


def test_the_connect_collectors_jmx_families_are_the_declared_ones() -> None:
    declared = {spec.name.removesuffix("_total"): spec for spec in CONNECT_JMX_METRICS.values()}
    for family in _connect_families():
        spec = declared.pop(family.name)
        assert family.type == spec.type and family.documentation == spec.help, family.name
        for sample in family.samples:
            assert tuple(sample.labels) == ("target", "env", *spec.labels), (family.name, sample.labels)
    assert declared == {}


def test_the_connect_collector_refuses_a_bean_label_its_spec_does_not_declare() -> None:
    """The labels a bean gives (connector, server, task) are checked as each sample is added."""
    collector = ConnectCollector.__new__(ConnectCollector)
    collector.target = "w"
    collector.common = {"target": "w"}
    worker_bean = MBean("kafka.connect:type=x", "kafka.connect", {"type": "connect-worker-metrics", "task": "0"},
                        {"connector-count": 1})
    with pytest.raises(UndeclaredLabel, match="task"):
        collector._bean(FamilyBuilder(), worker_bean, {})


def _reference_rows() -> dict[str, tuple[str, str, str]]:
    """Metric → (type, labels, help) as the generated reference shows them."""
    rows = {}
    for line in metrics_reference().splitlines():
        if match := re.match(r"^\| `(cdcwatch_\w+)` \| (\w+) \| ([^|]*) \|", line):
            rows[match.group(1)] = (match.group(2), match.group(3).strip(), line.rstrip(" |").rsplit(" | ", 1)[1])
    return rows


@pytest.mark.parametrize("collector", ["debezium", "connect_jmx"])
def test_the_reference_says_what_metrics_shows(collector: str) -> None:
    """Type, extra labels and help of every family the collector exports, as the metrics reference (docs/) documents them."""
    families = _debezium_families() if collector == "debezium" else _connect_families()
    rows = _reference_rows()
    common = {"target", "env"}  # the target's and its static labels, and a Debezium bean's own:
    common |= {key for b in _debezium_beans() for key in bean_labels(b, "t", {})} if collector == "debezium" else set()
    for family in families:
        name = family.name + ("_total" if family.type == "counter" else "")
        kind, labels, help = rows[name]
        assert (kind, help) == (family.type, family.documentation), name
        extra = {key for sample in family.samples for key in sample.labels} - common
        assert extra == (set(labels.split(", ")) if labels != "-" else set()), (name, extra, labels)


_BY_NAME = re.compile(r'_METRICS\[|\bspec\["|f"cdcwatch_\w*\{')
"""A spec looked up in its table by name, or a metric name built from pieces: grep would miss its uses."""


def test_collectors_name_their_metric_specs_by_constant_never_by_string() -> None:
    """The exporter's collectors and the Spark listener alike."""
    for path in sorted([*(ROOT / "cdcwatch").rglob("*.py"), *(ROOT / "spark_listeners").rglob("*.py")]):
        if path.is_relative_to(ROOT / "cdcwatch" / "mixin"):  # the mixin writes PromQL, not samples
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert not _BY_NAME.search(line), f"{path.relative_to(ROOT)}:{number}: {line.strip()}"


def _every_declared_spec() -> dict[str, MetricSpec]:
    """Every spec the metrics reference (`cdcwatch docs metrics`) documents, from the same registry: the exporter's
    own, each registered collector's tables, the Spark listener's."""
    specs = [*SELF_METRICS.values(), *(spec for entry in COLLECTORS for spec in entry.specs()), *SPARK_METRICS.values()]
    return {spec.name: spec for spec in specs}


_QUOTED_NAME = re.compile(r"""(["'])(cdcwatch_\w+)\1""")
_DEFINITION = re.compile(r"""\bMetricSpec\(\s*(["'])(cdcwatch_\w+)\1""")


def test_every_metric_name_is_written_out_once_where_it_is_defined() -> None:
    """Grep finds where a metric is defined: its full name, quoted, occurs exactly once in cdcwatch/ and
    spark_listeners/, as the name of its `MetricSpec(...)`. A name built from pieces (a prefix, `_total` added by a
    helper, an f-string, a loop) is found nowhere; a name written out again elsewhere is a second place to keep in
    step (code refers to the spec instead, `SPEC.name`). Mentions in prose (backquoted in docstrings) do not count.

    cdcwatch/mixin/ is left out: it writes PromQL against the series Prometheus holds, as any user of the metrics
    would, so it spells the names out quoted by design; its own tests check every name it uses is a declared one."""
    declared = _every_declared_spec()
    assert set(declared) == set(metric_types())  # the registry is every metric the reference documents
    quoted: dict[str, list[str]] = {name: [] for name in declared}
    defined: dict[str, list[str]] = {name: [] for name in declared}
    for path in sorted([*(ROOT / "cdcwatch").rglob("*.py"), *(ROOT / "spark_listeners").rglob("*.py")]):
        if path.is_relative_to(ROOT / "cdcwatch" / "mixin"):
            continue
        text = path.read_text(encoding="utf-8")
        for found, pattern in ((quoted, _QUOTED_NAME), (defined, _DEFINITION)):
            for match in pattern.finditer(text):
                if match.group(2) in found:
                    found[match.group(2)].append(f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start(2)) + 1}")
    wrong = [f"{name}: quoted at {', '.join(quoted[name]) or 'no place'}; the name of {len(defined[name])} MetricSpec(...)"
             for name in declared if len(quoted[name]) != 1 or len(defined[name]) != 1]
    assert not wrong, "\n".join(wrong)
