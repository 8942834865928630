"""Dashboards as data (`DashboardSpec`), built into Grafana's classic JSON model with grafana-foundation-sdk.

Each query is one literal PromQL block in its board's module, as the dashboard shows it (no f-string pieces: grepping
a metric finds the whole query of every panel using it), with `%(name)s` placeholders. Those of the rules mean what
they mean there (`MixinConfig.placeholders()`: `%(cdcwatch)s` / `%(spark)s` the mixin's selectors, the thresholds,
the durations); the boards' own (`board_placeholders`): `%(cdcwatch_board)s` / `%(spark_board)s` a selector narrowed
to the board's `$job` and `$instance` variables, `%(scope)s` those two alone (for recorded series). A panel's
threshold names a threshold of the mixin config: the panel draws the value the alert uses and links to the
runbook section of that alert.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from grafana_foundation_sdk.builders import (
    bargauge,
    common,
    dashboard,
    heatmap,
    prometheus,
    stat,
    statetimeline,
    table,
    timeseries,
)
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import (
    BigValueColorMode,
    BigValueTextMode,
    GraphThresholdsStyleMode,
    LegendDisplayMode,
    LegendPlacement,
)
from grafana_foundation_sdk.models.dashboard import (
    DashboardLinkType,
    DashboardRangeMapOptions,
    DataSourceRef,
    RangeMap,
    ThresholdsMode,
    ValueMap,
    ValueMappingResult,
    VariableRefresh,
    VariableSort,
)
from grafana_foundation_sdk.models.dashboard import Threshold as Step
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from cdcwatch.mixin.alerts import ALERTS
from cdcwatch.mixin.alerts.model import promql
from cdcwatch.mixin.config import MixinConfig

__all__ = ["ACTIVE", "CONNECTED", "CONNECT_STATES", "FRESHNESS", "QUERY_STATES", "SCHEMA_HISTORY_STATES", "SNAPSHOT_STATES",
           "STATUS", "WIDTHS", "UNIQUE", "UP", "DashboardSpec", "Mapping", "PanelSpec", "Query", "Threshold", "Variable",
           "board_placeholders", "board_text", "build", "conditional_queries", "deployed_rows", "panel_queries", "threshold_alert"]


@dataclass(frozen=True)
class Query:
    expr: str
    """One literal PromQL block, as the dashboard shows it (`promql` removes the indentation of the code around it)."""
    legend: str
    when: str = ""
    """Set when the query has series only in some situations (a task failed, JMX collected): what they are."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "expr", promql(self.expr))


@dataclass(frozen=True)
class Threshold:
    name: str
    """A field of `MixinConfig.thresholds`."""
    below: bool = False
    """Red below the value (free capacity), not above it."""


@dataclass(frozen=True)
class Mapping:
    """Value → text and colour (0 → red "disconnected")."""

    value: int
    text: str
    color: str


@dataclass(frozen=True)
class PanelSpec:
    title: str
    description: str
    unit: str
    queries: tuple[Query, ...]
    kind: str = "timeseries"
    """timeseries | stat | state (a stat of the latest value as a word on its colour: `mappings`) | heatmap |
    table | bargauge | timeline (a state timeline: one band per series, coloured by its mapped value)"""
    threshold: Threshold | None = None
    mappings: tuple[Mapping, ...] = ()
    alerts: tuple[str, ...] = ()
    """Alerts (besides the threshold's) whose runbook sections the panel links to."""
    width: int = 0
    """Grid columns (of 24); 0: by kind (`WIDTHS`)."""
    height: int = 8
    unless_stages: tuple[str, ...] = ()
    """A stand-in left out where any of these stages is deployed (the Kafka data's age where neither an apply job nor
    a canary reports the target's freshness)."""
    green_below: float | None = None
    """A count that is green at 0 and red from this value on (tasks not RUNNING, targets down)."""


WIDTHS = {"timeseries": 12, "stat": 6, "state": 6, "heatmap": 24, "table": 12, "bargauge": 12, "timeline": 24}
"""Grid columns by kind: a row holds two graphs or four tiles, then wraps; never a panel squeezed to fit one line."""


@dataclass(frozen=True)
class Variable:
    name: str
    query: str
    """label_values(selector, label): the selector may use %(cdcwatch)s / %(spark)s (the mixin's
    selectors, not narrowed to $job and $instance) and earlier variables."""


