"""Alerts and recording rules as data: PromQL templates plus the examples that prove them.

Each rule's expression is one literal PromQL block in its area's module, written as it appears in the rule file
(indented with the code around it: `promql` removes that), with `%(name)s` placeholders for the mixin config's
selectors, thresholds and durations (`MixinConfig.placeholders()`, and `%(for)s` for the alert's own `for` in
annotations). An expression that differs by deployment has one such block per shape. Every alert carries the
cases `promtool test rules` runs: where it fires (exact labels and value), where it stays quiet on the very
metrics it reads, and any situation of the pipeline's life it must survive (a snapshot, an idle source, series
that vanish).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cdcwatch.mixin.config import MixinConfig

Shaped = Callable[[frozenset[str]], str | None]
"""The expression for a deployment's stages (`Stages.enabled()`), one of the rule's literal blocks: None for the
rule's own `expr`, "" when the deployment has nothing to compute."""

__all__ = ["IDLE_PROOFS", "Alert", "Case", "Group", "Recording", "labels_of", "promql", "with_stages"]

IDLE_PROOFS = frozenset({"postgres", "mysql", "kafka", "spark"})
"""Stages whose series can prove a capture without events idle (`server:cdcwatch_capture_idle_proof:bool`: the
slot keeping up with the WAL, a binlog the source has not written to, a heartbeat through Kafka or the apply job)."""


def promql(block: str) -> str:
    """A literal block as the rule file has it: without the indentation of the code around it and the blank first
    and last lines of a triple-quoted string."""
    return textwrap.dedent(block).strip()


def with_stages(*parts: str | tuple[str, str]) -> tuple[str, Shaped]:
    """An expression written as literal parts, some of them (`(stage, part)`) only where that stage is deployed:
    the whole expression and its `shaped` for the deployments without some of them, each part written once. The
    parts keep their indentation relative to each other."""
    texts = [part if isinstance(part, str) else part[1] for part in parts]
    needs = [None if isinstance(part, str) else part[0] for part in parts]

    def joined(kept: list[str]) -> str:
        return promql("\n".join(line for text in kept for line in text.splitlines() if line.strip()))

    def shaped(stages: frozenset[str]) -> str | None:
        if all(stage is None or stage in stages for stage in needs):
            return None
        return joined([text for text, stage in zip(texts, needs, strict=True) if stage is None or stage in stages])

    return joined(texts), shaped


def _shape(expr: str, shaped: Shaped | None, stages: frozenset[str]) -> str:
    block = shaped(stages) if shaped else None
    return expr if block is None else promql(block)


