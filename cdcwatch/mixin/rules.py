"""The Prometheus rule file and its `promtool test rules` file, rendered from the rule groups
(`cdcwatch.mixin.alerts`) with a `MixinConfig`.

Per alert the tests prove: it fires with exact labels and annotations; it stays quiet on the very metrics
it reads; the `for` holds (quiet one evaluation before it elapses, firing when it has); and each further
case of its examples (a snapshot, an idle source, series that vanish). Each recording rule is checked
against its example output, labels included.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache
from typing import Any

from cdcwatch.mixin.alerts import GROUPS, RECORDING_RULES, Alert, Case, Group
from cdcwatch.mixin.alerts.pipeline import HEALTHY
from cdcwatch.mixin.config import Durations, MixinConfig, Selectors, Thresholds, exact, placeholders_of
from cdcwatch.mixin.stages import stages_of
from cdcwatch.mixin.templates import render_annotation

__all__ = ["annotations", "dashboard_url", "deployed_alerts", "deployed_groups", "deployed_groups_for", "expression", "metrics_in",
           "promtool_tests", "reads", "rule_groups", "seconds"]

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def seconds(duration: str) -> float:
    """A Prometheus duration (1h30m) in seconds."""
    return sum(float(n) * _UNITS[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d|w|y)", duration))


def _duration(value: float) -> str:
    return f"{int(value // 60)}m" if value % 60 == 0 else f"{int(value)}s"


def metrics_in(expr: str) -> set[str]:
    """The metric and recording-rule names a PromQL expression selects (every selector has braces)."""
    return set(_metrics_in(expr))


@lru_cache(maxsize=16384)
def _metrics_in(expr: str) -> frozenset[str]:
    return frozenset(re.findall(r"([a-zA-Z_:][\w:]*)\s*\{", expr)) | frozenset(re.findall(r"\b(\w+:\w+:\w+)\b", expr))


_RECORDED = frozenset(r.record for r in RECORDING_RULES)


@lru_cache(maxsize=16384)
def reads(expr: str, own: str = "") -> tuple[frozenset[str], frozenset[str]]:
    """What an expression needs deployed: the stages whose series it reads, and the recording rules it reads
    (`own` aside: a rule reading its own previous value)."""
    names = _metrics_in(expr) - {own}
    return stages_of(names - _RECORDED), names & _RECORDED


def deployed_groups(config: MixinConfig) -> tuple[Group, ...]:
    """The rule groups of the deployment `config.stages` describes: each rule whose (shaped) expression reads only
    series of those stages and recording rules kept before it; a group left with no rule is left out."""
    return deployed_groups_for(config.stages.enabled())


@lru_cache(maxsize=512)
def deployed_groups_for(stages: frozenset[str]) -> tuple[Group, ...]:
    """`deployed_groups` of a deployment of these stages."""
    kept: set[str] = set()

    def deployed(own: str, expr: str) -> bool:
        needed, recorded = reads(expr, own)
        return bool(expr) and needed <= stages and recorded <= kept

    groups = []
    for group in (g for g in GROUPS if not g.stage or g.stage in stages):
        recordings = []
        for recording in group.recordings:
            if deployed(recording.record, recording.expr_for(stages)):
                kept.add(recording.record)
                recordings.append(recording)
        alerts = tuple(a for a in group.alerts if deployed(a.name, a.expr_for(stages)))
        if recordings or alerts:
            groups.append(replace(group, recordings=tuple(recordings), alerts=alerts))
    return tuple(groups)


def deployed_alerts(config: MixinConfig) -> tuple[Alert, ...]:
    return tuple(a for g in deployed_groups(config) for a in g.alerts)


def expression(template: str, config: MixinConfig, alert: Alert | None = None) -> str:
    """A rule or annotation template with its placeholders filled: the one place they are."""
    return _filled(template, config.selectors, config.thresholds, config.durations, alert.for_(config) if alert else None)


@lru_cache(maxsize=16384)
def _filled(template: str, selectors: Selectors, thresholds: Thresholds, durations: Durations, for_: str | None) -> str:
    values = placeholders_of(selectors, thresholds, durations)
    return template % (values if for_ is None else {**values, "for": for_})


_BOARDS: dict[str, tuple[str, str, dict[str, str]]] = {
    "cdcwatch-debezium": ("debezium", "cdcwatch-debezium", {"target": "target", "server": "server"}),
    "cdcwatch-connect": ("connect_rest", "cdcwatch-connect", {"worker": "target", "connector": "connector"}),
    "cdcwatch-kafka": ("kafka", "cdcwatch-kafka", {"cluster": "target", "group": "group", "topic": "topic"}),
    "cdcwatch-spark": ("spark", "cdcwatch-spark", {"query": "query", "server": "server"}),
    "cdcwatch-delta": ("delta", "cdcwatch-delta", {"table": "target"}),
    "cdcwatch-reconcile": ("reconcile", "cdcwatch-reconcile", {"pair": "target"}),
}
"""Rule group → (the stage its board needs, the board's uid, board variable → the alert label that sets it). The
other groups' alerts open the overview, by server."""
_GROUP_OF = {a.name: g.name for g in GROUPS for a in g.alerts}


def dashboard_url(alert: Alert, config: MixinConfig) -> str:
    """The board of the alert's area, its variables set from the alert's labels (those it fires with)."""
    stage, uid, variables = _BOARDS.get(_GROUP_OF[alert.name], ("", "cdcwatch-overview", {"server": "server"}))
    if stage and stage not in config.stages.enabled():
        uid, variables = "cdcwatch-overview", {"server": "server"}
    labels = set(alert.firing(frozenset(config.stages.enabled())).fires.labels or {})  # as it fires in these stages
    pairs = [(v, label) for v, label in {"job": "job", "instance": "instance", **variables}.items() if label in labels]
    query = "&".join(f"var-{v}={{{{ $labels.{label} }}}}" for v, label in pairs)
    return f"{config.grafana_url}/d/{uid}" + (f"?{query}" if query else "")


def alert_annotations(alert: Alert, config: MixinConfig) -> dict[str, str]:
    return {"summary": expression(alert.summary, config, alert), "description": expression(alert.description, config, alert),
            "runbook_url": config.runbook(alert.name), "dashboard_url": dashboard_url(alert, config)}


def rule_groups(config: MixinConfig) -> dict[str, Any]:
    """The Prometheus rule file: one group per area, its recording rules before the alerts using them."""
    stages = config.stages.enabled()
    return {"groups": [
        {"name": group.name, "rules": [
            *({"record": r.record, "expr": expression(r.expr_for(stages), config),
               **({"labels": dict(r.labels)} if r.labels else {})} for r in group.recordings),
            *({"alert": a.name, "expr": expression(a.expr_for(stages), config), "for": a.for_(config),
               **({"keep_firing_for": keep} if (keep := a.keep_firing_for(config)) else {}),
               "labels": {"severity": a.severity}, "annotations": alert_annotations(a, config)} for a in group.alerts)]}
        for group in deployed_groups(config)]}


def _expected(alert: Alert, config: MixinConfig, case: Case, value: float | None = None) -> list[dict[str, Any]]:
    if case.labels is None:
        return []
    labels = {**case.labels, "severity": alert.severity}
    value = case.value if value is None else value
    return [{"exp_labels": labels,
             "exp_annotations": {k: render_annotation(v, labels, value, case.queried)
                                 for k, v in alert_annotations(alert, config).items()}}]


def _test(name: str, case: Case, checks: list[dict[str, Any]], key: str = "alert_rule_test") -> dict[str, Any]:
    return {"name": name, "interval": "1m", "input_series": [{"series": s, "values": v} for s, v in case.series.items()],
            key: checks}


def _alert_tests(alert: Alert, config: MixinConfig) -> list[dict[str, Any]]:
    stages = config.stages.enabled()
    alert = alert.firing(stages)
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
          for case in alert.more if case.possible(stages))]


