"""The generated rules: no drift from the committed files, promtool-valid and tested from each alert's
examples, complete annotations, a runbook section per alert, only metrics cdcwatch produces. (The mixin
config's errors: test_config_files.py.)"""

from __future__ import annotations

import functools
import itertools
import json
import re
import subprocess
import sys
import textwrap
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdcwatch.cli import main
from cdcwatch.mixin import RULES_FILE, RULES_TEST_FILE, MixinConfig, load_mixin_config
from cdcwatch.mixin.alerts import ALERTS, GROUPS, RECORDING_RULES
from cdcwatch.mixin.alerts.examples import EXPORTER, JVM
from cdcwatch.mixin.config import exact
from cdcwatch.mixin.config_page import MIXIN_DOCS_PAGES
from cdcwatch.mixin.generate import rules_yaml
from cdcwatch.mixin.inhibit import inhibit_rules
from cdcwatch.mixin.rules import expression, metrics_in, promtool_tests, rule_groups
from cdcwatch.mixin.stages import STAGES, stages_of
from cdcwatch.mixin.templates import render_annotation
from cdcwatch.reference import DOCS_PAGES, metric_types
from devstack.scenarios import SCENARIOS, fault_matrix
from tests.tools import ROOT, tool

CONFFILES = ROOT / "tests" / "conffiles"