@dataclass(frozen=True)
class Case:
    """Input series (promtool notation) and what the alert does at `at`: fire with `labels` (besides
    alertname and severity) and `value`, or stay quiet (`labels` None)."""

    why: str
    series: Mapping[str, str]
    at: str = "20m"
    labels: Mapping[str, str] | None = None
    value: float = 0.0
    needs: frozenset[str] = frozenset()
    """Stages the outcome depends on besides the rule's own (an idle proof from another stage): the case is
    left out of the tests of a deployment without one of them."""
    idle_proven: bool = False
    """The case shows an idle source as idle: where Debezium is deployed, that takes one of `IDLE_PROOFS` (without
    any, a capture without events is stalled), and the case is left out of a deployment without one."""
    queried: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Of a firing case whose annotations query Prometheus: the values of each label the queries answer, in
    order (`render_annotation`)."""
    since: str = "0m"
    """Of a firing case standing in for an alert's `fires` (`Alert.fires_otherwise`): the first evaluation at
    which the expression holds."""

    def possible(self, stages: frozenset[str]) -> bool:
        """Whether a deployment of these stages can show this case."""
        return self.needs <= stages and not (self.idle_proven and "debezium" in stages and not IDLE_PROOFS & stages)


@dataclass(frozen=True)
class Recording:
    record: str
    expr: str
    example: Case
    """Input series, and the one sample (`labels`, `value`) the rule makes of them at `at`."""
    pipeline: bool = False
    """Keyed by `server` alone: it joins series of several collectors (their `job` and `instance` differ)."""
    match: tuple[str, ...] = ()
    """Labels that pick the samples a case checks: then the test evaluates `record{those labels of the case} ==
    value` and expects exactly the case's sample (a state set: one state 1, the others 0)."""
    more: tuple[Case, ...] = field(default_factory=tuple)
    """Further examples, each with its one expected sample, or none where the case's `labels` are None (the
    rule records nothing from those series)."""
    shaped: Shaped | None = None
    """Set when the expression depends on the deployment's stages; `expr` is the one for every stage."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Labels the rule adds to what it records: rules recording one name each add their own (one per stage)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "expr", promql(self.expr))

    def expr_for(self, stages: frozenset[str]) -> str:
        return _shape(self.expr, self.shaped, stages)


@dataclass(frozen=True)
class Alert:
    name: str
    expr: str
    severity: str
    """critical: data stops flowing or will be lost; warning: degraded; info: the monitor itself."""
    pace: str
    """Which `for` of `MixinConfig.durations` applies: critical, warning, instant or stalled."""
    summary: str
    description: str
    fires: Case
    quiet: Case
    """Fed every metric the rule reads, yet quiet."""
    since: str = "0m"
    """First evaluation at which the expression holds on `fires.series`: the `for` counts from here."""
    boundary_value: float | None = None
    """The value when the `for` has just elapsed, when it differs from `fires.value`."""
    more: tuple[Case, ...] = field(default_factory=tuple)
    shaped: Shaped | None = None
    """Set when the expression depends on the deployment's stages; `expr` is the one for every stage."""
    fires_otherwise: tuple[Case, ...] = field(default_factory=tuple)
    """Firing cases for the deployments that cannot show `fires` (it needs a stage they lack): the first such a
    deployment can show stands in for it, with its own `since`."""
    through_recovery: bool = False
    """An outage whose alert inhibits the alerts on its pipeline's staleness: it keeps firing for
    `durations.recovery` once its condition ends (`keep_firing_for`), so they stay inhibited while the pipeline
    catches up with its backlog, and page only if it is still stale then."""
    through_catch_up: bool = False
    """A stale target whose alert inhibits its consumer group's stall: it keeps firing for `durations.catch_up` once
    fresh again, while the group's status window fills with commits; shorter than `durations.recovery`, so it ends
    before the outage alerts that inhibit it do."""

    def keep_firing_for(self, config: MixinConfig) -> str | None:
        if self.through_recovery:
            return config.durations.recovery
        return config.durations.catch_up if self.through_catch_up else None

    def __post_init__(self) -> None:
        object.__setattr__(self, "expr", promql(self.expr))

    def expr_for(self, stages: frozenset[str]) -> str:
        return _shape(self.expr, self.shaped, stages)

    def firing(self, stages: frozenset[str]) -> Alert:
        """The alert as the tests of a deployment of these stages prove it fire: `fires`, or its stand-in."""
        if self.fires.possible(stages):
            return self
        case = next((c for c in self.fires_otherwise if c.possible(stages)), self.fires)
        return replace(self, fires=case, since=case.since, boundary_value=None)

    def for_(self, config: MixinConfig) -> str:
        return str(getattr(config.durations, self.pace))


@dataclass(frozen=True)
class Group:
    """One rule group (one area of the pipeline): recording rules first, the alerts that use them after."""

    name: str
    recordings: tuple[Recording, ...]
    alerts: tuple[Alert, ...]
    stage: str = ""
    """The stage the whole area watches (`MixinConfig.stages`): without it, none of the group's rules."""


def labels_of(*selectors: str) -> dict[str, str]:
    """The labels `name="value"` pairs of one or more selector texts spell out."""
    return dict(re.findall(r'(\w+)="([^"]*)"', ",".join(selectors)))