@dataclass(frozen=True)
class DashboardSpec:
    uid: str
    title: str
    description: str
    source: str
    """Series selector (without braces' closing) whose `job` and `instance` values feed $job and $instance,
    e.g. `cdcwatch_up{%(cdcwatch)s`."""
    variables: tuple[Variable, ...]
    rows: tuple[tuple[str, tuple[PanelSpec, ...]], ...]
    tags: tuple[str, ...] = field(default=("cdcwatch",))
    stage: str = ""
    """The stage the whole board watches (`MixinConfig.stages`): without it, no board."""


def threshold_alert(name: str) -> str:
    """The alert whose expression compares with threshold `name`."""
    users = [a.name for a in ALERTS if f"%({name})s" in a.expr]
    if len(users) != 1:
        raise ValueError(f"threshold {name} is used by {users or 'no alert'}: a panel threshold needs exactly one")
    return users[0]


_SERVER_SOURCES = (("debezium", "cdcwatch_debezium_connected"), ("connect_rest", "cdcwatch_connect_connector_pipeline_info"),
                   ("kafka", "cdcwatch_kafka_topic_partitions"), ("postgres", "cdcwatch_postgres_replication_slot_active"),
                   ("spark", "cdcwatch_spark_freshness_seconds"))
"""A series per stage that carries the pipeline's `server`: the server variables offer the servers any stage the
deployment has knows."""


def board_placeholders(config: MixinConfig) -> dict[str, str]:
    """What `%(name)s` in a board's queries stands for: the rules' placeholders and the boards' own."""
    scope = 'job=~"$job", instance=~"$instance"'
    stages = config.stages.enabled()
    servers = "|".join(name for stage, name in _SERVER_SOURCES if stage in stages) or "cdcwatch_up"
    return {**config.placeholders(), "cdcwatch_board": f"{config.selectors.cdcwatch}, {scope}",
            "spark_board": f"{config.selectors.spark}, {scope}", "scope": scope,
            "server_series": f'__name__=~"{servers}"',
            "endpoint_series": "cdcwatch_up|cdcwatch_spark_query_state" if "spark" in stages else "cdcwatch_up"}


Rows = tuple[tuple[str, tuple[PanelSpec, ...]], ...]
"""A board's rows: (title, panels)."""


def deployed_rows(spec: DashboardSpec, config: MixinConfig) -> Rows:
    """The spec's rows with only the queries whose series the deployment (`config.stages`) has (every metric from a
    stage it runs, every recorded series from a rule it gets), panels left without a query and rows left empty
    left out."""
    return _deployed_rows(spec, config.stages.enabled())


@lru_cache(maxsize=2048)  # every board of every shape (6 × 256)
def _deployed_rows(spec: DashboardSpec, stages: frozenset[str]) -> Rows:
    from cdcwatch.mixin.rules import deployed_groups_for, reads

    kept = {r.record for g in deployed_groups_for(stages) for r in g.recordings}

    def deployed(query: Query) -> bool:
        needed, recorded = reads(query.expr)
        return needed <= stages and recorded <= kept

    def panel(spec: PanelSpec) -> PanelSpec | None:
        queries = tuple(q for q in spec.queries if deployed(q))
        if not queries or set(spec.unless_stages) & stages:
            return None
        return replace(spec, queries=queries)

    rows = ((title, tuple(p for p in map(panel, panels) if p is not None)) for title, panels in spec.rows)
    return tuple((title, panels) for title, panels in rows if panels)