def _promtool_test(tmp_path: Path, config: MixinConfig, alert: str, default: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """The default config's tests of `alert` (of its files, `default`) against the rules `config` renders (each on the
    rules that can take part in its outcome: `_seeing`)."""
    text = rules_yaml(config)
    tests = yaml.load(default[RULES_TEST_FILE], Loader=_LOADER)
    tests["tests"] = [t for t in tests["tests"] if t["name"].startswith(f"{alert} ")]
    return _promtool_tests_run(tmp_path, [("rules", RuleFile(yaml.load(text, Loader=_LOADER)["groups"], text), tests)])


def test_committed_files_are_what_the_generator_writes(mixin_files: Mapping[str, str]) -> None:
    for relative, content in mixin_files.items():
        path = ROOT / relative
        assert path.exists(), f"{relative} is missing: run `cdcwatch mixin generate`"
        assert path.read_text(encoding="utf-8") == content, f"{relative} drifted: run `cdcwatch mixin generate`"


def test_mixin_generate_is_the_one_generator(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            mixin_files: Mapping[str, str]) -> None:
    """`cdcwatch mixin generate` writes every rendered file and, in a tree with docs/, the generated reference pages
    (stale here); `dashboards` only previews, so no other command writes any of these files."""
    pages = [*DOCS_PAGES, *MIXIN_DOCS_PAGES]
    for relative in pages:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("stale\n", encoding="utf-8")
    (tmp_path / "charts" / "cdcwatch").mkdir(parents=True)
    (tmp_path / "charts" / "cdcwatch" / "Chart.yaml").write_text("name: cdcwatch\n", encoding="utf-8")
    assert main(["mixin", "generate", "--out", str(tmp_path)]) == 0
    written = capsys.readouterr().out.split()
    assert sorted(written) == sorted(str(tmp_path / name) for name in [*mixin_files, *pages])
    for relative in pages:
        assert (tmp_path / relative).read_text(encoding="utf-8") == (ROOT / relative).read_text(encoding="utf-8")


def test_mixin_generate_into_a_directory_of_your_own_writes_only_what_you_deploy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], mixin_files: Mapping[str, str]) -> None:
    assert main(["mixin", "generate", "--out", str(tmp_path)]) == 0
    written = {str(Path(path).relative_to(tmp_path)).split("/")[0] for path in capsys.readouterr().out.split()}
    assert written == {"alerts", "alertmanager", "dashboards"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alertmanager", "alerts", "dashboards"]


def test_promtool_checks_and_tests_every_rule(tmp_path: Path) -> None:
    """promtool checks the committed rule file and runs the committed test file on it, each test on the rules of the
    file that can take part in its outcome (`_seeing`: the same outcome as on the whole file, for a third of
    promtool's work)."""
    checked = subprocess.run([tool("promtool"), "check", "rules", str(ROOT / RULES_FILE)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    text = (ROOT / RULES_FILE).read_text(encoding="utf-8")
    tests = yaml.load((ROOT / RULES_TEST_FILE).read_text(encoding="utf-8"), Loader=_LOADER)
    assert tests["rule_files"] == [Path(RULES_FILE).name]
    tested = _promtool_tests_run(tmp_path, [("committed", RuleFile(yaml.load(text, Loader=_LOADER)["groups"], text), tests)])
    assert tested.returncode == 0, _failures(tested)


def test_every_alert_and_recording_rule_is_tested(mixin_files: Mapping[str, str]) -> None:
    tests = yaml.load(mixin_files[RULES_TEST_FILE], Loader=_LOADER)["tests"]
    alerts = {check["alertname"] for t in tests for check in t.get("alert_rule_test", [])}
    recorded = {check["expr"].split("{")[0] for t in tests for check in t.get("promql_expr_test", [])}
    assert alerts == {a.name for a in ALERTS} and recorded == {r.record for r in RECORDING_RULES}


@pytest.mark.parametrize("change", [{"thresholds": {"kafka_lag_seconds": 10_000}},
                                    {"durations": {"warning": "11m"}}, {"durations": {"warning": "9m"}}])
def test_promtool_tests_fail_when_a_threshold_or_a_for_moves(tmp_path: Path, change: dict, mixin_files: Mapping[str, str]) -> None:
    """A higher threshold never fires; a later `for` misses the firing evaluation, an earlier one fires one
    evaluation too soon."""
    assert _promtool_test(tmp_path / "default", MixinConfig(), "CdcKafkaConsumerLagHigh", mixin_files).returncode == 0
    tested = _promtool_test(tmp_path / "changed", MixinConfig.model_validate(change), "CdcKafkaConsumerLagHigh", mixin_files)
    assert tested.returncode != 0 and "CdcKafkaConsumerLagHigh fires: 15 minutes behind" in tested.stdout + tested.stderr


def test_every_alert_is_complete_and_has_a_runbook_section() -> None:
    runbook = (ROOT / "docs" / "runbook.md").read_text(encoding="utf-8")
    anchors = {re.sub(r"[^a-z0-9]", "", line[3:].lower()) for line in runbook.splitlines() if line.startswith("## ")}
    config = MixinConfig()
    for group in rule_groups(config)["groups"]:
        for rule in (r for r in group["rules"] if "alert" in r):
            assert rule["for"] and rule["labels"]["severity"] in ("critical", "warning", "info"), rule["alert"]
            assert set(rule["annotations"]) == {"summary", "description", "runbook_url", "dashboard_url"}, rule["alert"]
            assert rule["annotations"]["runbook_url"] == f"{config.runbook_base_url}#{rule['alert'].lower()}"
            assert rule["alert"].lower() in anchors, f"docs/runbook.md has no section for {rule['alert']}"


@pytest.mark.dashboards
@pytest.mark.parametrize("shape", ["everything", "no Spark"])
def test_every_alert_links_to_a_board_of_the_deployment_with_variables_it_has(shape: str) -> None:
    """`dashboard_url`: a generated board of the deployment, each variable one the board has, set from a label the
    alert fires with (pint checks the query keeps it); the area's own board where it is deployed."""
    from cdcwatch.mixin.dashboards import build_dashboards  # the dashboards extra

    config = _shape(shape).model_copy(update={"grafana_url": "https://grafana.example.com"})
    boards = build_dashboards(config)
    linked = set()
    for group in rule_groups(config)["groups"]:
        for rule in (r for r in group["rules"] if "alert" in r):
            url = urllib.parse.urlparse(rule["annotations"]["dashboard_url"])
            uid = url.path.removeprefix("/d/")
            assert url.netloc == "grafana.example.com" and f"{uid}.json" in boards, (rule["alert"], url)
            names = {v["name"] for v in boards[f"{uid}.json"]["templating"]["list"]}
            variables = urllib.parse.parse_qs(url.query)
            assert variables and {k.removeprefix("var-") for k in variables} <= names, (rule["alert"], url.query)
            assert all(re.fullmatch(r"\{\{ \$labels\.\w+ \}\}", v[0]) for v in variables.values()), url.query
            linked.add(uid)
            if f"{group['name']}.json" in boards:
                assert uid == group["name"], rule["alert"]
    assert linked == {name.removesuffix(".json") for name in boards}


def test_the_monitor_itself_is_never_critical() -> None:
    own = [a for a in ALERTS if a.name.startswith("Cdcwatch")]
    assert own and all(a.severity != "critical" for a in own)


def _read(expr: str, within: frozenset[str] = frozenset()) -> set[str]:
    """The metrics an expression reads, recording rules replaced by what they read (a rule that reads its own
    previous value, to remember it, adds nothing)."""
    recorded: dict[str, str] = {}
    for r in RECORDING_RULES:  # a name some rules record together (one per stage) reads what they all read
        recorded[r.record] = f"{recorded[r.record]}\nor\n{r.expr}" if r.record in recorded else r.expr
    names: set[str] = set()
    for name in metrics_in(expr) - within:
        names |= _read(recorded[name], within | {name}) if name in recorded else {name}
    return names


def _series_names(series: dict[str, str]) -> set[str]:
    return {s.split("{")[0] for s in series}


def test_quiet_cases_feed_exactly_the_metrics_each_rule_reads() -> None:
    """So an alert is quiet because of the values, never because an input is missing (what it reads: its
    expression, and the queries of its description, each between backquotes)."""
    for alert in ALERTS:
        read = _read(alert.expr) | _read(" ".join(re.findall(r"`([^`]*)`", alert.description)))
        assert _series_names(alert.quiet.series) == read, alert.name
        assert _series_names(alert.fires.series) <= read, alert.name


def test_recording_rules_keep_the_series_identity() -> None:
    """job and instance always, target for the exporter's series (inhibition and drill-down need them); a rule
    joining several collectors' series is keyed by server instead."""
    for recording in RECORDING_RULES:
        labels = set(recording.example.labels or {})
        if recording.pipeline:
            assert "server" in labels and not {"job", "instance"} & labels, recording.record
            continue
        assert {"job", "instance"} <= labels, recording.record
        assert "%(cdcwatch)s" not in recording.expr or "target" in labels, recording.record


def test_thresholds_are_written_exactly() -> None:
    config = MixinConfig.model_validate({"thresholds": {"slot_retained_wal_bytes": 53687091200, "spark_duplicates_ratio": 0.00001}})
    rules = rules_yaml(config)
    assert "> 53687091200" in rules and "> 0.00001" in rules
    assert not re.search(r"\d[eE][+-]?\d", rules), "a number in exponent form"
    assert [exact(v) for v in (60.0, 0.1, 10 * 1024**3, 1e-7)] == ["60", "0.1", "10737418240", "0.0000001"]


@pytest.mark.parametrize("template, value, text", [
    ("{{ $value | humanizeDuration }}", 4800, "1h 20m 0s"),
    ("{{ $value | humanizeDuration }}", 0.25, "250ms"),
    ("{{ $value | humanizeDuration }}", 8, "8s"),
    ("{{ $value | humanize1024 }}", 20e9, "18.63Gi"),
    ("{{ $value | humanizePercentage }}", 82 / 8192, "1.001%"),
    ("{{ $value | humanize }}", 1234567, "1.235M"),
    ("{{ $value | humanize }}", 0.0123, "12.3m"),
    ("{{ $labels.server }} is late", 0, "inventory is late"),
])
def test_annotation_templates_render_as_prometheus_does(template: str, value: float, text: str) -> None:
    assert render_annotation(template, {"server": "inventory"}, value) == text


@pytest.mark.parametrize("failures, text", [((), "down: x"), (("other", "refused"), "down (other) (refused): x")])
def test_annotation_queries_render_one_piece_per_answer(failures: tuple[str, ...], text: str) -> None:
    """An annotation naming what a query answers (promtool checks the rules' own against Prometheus)."""
    template = ('down{{ range printf `max by (failure) (f{target=%q})` $labels.target | query | sortByLabel "failure" }}'
                " ({{ .Labels.failure }}){{ end }}: x")
    assert render_annotation(template, {"target": "connect"}, 0, {"failure": failures}) == text


@pytest.mark.dashboards
def test_rules_and_dashboards_use_only_metrics_cdcwatch_produces() -> None:
    from cdcwatch.mixin.dashboards import build_dashboards, panel_queries  # the dashboards extra

    produced = set(metric_types()) | {f"{name}_{part}" for name, kind in metric_types().items() if kind == "histogram"
                                      for part in ("bucket", "sum", "count")}
    produced |= {"up", "ALERTS"} | {r.record for r in RECORDING_RULES}
    config = MixinConfig()
    expressions = [expression(r.expr, config) for r in RECORDING_RULES] + [expression(a.expr, config) for a in ALERTS]
    expressions += [expr for model in build_dashboards(config).values() for _, expr in panel_queries(model)]
    used = {name for expr in expressions for name in metrics_in(expr)}
    assert len(used) > 20, "no metric found: the pattern is wrong"
    assert used <= produced, sorted(used - produced)


def test_selectors_and_thresholds_come_from_the_config() -> None:
    config = load_mixin_config(CONFFILES / "mixin-valid.yaml")
    rules = rules_yaml(config)
    assert 'cdcwatch_up{job="cdc", namespace=~"cdc|cdc-staging", collector!="connect"} == 0' in rules
    assert "cdcwatch_spark_freshness_seconds" in rules and ") > 42" in rules and "> 53687091200" in rules
    assert "https://wiki.example.com/cdcwatch/runbook#cdcwatchtargetdown" in rules
    assert 'job="cdcwatch"' not in rules


@pytest.mark.parametrize("heading, live_sources", [
    ("Proven live: ", [ROOT / "tests" / "integration" / "test_observability.py", ROOT / "devstack" / "scenarios.py"]),
    ("Fire live before the loss: ", [ROOT / "tests" / "integration" / "test_replication_slots.py",
                                     ROOT / "tests" / "integration" / "test_kafka_lag.py"]),
])
def test_the_runbook_names_the_alerts_the_integration_tests_prove_live(heading: str, live_sources: list[Path]) -> None:
    names = {a.name for a in ALERTS}
    proven = {n for path in live_sources for n in re.findall(r"\b(Cdc\w+)\b", path.read_text()) if n in names}
    # named as proven quiet, or as covered by another alert (kept from paging), unless some scenario makes it fire
    proven -= {a for s in SCENARIOS.values() for a in (*s.quiet, *s.covered)} - {s.alert for s in SCENARIOS.values()}
    line = next(li for li in (ROOT / "docs" / "runbook.md").read_text().splitlines() if li.startswith(heading))
    assert proven and set(line.removeprefix(heading).split(", ")) == proven


def test_the_runbook_has_the_fault_matrix_the_demo_tests_check() -> None:
    """The faults, their pages and what they keep from paging, as the demo's scenarios define and its tests check
    them: paste `devstack.scenarios.fault_matrix()` into the runbook when a scenario changes."""
    assert "\n".join(fault_matrix()) in (ROOT / "docs" / "runbook.md").read_text(encoding="utf-8")


SHAPES = {
    "everything": {},
    "no Spark": {"spark": False},
    "no Connect REST": {"connect_rest": False},
    "Debezium and Kafka only": {"connect_rest": False, "connect_jmx": False, "postgres": False, "mysql": False,
                                "spark": False},
}
"""Deployment shapes (`stages` of the mixin config) the rules are generated and proven for."""


def _shape(name: str) -> MixinConfig:
    return MixinConfig.model_validate({"stages": SHAPES[name]})


def _rule_exprs(config: MixinConfig) -> dict[str, str]:
    """Rule name → expression; the rules recording one name together (one per stage), joined."""
    exprs: dict[str, str] = {}
    for rule in (r for g in rule_groups(config)["groups"] for r in g["rules"]):
        name = rule.get("alert") or rule["record"]
        exprs[name] = f"{exprs[name]}\nor\n{rule['expr']}" if name in exprs else rule["expr"]
    return exprs


@pytest.mark.dashboards
@pytest.mark.parametrize("shape", SHAPES)
def test_a_deployment_reads_only_the_series_of_its_stages(shape: str) -> None:
    """No rule, panel or inhibition of a stage left out, and no rule or panel of another stage reading its series."""
    from cdcwatch.mixin.dashboards import build_dashboards, panel_queries  # the dashboards extra

    config = _shape(shape)
    exprs = _rule_exprs(config)
    panels = [expr for model in build_dashboards(config).values() for _, expr in panel_queries(model)]
    variables = [v["query"] for model in build_dashboards(config).values() for v in model["templating"]["list"]
                 if v["type"] == "query"]
    read = {name for expr in [*exprs.values(), *panels, *variables]
            for name in metrics_in(expr) | set(re.findall(r"\b(cdcwatch_\w+)", expr))}
    assert stages_of(read) <= config.stages.enabled()
    assert {"CdcPipelineStalled", "CdcKafkaDataTooOld", "CdcwatchEndpointDown", "CdcDebeziumConnectorDisconnected",
            "CdcKafkaConsumerNotProgressing"} <= set(exprs)
    inhibited = {n for rule in inhibit_rules(config) for m in rule["source_matchers"] + rule["target_matchers"]
                 if m.startswith("alertname") for n in re.findall(r"\w+", m.split("=", 1)[1])}
    assert inhibited <= set(exprs), sorted(inhibited - set(exprs))


@pytest.mark.dashboards
def test_a_deployment_without_spark_has_no_spark_alert_and_its_servers_from_every_stage() -> None:
    from cdcwatch.mixin.dashboards import build_dashboards  # the dashboards extra

    config = _shape("no Spark")
    assert not [a for a in _rule_exprs(config) if "Spark" in a] and "CdcSparkDriverAbsent" in _rule_exprs(MixinConfig())
    overview = build_dashboards(config)["cdcwatch-overview.json"]
    server = next(v for v in overview["templating"]["list"] if v["name"] == "server")
    assert "cdcwatch_debezium_connected" in server["query"] and "cdcwatch_kafka_topic_partitions" in server["query"]
    assert "spark" not in server["query"]


ALL_SHAPES = {" ".join(["without", *(s for s, on in zip(STAGES, ons, strict=True) if not on)]) if not all(ons) else "everything":
              dict(zip(STAGES, ons, strict=True)) for ons in itertools.product((True, False), repeat=len(STAGES))}
"""Every deployment shape the mixin config can describe: each stage on or off."""


class RuleFile:
    """A rule file's rules in the order promtool evaluates them (group by group), indexed by the names each one writes
    (its record, or ALERTS for an alert) and reads (in its expression and its templates: an annotation may query
    Prometheus), and each rule's text as the file has it."""

    def __init__(self, groups: list[dict[str, Any]], text: str | None = None) -> None:
        self.groups = groups
        self.rules = [(g, rule) for g, group in enumerate(groups) for rule in group["rules"]]
        self.names = [rule.get("alert") or rule["record"] for _, rule in self.rules]
        self.alerts = frozenset(i for i, (_, rule) in enumerate(self.rules) if "alert" in rule)
        self.writers: dict[str, set[int]] = {}
        for i, (_, rule) in enumerate(self.rules):
            self.writers.setdefault(rule.get("record", "ALERTS"), set()).add(i)
        written = frozenset(self.writers)
        self.reads = [_reads(rule, written) for _, rule in self.rules]
        self.sources = {i for i, (_, rule) in enumerate(self.rules) if _from_nothing(rule["expr"])}
        self.ids = [_RULE_IDS.setdefault(json.dumps([groups[g]["name"], rule], sort_keys=True), len(_RULE_IDS))
                    for g, rule in self.rules]
        self.source = text
        self._checked: dict[str, tuple[tuple[int, ...], frozenset[str]]] = {}

    def named(self, name: str) -> set[int]:
        return {i for i, own in enumerate(self.names) if own == name}

    def checked(self, check: dict[str, Any]) -> tuple[tuple[int, ...], frozenset[str]]:
        """What decides a check of a test on these rules: the rules it reads (`closure`, as ids of their group and
        content, in the file's order) and every name they read."""
        key = "alertname " + check["alertname"] if "alertname" in check else check["expr"]
        if key not in self._checked:
            if "alertname" in check:
                used, read = self.closure(self.named(check["alertname"]), set())
            else:
                read = set(_words(check["expr"]))
                used, read = self.closure(set(), read | (set(self.writers) if _EVERY_NAME in read else set()))
            self._checked[key] = tuple(self.ids[i] for i in sorted(used)), frozenset(read)
        return self._checked[key]

    def closure(self, wanted: set[int], read: set[str]) -> tuple[set[int], set[str]]:
        """The rules `wanted` and those writing a name they or `read` hold, recursively (a rule reading ALERTS: every
        alert); and every name all these read."""
        wanted, read, done = set(wanted), set(read), set()
        todo = wanted | {i for name in read for i in self.writers.get(name, ())}
        while todo:
            i = todo.pop()
            done.add(i)
            read |= self.reads[i]
            todo |= {j for name in self.reads[i] for j in self.writers.get(name, ())} - done
        return wanted | done, read

    @functools.cached_property
    def pieces(self) -> tuple[list[str], list[str]]:
        assert self.source is not None
        return _pieces(self.source, self.groups)

    def text(self, kept: list[int]) -> str:
        """A rule file of the rules `kept` (indices, in order) in their groups: the file's own text of each where
        it has one."""
        if self.source is None:
            groups: dict[int, list[dict[str, Any]]] = {}
            for i in kept:
                groups.setdefault(self.rules[i][0], []).append(self.rules[i][1])
            return yaml.safe_dump({"groups": [{**self.groups[g], "rules": rules} for g, rules in groups.items()]},
                                  sort_keys=False)
        heads, texts = self.pieces
        pieces, group = ["groups:\n"], -1
        for i in kept:
            if self.rules[i][0] != group:
                group = self.rules[i][0]
                pieces.append(heads[group])
            pieces.append(texts[i])
        return "".join(pieces)


_RULE_IDS: dict[str, int] = {}
"""A number for each rule (its group's name and its content) met: the same rule of any file has the same."""
_EVERY_NAME = "__name__"
_CONSTANTS = frozenset({"vector", "absent", "absent_over_time", "scalar", "pi", "day_of_month", "day_of_week", "day_of_year",
                        "days_in_month", "hour", "minute", "month", "year"})
"""PromQL functions with a result where no series exists (or of a series that does not)."""


def _from_nothing(expr: str) -> bool:
    """Whether an expression may have a result while no series it selects exists."""
    return bool(_words(expr) & _CONSTANTS) or not metrics_in(expr)


def _reads(rule: dict[str, Any], written: frozenset[str]) -> frozenset[str]:
    """Every name a rule can read (a `__name__` matcher: any the rules write)."""
    words = _words("\n".join([rule["expr"], *map(str, rule.get("labels", {}).values()),
                              *map(str, rule.get("annotations", {}).values())]))
    return words | written if _EVERY_NAME in words else words


def _pieces(text: str, groups: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """A rule file's text (one group head `- name:` and one rule `  - alert:` or `  - record:` a line start, as the
    generator writes it) cut into its groups' heads and its rules' texts, each checked against the rules."""
    heads: list[str] = []
    texts: list[str] = []
    for piece in re.split(r"^(?=- |  - )", text, flags=re.MULTILINE)[1:]:
        (heads if piece.startswith("- ") else texts).append(piece)
    rules = [rule for group in groups for rule in group["rules"]]
    assert len(heads) == len(groups) and len(texts) == len(rules), "the rule file is not one rule a piece"
    for group, head in zip(groups, heads, strict=True):
        assert yaml.load("groups:\n" + head, Loader=_LOADER)["groups"] == [{**group, "rules": None}], head
    for rule, piece in zip(rules, texts, strict=True):
        assert yaml.load("groups:\n- name: x\n  rules:\n" + piece, Loader=_LOADER)["groups"][0]["rules"] == [rule], piece
    return heads, texts


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _series_name(series: dict[str, Any]) -> str:
    """An input series' metric name (`__name__` for one written `{__name__="..."}`: it may be any)."""
    return str(series["series"]).split("{")[0].strip() or _EVERY_NAME


Outcome = tuple[str, tuple[int, ...]]
"""A check with the input series and the rules (`RuleFile.ids`) that decide its outcome."""


def _outcome_key(test: dict[str, Any], check: dict[str, Any], rules: RuleFile, interval: str = "") -> Outcome:
    """What decides the outcome of one check of a promtool test: the check, the rules it reads (recording rules
    followed, in the rule file's order, with their groups: the order promtool evaluates them in), the test's input
    series those rules can select, and the evaluation intervals. No other rule or series of the file can change it."""
    used, read = rules.checked(check)
    series = [s for s in test["input_series"] if {_series_name(s), _EVERY_NAME} & read or _series_name(s) == _EVERY_NAME]
    return json.dumps([check, series, test.get("interval"), interval], sort_keys=True), used


@functools.cache
def _words(expr: str) -> frozenset[str]:
    """Every name in an expression that could be a metric or a recording rule (more than `metrics_in`, to be safe)."""
    return frozenset(re.findall(r"[a-zA-Z_:][\w:]*", expr))


def _seeing(test: dict[str, Any], rules: RuleFile) -> list[int]:
    """The rules of a promtool test's file that can take part in its outcome: those its checks read (as
    `_outcome_key`), those that may record or fire with no input (`absent`, `vector`, ...), and every rule reading a
    series the test has (an input series, one those rules record, ALERTS once an alert is among them), with all
    they read, until no other rule reads any. promtool evaluates every rule of the file at every step and fails a
    test on any rule's error; a rule left out reads no series that exists in the test, so it selects nothing and
    has no result at every step: it can neither fail the test nor write a series another rule reads. So the test
    passes on these rules exactly when it passes on the whole file."""
    kind = "alert_rule_test" if "alert_rule_test" in test else "promql_expr_test"
    inputs = {_series_name(s) for s in test["input_series"]}
    wanted: set[int] = set()
    read: set[str] = set()
    for check in test[kind]:
        if "alertname" in check:
            wanted |= rules.named(check["alertname"])
        else:
            read |= _words(check["expr"])
    if _EVERY_NAME in read:
        read |= set(rules.writers)
    wanted |= rules.sources
    everything = set(range(len(rules.rules)))
    while True:
        wanted, read = rules.closure(wanted, read)
        live = inputs | {rules.names[i] for i in wanted if i not in rules.alerts}
        if wanted & rules.alerts:
            live |= {"ALERTS", "ALERTS_FOR_STATE"}
        grown = {i for i in everything - wanted
                 if rules.reads[i] & live or _EVERY_NAME in live or _EVERY_NAME in rules.reads[i]}
        if not grown:
            return sorted(wanted)
        wanted |= grown


def _promtool_tests_run(tmp_path: Path, suites: list[tuple[str, RuleFile, dict[str, Any]]]) -> subprocess.CompletedProcess[str]:
    """`promtool test rules` of each (label, rule file, test file), in one run: each test on the rules of the file
    that can take part in its outcome (`_seeing`: it passes on them exactly when it passes on the whole file,
    and promtool evaluates these alone at every step), the tests of the same such rules in one file; each test named
    with its label first."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    files: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for label, rules, tests in suites:
        settings = json.dumps({k: v for k, v in tests.items() if k not in ("rule_files", "tests")})
        for test in tests["tests"]:
            files.setdefault((rules.text(_seeing(test, rules)), settings), []).append({**test, "name": f"{label}: {test['name']}"})
    names = []
    for n, ((text, settings), batch) in enumerate(files.items()):
        (tmp_path / f"rules-{n}.yml").write_text(text)
        (tmp_path / f"test-{n}.yml").write_text(yaml.safe_dump({"rule_files": [f"rules-{n}.yml"], **json.loads(settings),
                                                                "tests": batch}, sort_keys=False))
        names.append(str(tmp_path / f"test-{n}.yml"))
    return subprocess.run([tool("promtool"), "test", "rules", *names], capture_output=True, text=True)


def _failures(tested: subprocess.CompletedProcess[str]) -> str:
    failed = [run for run in tested.stdout.split("Unit Testing:") if "FAILED" in run]
    return "".join(run[:3000] for run in failed) or tested.stderr


Shapes = dict[str, tuple[MixinConfig, list[dict[str, Any]], dict[str, Any]]]


@pytest.fixture(scope="module")
def every_shape() -> Shapes:
    """Each deployment shape's config, rule groups and promtool test file."""
    shapes = {}
    for shape, stages in ALL_SHAPES.items():
        config = MixinConfig.model_validate({"stages": stages})
        shapes[shape] = (config, rule_groups(config)["groups"], promtool_tests(config, Path(RULES_FILE).name))
    return shapes


def test_every_deployed_alert_has_a_firing_and_a_quiet_test_in_every_shape(every_shape: Shapes) -> None:
    for shape, (_, groups, tests) in every_shape.items():
        alerts = {r["alert"] for g in groups for r in g["rules"] if "alert" in r}
        checks = [c for t in tests["tests"] for c in t.get("alert_rule_test", [])]
        firing = {c["alertname"] for c in checks if c["exp_alerts"]}
        quiet = {c["alertname"] for c in checks if not c["exp_alerts"]}
        assert alerts == firing == quiet, (shape, sorted(alerts - firing), sorted(alerts - quiet))


def _unproven(tests: dict[str, Any], rules: RuleFile, proven: set[Outcome]) -> dict[str, Any]:
    """A promtool test file of `rules`, less the checks whose outcome a check in `proven` decides already
    (`_outcome_key`); a test left without checks is left out. Adds the keys of those it keeps to `proven`."""
    kept = []
    for test in tests["tests"]:
        kind = "alert_rule_test" if "alert_rule_test" in test else "promql_expr_test"
        checks = []
        for check in test[kind]:
            if (key := _outcome_key(test, check, rules, tests.get("evaluation_interval", ""))) not in proven:
                proven.add(key)
                checks.append(check)
        if checks:
            kept.append({**test, kind: checks})
    return {**tests, "tests": kept}


def test_promtool_passes_the_whole_test_file_of_every_deployment_shape(tmp_path: Path, every_shape: Shapes) -> None:
    """The generated test file of each of the 256 shapes against its rule file, in one promtool run. As they are, the
    shapes' files hold about 27,000 tests, a minute of promtool each file: a check whose outcome is decided by exactly
    what decides one already run (`_outcome_key`) runs once, in the first shape that has it, those of every stage
    (the committed file's) in `test_promtool_checks_and_tests_every_rule`. That leaves about 450 tests of 20 shapes,
    each run on the rules of its shape's file that can take part in its outcome (`_seeing`)."""
    proven: set[Outcome] = set()
    _, groups, tests = every_shape["everything"]
    _unproven(tests, RuleFile(groups), proven)
    suites = []
    for shape, (config, groups, tests) in every_shape.items():
        rules = RuleFile(groups, rules_yaml(config))  # the rules' texts as the rule file has them, checked against them
        if (unproven := _unproven(tests, rules, proven))["tests"]:
            suites.append((shape, rules, unproven))
    assert len(suites) > 10
    tested = _promtool_tests_run(tmp_path, suites)
    assert tested.returncode == 0, _failures(tested)


def _exported_labels() -> dict[str, set[str]]:
    """Each metric cdcwatch exports (exporter and Spark listener) → the labels its series can carry."""
    from cdcwatch.collectors import COLLECTORS
    from cdcwatch.exporter import SELF_METRICS
    from cdcwatch.mixin.stages import _table
    from cdcwatch.spark import SPARK_METRICS

    specs = [*SELF_METRICS.values(), *SPARK_METRICS.values()]
    exported = {spec.name: set(spec.labels) for spec in specs}
    for module_specs, bean_labels in _spec_tables():
        exported |= {spec.name: set(spec.labels) | bean_labels for spec in module_specs}
    assert set(_table(COLLECTORS)) <= set(exported)
    every = {"job", "instance", "target", "collector"}  # Prometheus' own, and every exporter series' target
    return {name: labels | every | ({"le"} if name.endswith("_bucket") else set()) for name, labels in
            {**exported, **{f"{n}_bucket": ls for n, ls in exported.items()}}.items()}


def _spec_tables() -> list[tuple[list[Any], set[str]]]:
    """Each kind of target's specs (the collector registry's), with the labels its series carry that no spec declares
    (Debezium's, from the MBean names; the canary's server and topic)."""
    from cdcwatch.collectors import COLLECTORS

    return [(list(entry.specs()), set(entry.series_labels)) for entry in COLLECTORS]


def test_rules_select_metrics_by_labels_they_carry() -> None:
    """A matcher on a label a metric does not carry never matches (or, negated, always does), and promtool's tests,
    which write their own input series, cannot see it: every label a rule selects a metric by is one it exports."""
    exported = _exported_labels()
    rules = yaml.safe_load((ROOT / RULES_FILE).read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            for name, matchers in re.findall(r"\b(cdcwatch_\w+)\{([^}]*)\}", rule["expr"]):
                labels = set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)\s*\"", matchers))
                if name in exported:
                    assert labels <= exported[name], (rule.get("alert") or rule.get("record"), name, labels - exported[name])


LITERAL_SHAPES = {"everything": {}, **{f"no {stage}": {stage: False} for stage in STAGES},
                  "Debezium alone": {stage: stage == "debezium" for stage in STAGES},
                  "neither Debezium nor Connect REST": {"debezium": False, "connect_rest": False}}
"""Every stage left out once, and the shapes where a rule falls back to its last literal block (a capture stage
without any idle proof, cdcwatch's targets down without the Connect and Debezium collectors)."""


def _area_files() -> dict[str, Path]:
    """Rule group → the module it is written in (cdcwatch/mixin/alerts/<area>.py)."""
    return {group.name: Path(next(m.__file__ for m in list(sys.modules.values()) if getattr(m, "GROUP", None) is group))
            for group in GROUPS}


def _literal_parts(expr: str, source: str) -> list[str] | None:
    """`expr` cut into the fewest runs of its lines that each stand verbatim in `source` at one indentation (the
    parts of `with_stages`), or None where a line stands nowhere."""
    lines, parts, start = expr.splitlines(), [], 0
    while start < len(lines):
        end = next((end for end in range(len(lines), start, -1)
                    if any(textwrap.indent("\n".join(lines[start:end]), " " * n) in source for n in range(0, 41, 2))),
                   None)
        if end is None:
            return None
        parts.append("\n".join(lines[start:end]))
        start = end
    return parts


@pytest.mark.parametrize("config", [*LITERAL_SHAPES, "mixin-valid.yaml"])
def test_every_rule_expression_is_written_literally_in_its_area_file(config: str) -> None:
    """Grepping a rule's name finds its whole expression: each rule the generator writes (for each deployment shape,
    and for other selectors and thresholds) is, its placeholders filled, verbatim in its area's module (at the
    indentation of the code around it), whole or as the literal parts a shape keeps (`with_stages`): never built
    from fragments of lines."""
    mixin = (load_mixin_config(CONFFILES / config) if config.endswith(".yaml")
             else MixinConfig.model_validate({"stages": LITERAL_SHAPES[config]}))
    values = mixin.placeholders()
    areas = _area_files()
    for group in rule_groups(mixin)["groups"]:
        source = areas[group["name"]].read_text(encoding="utf-8")
        filled = re.sub(r"%\((\w+)\)s", lambda m: values.get(m[1], m[0]), source)
        for rule in group["rules"]:
            name = rule.get("alert") or rule["record"]
            assert f'"{name}"' in source, f"{name} is not named in {areas[group['name']].name}"
            assert _literal_parts(rule["expr"], filled) is not None, (
                f"{name}: its expression is not written in {areas[group['name']].name} as the rule file has it")


def test_debezium_on_mysql_alone_reads_a_source_that_writes_nothing_as_idle(tmp_path: Path) -> None:
    """With Debezium and a MySQL or MariaDB source but neither PostgreSQL, Kafka nor Spark, the only proof that a
    capture without events is idle is a binlog the source has not written to: without it, 10 quiet minutes page."""
    stages = {stage: stage in ("debezium", "connect_rest", "connect_jmx", "mysql") for stage in STAGES}
    config = MixinConfig.model_validate({"stages": stages})
    (tmp_path / Path(RULES_FILE).name).write_text(rules_yaml(config))
    events = f'cdcwatch_debezium_events_seen_total{{{JVM},plugin="mysql",server="inventory",context="streaming"}}'
    binlog = f'{EXPORTER},target="maria",server="inventory"'

    def test(why: str, position: str, fires: bool) -> dict[str, Any]:
        series = [{"series": events, "values": "500x40"},
                  {"series": f"cdcwatch_mysql_binlog_write_file_number{{{binlog}}}", "values": "7x40"},
                  {"series": f"cdcwatch_mysql_binlog_write_position_bytes{{{binlog}}}", "values": position}]
        firing = ('ALERTS{alertname="CdcPipelineStalled",alertstate="firing",server="inventory",severity="critical",'
                  'stage="capture",state="stalled"}')
        return {"name": why, "interval": "1m", "input_series": series, "promql_expr_test": [
            {"expr": 'ALERTS{alertname="CdcPipelineStalled"}', "eval_time": "30m",
             "exp_samples": [{"labels": firing, "value": 1}] if fires else []}]}

    (tmp_path / "test.yml").write_text(yaml.safe_dump({"rule_files": [Path(RULES_FILE).name], "tests": [
        test("no event, the binlog still: idle", "4096x40", fires=False),
        test("no event while the source writes its binlog: stalled", "4096+4096x40", fires=True)]}))
    tested = subprocess.run([tool("promtool"), "test", "rules", str(tmp_path / "test.yml")], capture_output=True, text=True)
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr
