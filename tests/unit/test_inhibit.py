"""The shipped Alertmanager inhibitions: a valid configuration (amtool), labels that can match, and
their effect on a real Alertmanager fed the alerts' own example labels through its v2 API."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdcwatch.mixin import INHIBIT_FILE, RULES_FILE, MixinConfig
from cdcwatch.mixin.alerts import ALERTS
from cdcwatch.mixin.inhibit import Inhibition, deployed_inhibitions
from tests.tools import ROOT, tool

_BY_NAME = {a.name: a for a in ALERTS}
INHIBITIONS = deployed_inhibitions(MixinConfig())
"""The shipped inhibitions (every stage deployed)."""


def _config(tmp_path: Path) -> Path:
    """alertmanager.yml: a receiver that sends nothing, and the shipped inhibitions."""
    path = tmp_path / "alertmanager.yml"
    config = {"route": {"receiver": "null"}, "receivers": [{"name": "null"}],
              **yaml.safe_load((ROOT / INHIBIT_FILE).read_text())}
    path.write_text(yaml.safe_dump(config))
    return path


def test_amtool_accepts_the_inhibitions(tmp_path: Path) -> None:
    checked = subprocess.run([tool("amtool"), "check-config", str(_config(tmp_path))], capture_output=True, text=True)
    assert checked.returncode == 0 and f"{len(INHIBITIONS)} inhibit rules" in checked.stdout, checked.stdout + checked.stderr


def _alertnames(matcher: str, names: set[str]) -> set[str]:
    """The alert names an `alertname="A"` or `alertname=~"A|B"` matcher selects (anchored, as Alertmanager does)."""
    operator, value = re.fullmatch(r'alertname(=~|=)"(.*)"', matcher).groups()  # type: ignore[union-attr]
    return {n for n in names if (re.fullmatch(value, n) if operator == "=~" else n == value)}


def test_the_shipped_inhibitions_only_silence_alerts_of_equal_or_lower_severity() -> None:
    """Read from the shipped files: no rule lets an alert silence one of a higher severity (a warning a page)."""
    rank = {"info": 0, "warning": 1, "critical": 2}
    severity = {r["alert"]: r["labels"]["severity"] for g in yaml.safe_load((ROOT / RULES_FILE).read_text())["groups"]
                for r in g["rules"] if "alert" in r}
    rules = yaml.safe_load((ROOT / INHIBIT_FILE).read_text())["inhibit_rules"]
    assert rules
    for rule in rules:
        sources = set.union(*(_alertnames(m, set(severity)) for m in rule["source_matchers"] if m.startswith("alertname")))
        targets = set.union(*(_alertnames(m, set(severity)) for m in rule["target_matchers"] if m.startswith("alertname")))
        assert sources and targets, rule
        louder = {t: severity[t] for t in targets if rank[severity[t]] > min(rank[severity[s]] for s in sources)}
        assert not louder, (sorted(sources), louder)


def test_sources_and_targets_carry_the_equal_labels() -> None:
    """An `equal` label missing on either side would make Alertmanager never inhibit."""
    for inhibition in INHIBITIONS:
        assert inhibition.targets and not set(inhibition.sources) & set(inhibition.targets), inhibition.why
        for name in inhibition.sources + inhibition.targets:
            assert set(inhibition.equal) <= set(_BY_NAME[name].fires.labels or {}), (inhibition.why, name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Alertmanager:
    def __init__(self, url: str) -> None:
        self.url = url

    def post(self, alerts: list[dict[str, str]]) -> None:
        now = datetime.now(UTC)
        body = [{"labels": labels, "startsAt": now.isoformat(), "endsAt": (now + timedelta(hours=1)).isoformat()}
                for labels in alerts]
        request = urllib.request.Request(f"{self.url}/api/v2/alerts", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"}, method="POST")
        urllib.request.urlopen(request, timeout=5).close()

    def inhibited(self) -> dict[str, bool]:
        """Each alert (by its `case` label) → whether Alertmanager reports it inhibited."""
        with urllib.request.urlopen(f"{self.url}/api/v2/alerts", timeout=5) as response:
            return {a["labels"]["case"]: bool(a["status"]["inhibitedBy"]) for a in json.load(response)}


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[_Alertmanager]:
    port = _free_port()
    process = subprocess.Popen([tool("prometheus-alertmanager"), f"--config.file={_config(tmp_path)}",
                                f"--storage.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                                "--cluster.listen-address="], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{url}/-/ready", timeout=1).close()
                break
            except OSError:
                assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
                time.sleep(0.1)
        yield _Alertmanager(url)
    finally:
        process.terminate()
        process.wait(10)


_COMPARED = {label for i in INHIBITIONS for label in i.equal}


def _firing(name: str, case: str, **changed: str) -> dict[str, str]:
    """The alert's example labels, each label some inhibition compares set to `case`: the alerts of one
    case can only meet each other."""
    alert = _BY_NAME[name]
    labels = {**(alert.fires.labels or {}), "alertname": name, "severity": alert.severity}
    return {**labels, **{k: case for k in _COMPARED & set(labels)}, "case": case, **changed}


def _meets(labels: dict[str, str], matchers: tuple[tuple[str, str, str], ...]) -> bool:
    """Whether `labels` meet every matcher (`=`, `!=`, `=~`, `!~`; a regular expression anchored, as Alertmanager's)."""
    def meets(label: str, op: str, value: str) -> bool:
        found = labels.get(label, "")
        equal = re.fullmatch(value, found) is not None if op.endswith("~") else found == value
        return equal == op.startswith("=")
    return all(meets(*matcher) for matcher in matchers)


def _meeting(matchers: tuple[tuple[str, str, str], ...]) -> dict[str, str]:
    """Label values that meet the positive matchers (a regular expression's first alternative)."""
    return {label: value.split("|")[0] for label, op, value in matchers if op.startswith("=")}


def _unmet(op: str, value: str) -> str:
    """A label value that fails the matcher."""
    return value.split("|")[0] if op.startswith("!") else f"not {value}"


def _inhibits(rule: Inhibition, source: dict[str, str], target: dict[str, str]) -> bool:
    """Whether `rule` lets the firing alert `source` (its labels) inhibit the firing alert `target`."""
    return (source["alertname"] in rule.sources and target["alertname"] in rule.targets
            and _meets(source, rule.source_labels) and _meets(target, rule.target_labels)
            and all(source.get(label, "") == target.get(label, "") for label in rule.equal))


def _cases(inhibition: Inhibition) -> dict[str, tuple[dict[str, str], bool]]:
    """label `case` → (labels, inhibited?): per target, the source and the target as they fire together, the target
    inhibited by this rule; then the pair with one `equal` label of the target changed, and the pair with one further
    source or target matcher unmet, neither inhibited by this rule. Another rule may still inhibit either of a pair (a
    dead worker: its series by target, its pipelines by server; a stale target and its stall at apply)."""
    matched, target_matched = _meeting(inhibition.source_labels), _meeting(inhibition.target_labels)
    cases = {}
    for name in inhibition.targets:
        variants = [(name, {}, {})] + [(f"{name} other {k}", {k: f"not {name}"}, {}) for k in inhibition.equal]
        variants += [(f"{name} source {label} {op} {value} unmet", {}, {label: _unmet(op, value)})
                     for label, op, value in inhibition.source_labels]
        variants += [(f"{name} target {label} {op} {value} unmet", {label: _unmet(op, value)}, {})
                     for label, op, value in inhibition.target_labels]
        for index, (case, changed, source_changed) in enumerate(variants):
            source = _firing(inhibition.sources[0], case, **{**matched, **source_changed})
            target = _firing(name, case, **{**target_matched, **changed})
            assert _inhibits(inhibition, source, target) == (index == 0), (inhibition.why, case)
            cases[f"{case}: source"] = ({**source, "case": f"{case}: source"},
                                        any(_inhibits(rule, target, source) for rule in INHIBITIONS))
            cases[case] = (target, any(_inhibits(rule, source, target) for rule in INHIBITIONS))
    return cases


@pytest.mark.parametrize("inhibition", INHIBITIONS, ids=[i.sources[0] for i in INHIBITIONS])
def test_alertmanager_inhibits_exactly_what_the_rule_says(alertmanager: _Alertmanager, inhibition: Inhibition) -> None:
    cases = _cases(inhibition)
    alertmanager.post([labels for labels, _ in cases.values()])
    expected = {case: inhibited for case, (_, inhibited) in cases.items()}
    deadline = time.monotonic() + 15
    while (seen := alertmanager.inhibited()) != expected and time.monotonic() < deadline:
        time.sleep(0.2)
    assert seen == expected


def test_the_cases_can_fail(alertmanager: _Alertmanager) -> None:
    """Without its source, no target is inhibited: the expectations above are not met by accident."""
    inhibition = INHIBITIONS[2]
    cases = {case: c for case, c in _cases(inhibition).items() if not case.endswith(": source")}
    alertmanager.post([labels for labels, _ in cases.values()])
    time.sleep(1)
    seen: dict[str, Any] = alertmanager.inhibited()
    assert set(seen) == set(cases) and not any(seen.values())
