"""The Prometheus rule file and its `promtool test rules` file, rendered from the rule groups
(`cdcwatch.mixin.alerts`) with a `MixinConfig`.

Per alert the tests prove: it fires with exact labels and annotations; it stays quiet on the very metrics
it reads; the `for` holds (quiet one evaluation before it elapses, firing when it has); and each further
case of its examples (a snapshot, an idle source, series that vanish). Each recording rule is checked
against its example output, labels included.
"""

from __future__ import annotations

import re
from typing import Any

from cdcwatch.mixin.alerts import ALERTS, GROUPS, RECORDING_RULES, Alert, Case
from cdcwatch.mixin.config import MixinConfig, exact
from cdcwatch.mixin.templates import render_annotation

__all__ = ["annotations", "expression", "metrics_in", "promtool_tests", "rule_groups", "seconds"]

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def seconds(duration: str) -> float:
    """A Prometheus duration (1h30m) in seconds."""
    return sum(float(n) * _UNITS[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d|w|y)", duration))


def _duration(value: float) -> str:
    return f"{int(value // 60)}m" if value % 60 == 0 else f"{int(value)}s"


def metrics_in(expr: str) -> set[str]:
    """The metric and recording-rule names a PromQL expression selects (every selector has braces)."""
    return set(re.findall(r"([a-zA-Z_:][\w:]*)\s*\{", expr)) | set(re.findall(r"\b(\w+:\w+:\w+)\b", expr))


def expression(template: str, config: MixinConfig, alert: Alert | None = None) -> str:
    """A rule or annotation template with its placeholders filled: the one place they are."""
    return template % {**config.placeholders(), **({"for": alert.for_(config)} if alert else {})}


def alert_annotations(alert: Alert, config: MixinConfig) -> dict[str, str]:
    return {"summary": expression(alert.summary, config, alert), "description": expression(alert.description, config, alert),
            "runbook_url": config.runbook(alert.name)}


def rule_groups(config: MixinConfig) -> dict[str, Any]:
    """The Prometheus rule file: one group per area, its recording rules before the alerts using them."""
    return {"groups": [
        {"name": group.name, "rules": [
            *({"record": r.record, "expr": expression(r.expr, config)} for r in group.recordings),
            *({"alert": a.name, "expr": expression(a.expr, config), "for": a.for_(config),
               "labels": {"severity": a.severity}, "annotations": alert_annotations(a, config)} for a in group.alerts)]}
        for group in GROUPS]}


def _expected(alert: Alert, config: MixinConfig, case: Case, value: float | None = None) -> list[dict[str, Any]]:
    if case.labels is None:
        return []
    labels = {**case.labels, "severity": alert.severity}
    value = case.value if value is None else value
    return [{"exp_labels": labels,
             "exp_annotations": {k: render_annotation(v, labels, value) for k, v in alert_annotations(alert, config).items()}}]


def _test(name: str, case: Case, checks: list[dict[str, Any]], key: str = "alert_rule_test") -> dict[str, Any]:
    return {"name": name, "interval": "1m", "input_series": [{"series": s, "values": v} for s, v in case.series.items()],
            key: checks}


def _alert_tests(alert: Alert, config: MixinConfig) -> list[dict[str, Any]]:
    fires, quiet = alert.fires, alert.quiet
    due = seconds(alert.since) + seconds(alert.for_(config))
    boundary: list[dict[str, Any]] = [{"eval_time": _duration(due - 60), "alertname": alert.name, "exp_alerts": []},
                {"eval_time": _duration(due), "alertname": alert.name,
                 "exp_alerts": _expected(alert, config, fires, alert.boundary_value)}]
    return [
        _test(f"{alert.name} fires: {fires.why}",
              fires, [*boundary, {"eval_time": fires.at, "alertname": alert.name, "exp_alerts": _expected(alert, config, fires)}]),
        _test(f"{alert.name} quiet: {quiet.why}", quiet,
              [{"eval_time": quiet.at, "alertname": alert.name, "exp_alerts": []}]),
        *(_test(f"{alert.name} {'fires' if case.labels is not None else 'quiet'}: {case.why}", case,
                [{"eval_time": case.at, "alertname": alert.name, "exp_alerts": _expected(alert, config, case)}])
          for case in alert.more)]


def promtool_tests(config: MixinConfig, rule_file: str) -> dict[str, Any]:
    """A `promtool test rules` file for `rule_file` rendered from `config`."""
    tests = [test for alert in ALERTS for test in _alert_tests(alert, config)]
    for recording in RECORDING_RULES:
        for example in (recording.example, *recording.more):
            expr = recording.record
            if example.labels is None:  # the rule records nothing from these series
                tests.append(_test(f"{recording.record}: {example.why}", example,
                                   [{"expr": expr, "eval_time": example.at, "exp_samples": []}], "promql_expr_test"))
                continue
            labels = example.labels
            sample = recording.record + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
            if recording.match:
                expr += "{" + ", ".join(f'{k}="{labels[k]}"' for k in recording.match) + f"}} == {exact(example.value)}"
            tests.append(_test(f"{recording.record}: {example.why}", example,
                               [{"expr": expr, "eval_time": example.at,
                                 "exp_samples": [{"labels": sample, "value": example.value}]}], "promql_expr_test"))
    return {"rule_files": [rule_file], "evaluation_interval": "1m", "tests": tests}