def _panel(spec: PanelSpec, config: MixinConfig, values: dict[str, str], width: int) -> Any:
    kinds: dict[str, Callable[[], Any]] = {
        "timeseries": timeseries.Panel, "stat": stat.Panel, "state": stat.Panel, "heatmap": heatmap.Panel,
             "table": table.Panel, "bargauge": bargauge.Panel, "timeline": statetimeline.Panel}
    builder = (kinds[spec.kind]().title(spec.title).description(spec.description).unit(spec.unit)
               .datasource(DataSourceRef(type_val="prometheus", uid=config.datasource_uid)).span(width).height(spec.height))
    if spec.kind == "timeseries":
        builder = builder.legend(common.VizLegendOptions().show_legend(True).display_mode(LegendDisplayMode.LIST)
                                 .placement(LegendPlacement.BOTTOM))
    if spec.kind == "state":
        builder = builder.text_mode(BigValueTextMode.VALUE_AND_NAME).color_mode(BigValueColorMode.BACKGROUND)
    if spec.green_below is not None:  # a count: green at 0, red from green_below on (mappings, not an alert's threshold)
        builder = builder.color_mode(BigValueColorMode.BACKGROUND).mappings([
            ValueMap({"0": ValueMappingResult(color="green", index=0)}),
            RangeMap(DashboardRangeMapOptions(from_val=spec.green_below, to=None, result=ValueMappingResult(color="red", index=1)))])
    if spec.kind == "heatmap":
        builder = builder.calculate(True)
    alerts = list(spec.alerts)
    if spec.threshold is not None:
        value = getattr(config.thresholds, spec.threshold.name)
        low, high = ("red", "green") if spec.threshold.below else ("green", "red")
        builder = builder.thresholds(dashboard.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE)
                                     .steps([Step(None, low), Step(value, high)]))
        if spec.kind == "timeseries":
            builder = builder.thresholds_style(common.GraphThresholdsStyleConfig().mode(GraphThresholdsStyleMode.DASHED))
        alerts.insert(0, threshold_alert(spec.threshold.name))
    if spec.mappings and spec.green_below is None:
        builder = builder.mappings([ValueMap({str(m.value): ValueMappingResult(text=m.text, color=m.color, index=i)
                                              for i, m in enumerate(spec.mappings)})])
    if alerts:
        builder = builder.links([dashboard.DashboardLink(f"Runbook: {name}").type(DashboardLinkType.LINK)
                                 .url(config.runbook(name)).target_blank(True) for name in alerts])
    for index, query in enumerate(spec.queries):
        target = (prometheus.Dataquery().expr(_fill(query.expr, values)).legend_format(query.legend)
                  .ref_id("ABCDEFGH"[index]))
        if spec.kind == "table":
            target = target.format(PromQueryFormat.TABLE).instant()
        elif spec.kind in ("stat", "state"):
            target = target.instant()  # the latest value: one tile per series, never one per past state
        builder = builder.with_target(target)
    return builder


def _fill(template: str, values: dict[str, str]) -> str:
    return template % values


def build(spec: DashboardSpec, config: MixinConfig) -> dict[str, Any]:
    """The dashboard's JSON model: a datasource, $job and $instance variables and the spec's own, every one
    multi-valued with All (the spec's own matching an empty label too: a slot without a server is no less a
    slot); one row per group of panels."""
    return dict(json.loads(_model(*_build_key(spec, config))))


def board_text(spec: DashboardSpec, config: MixinConfig) -> str:
    """The dashboard's JSON model as its file has it (keys sorted, indented)."""
    return _text(*_build_key(spec, config))


def _build_key(spec: DashboardSpec, config: MixinConfig) -> tuple[DashboardSpec, Rows, tuple[tuple[str, str], ...], MixinConfig]:
    """What a board is built from: the deployment's stages enter it only through its rows and placeholders, so the
    deployment shapes with the same of both (most of the 256, for most boards) share one build."""
    return (spec, deployed_rows(spec, config), tuple(board_placeholders(config).items()),
            config.model_copy(update={"stages": None}))


@lru_cache(maxsize=1024)
def _text(spec: DashboardSpec, rows: Rows, values: tuple[tuple[str, str], ...], config: MixinConfig) -> str:
    return json.dumps(json.loads(_model(spec, rows, values, config)), indent=2, sort_keys=True) + "\n"