HEALTHY_TEST = "the deployment, healthy: every alert quiet"


def _healthy_test(alerts: tuple[Alert, ...], stages: frozenset[str]) -> dict[str, Any]:
    """Every alert of the deployment quiet at once on one healthy pipeline: changes flowing through each stage
    (`pipeline.HEALTHY`), and each alert's own quiet series where that leaves a metric unfed; series of stages the
    deployment lacks are left out, as they would be."""
    series = {k: v for k, v in HEALTHY.items() if stages_of(metrics_in(k)) <= stages}
    for alert in alerts:
        for key, values in alert.quiet.series.items():
            if stages_of(metrics_in(key)) <= stages:
                series.setdefault(key, values)
    return _test(HEALTHY_TEST, Case(HEALTHY_TEST, series),
                 [{"eval_time": "20m", "alertname": a.name, "exp_alerts": []} for a in alerts])


def promtool_tests(config: MixinConfig, rule_file: str) -> dict[str, Any]:
    """A `promtool test rules` file for `rule_file` rendered from `config`: the deployment healthy, then each
    alert's and recording rule's examples."""
    stages = config.stages.enabled()
    groups = deployed_groups(config)
    tests = [_healthy_test(tuple(a for g in groups for a in g.alerts), stages)]
    tests += [test for group in groups for alert in group.alerts for test in _alert_tests(alert, config)]
    for recording in (r for group in groups for r in group.recordings):
        for example in (e for e in (recording.example, *recording.more) if e.possible(stages)):
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