@lru_cache(maxsize=1024)
def _model(spec: DashboardSpec, rows: Rows, placeholders: tuple[tuple[str, str], ...], config: MixinConfig) -> str:
    """`build`'s model as JSON text, of the spec's deployed `rows` and the board's `placeholders`: `config`'s stages
    are not read (they are None here: the rows and placeholders carry the deployment)."""
    values = dict(placeholders)
    datasource = DataSourceRef(type_val="prometheus", uid=config.datasource_uid)
    board = (dashboard.Dashboard(spec.title).uid(spec.uid).description(spec.description).tags(list(spec.tags))
             .refresh("30s").time("now-1h", "now").timezone("browser").readonly()
             .link(dashboard.DashboardLink("CDC dashboards").type(DashboardLinkType.DASHBOARDS).tags(["cdcwatch"])
                   .as_dropdown(True).include_vars(True).keep_time(True))
             .with_variable(dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus")))
    variables = (Variable("job", f"label_values({spec.source}}}, job)"),
                 Variable("instance", f'label_values({spec.source}, job=~"$job"}}, instance)'))
    for variable in variables + spec.variables:
        query = _fill(variable.query, values)
        board = board.with_variable(
            dashboard.QueryVariable(variable.name).label(variable.name.capitalize()).datasource(datasource).query(query)
            .definition(query).refresh(VariableRefresh.ON_TIME_RANGE_CHANGED).sort(VariableSort.ALPHABETICAL_ASC)
            .multi(True).include_all(True).all_value(".+" if variable in variables else ".*"))
    for title, panels in rows:
        board = board.with_row(dashboard.Row(title))
        for panel in panels:
            board = board.with_panel(_panel(panel, config, values, panel.width or WIDTHS[panel.kind]))
    model: dict[str, Any] = json.loads(json.dumps(board.build(), cls=JSONEncoder))
    _lay_out(model["panels"])
    return json.dumps(model)


def _lay_out(panels: list[dict[str, Any]]) -> None:
    """Grid positions, left to right and wrapping to a new line when a panel does not fit the 24 columns (each row
    header on a line of its own): Grafana's own reading of the panels' order and widths."""
    x = y = line = 0
    for panel in panels:
        width, height = panel["gridPos"]["w"], panel["gridPos"]["h"]
        if panel["type"] == "row" or x + width > 24:
            x, y, line = 0, y + line, 0
        panel["gridPos"] = {"h": height, "w": width, "x": x, "y": y}
        x, line = x + width, max(line, height)
        if panel["type"] == "row":
            x, y, line = 0, y + height, 0


def conditional_queries(spec: DashboardSpec, config: MixinConfig) -> dict[str, str]:
    """Expression → when it has series, for the queries that are empty on a healthy pipeline."""
    values = board_placeholders(config)
    return {_fill(q.expr, values): q.when for _, panels in spec.rows for p in panels for q in p.queries if q.when}


def panel_queries(model: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL expression) of every query of a dashboard model."""
    return [(panel["title"], target["expr"]) for panel in model.get("panels", []) if panel.get("type") != "row"
            for target in panel.get("targets", [])]


CONNECTED = (Mapping(0, "disconnected", "red"), Mapping(1, "connected", "green"))
UP = (Mapping(0, "down", "red"), Mapping(1, "up", "green"))
ACTIVE = (Mapping(0, "inactive", "red"), Mapping(1, "active", "green"))
UNIQUE = (Mapping(0, "unique", "green"),)
FRESHNESS = (Mapping(1, "idle", "blue"), Mapping(2, "flowing", "green"), Mapping(3, "backlogged", "orange"),
             Mapping(4, "stalled", "red"))
"""The codes of `server_stage:cdcwatch_freshness:code`."""
STATUS = (Mapping(0, "OK", "green"), Mapping(1, "WARN", "orange"), Mapping(2, "STALL", "red"), Mapping(3, "STOP", "red"),
          Mapping(4, "REWIND", "orange"))
"""The codes of a consumer group's status; the boards read them off the per-topic state set (each state's series
times its code: only the current state's counts)."""


CONNECT_STATES = (Mapping(1, "RUNNING", "green"), Mapping(2, "RESTARTING", "orange"), Mapping(3, "PAUSED", "orange"),
                  Mapping(4, "STOPPED", "orange"), Mapping(5, "UNASSIGNED", "orange"), Mapping(6, "FAILED", "red"))
"""Kafka Connect's connector and task states (REST), the worse the higher."""
SNAPSHOT_STATES = (Mapping(1, "completed", "green"), Mapping(2, "skipped", "green"), Mapping(3, "not_started", "blue"),
                   Mapping(4, "running", "blue"), Mapping(5, "paused", "orange"), Mapping(6, "aborted", "red"))
SCHEMA_HISTORY_STATES = (Mapping(1, "running", "green"), Mapping(2, "recovering", "orange"), Mapping(3, "stopped", "red"))
QUERY_STATES = (Mapping(1, "active", "green"), Mapping(2, "terminated", "orange"), Mapping(3, "failed", "red"))
