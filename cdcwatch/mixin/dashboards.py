"""The Grafana dashboards, built with grafana-foundation-sdk from panel specs kept as data.

Four dashboards, linked to each other by the `cdcwatch` tag: the pipeline overview (one row per
stage, end-to-end freshness first), Debezium connectors, Kafka consumer lag and Spark apply. Each has
a datasource variable and template variables for its labels; every panel sets its unit.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from typing import Any

from cdcwatch.mixin.config import MixinConfig

__all__ = ["DASHBOARDS", "DashboardSpec", "PanelSpec", "Query", "Variable", "build_dashboards", "panel_queries"]


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class PanelSpec:
    title: str
    unit: str
    queries: tuple[Query, ...]
    kind: str = "timeseries"  # timeseries | stat
    description: str = ""


@dataclass(frozen=True)
class Variable:
    name: str
    query: str  # label_values(...)


@dataclass(frozen=True)
class DashboardSpec:
    uid: str
    title: str
    description: str
    variables: tuple[Variable, ...]
    rows: tuple[tuple[str, tuple[PanelSpec, ...]], ...]


def _q(expr: str, legend: str) -> Query:
    return Query(expr, legend)


# $E / $S are replaced by the exporter's / the Spark listener's selectors.
_OVERVIEW = DashboardSpec(
    "cdcwatch-overview", "CDC pipeline overview",
    "Source → Debezium → Kafka → Spark, one row per stage; end-to-end freshness first.",
    (Variable("server", 'label_values(cdcwatch_spark_freshness_seconds{$S}, server)'),),
    (
        ("End to end", (
            PanelSpec("Freshness of the target", "s",
                      (_q('max by (query, server) (cdcwatch_spark_freshness_seconds{$S, server=~"$server"})', "{{query}} ({{server}})"),),
                      kind="stat", description="Age of the newest change (or heartbeat) the apply job has applied."),
            PanelSpec("Apply lag p99", "s",
                      (_q('query:cdcwatch_spark_apply_lag_seconds:p99{server=~"$server"}', "{{query}} ({{server}})"),)),
        )),
        ("Source: PostgreSQL replication slots", (
            PanelSpec("WAL retained by the slot", "bytes",
                      (_q('max by (slot, server) (cdcwatch_postgres_replication_slot_retained_wal_bytes{$E, server=~"$server"})', "{{slot}}"),)),
            PanelSpec("Slot active", "none",
                      (_q('max by (slot, server) (cdcwatch_postgres_replication_slot_active{$E, server=~"$server"})', "{{slot}}"),),
                      kind="stat"),
        )),
        ("Debezium", (
            PanelSpec("Connected", "none",
                      (_q('max by (server) (cdcwatch_debezium_connected{$E, context="streaming", server=~"$server"})', "{{server}}"),),
                      kind="stat"),
            PanelSpec("Lag behind the source", "s",
                      (_q('server:cdcwatch_debezium_lag_behind_source_seconds:max{server=~"$server"}', "{{server}}"),)),
        )),
        ("Kafka", (
            PanelSpec("Newest change in Kafka: age", "s",
                      (_q('time() - max by (server) (cdcwatch_kafka_newest_source_commit_timestamp_seconds{$E, server=~"$server"})', "{{server}}"),)),
            PanelSpec("Consumer lag", "s",
                      (_q('group_topic:cdcwatch_kafka_consumergroup_lag_seconds:max{server=~"$server"}', "{{group}} {{topic}}"),)),
        )),
        ("Spark apply", (
            PanelSpec("Changes applied", "ops",
                      (_q('sum by (query, server) (rate(cdcwatch_spark_changes_applied_total{$S, server=~"$server"}[5m]))', "{{query}}"),)),
            PanelSpec("Duplicates per change", "percentunit",
                      (_q('query:cdcwatch_spark_duplicates:ratio_rate5m{server=~"$server"}', "{{query}}"),)),
        )),
        ("cdcwatch", (
            PanelSpec("Targets up", "none", (_q("cdcwatch_up{$E}", "{{collector}} {{target}}"),)),
            PanelSpec("Collection time", "s", (_q("cdcwatch_scrape_duration_seconds{$E}", "{{collector}} {{target}}"),)),
        )),
    ))

_DEBEZIUM = DashboardSpec(
    "cdcwatch-debezium", "CDC: Debezium connectors", "Snapshot progress, streaming lag, queue and schema history per connector.",
    (Variable("target", "label_values(cdcwatch_debezium_mbeans{$E}, target)"),
     Variable("server", 'label_values(cdcwatch_debezium_events_seen_total{$E, target=~"$target"}, server)')),
    (
        ("Snapshot", (
            PanelSpec("Snapshot state", "none",
                      (_q('cdcwatch_debezium_snapshot_state{$E, target=~"$target", server=~"$server"} == 1', "{{server}}: {{state}}"),),
                      kind="stat"),
            PanelSpec("Rows scanned per table", "short",
                      (_q('cdcwatch_debezium_snapshot_rows_scanned_total{$E, target=~"$target", server=~"$server"}', "{{server}} {{table}}"),)),
            PanelSpec("Snapshot duration", "s",
                      (_q('cdcwatch_debezium_snapshot_duration_seconds{$E, target=~"$target", server=~"$server"}', "{{server}}"),)),
        )),
        ("Streaming", (
            PanelSpec("Lag behind the source", "s",
                      (_q('server:cdcwatch_debezium_lag_behind_source_seconds:max{target=~"$target", server=~"$server"}', "{{server}}"),)),
            PanelSpec("Events by operation", "ops",
                      (_q('sum by (server, operation) (rate(cdcwatch_debezium_events_by_operation_total{$E, context="streaming", target=~"$target", server=~"$server"}[5m]))',
                          "{{server}} {{operation}}"),)),
            PanelSpec("Seconds since the last event", "s",
                      (_q('cdcwatch_debezium_seconds_since_last_event{$E, context="streaming", target=~"$target", server=~"$server"}', "{{server}}"),)),
        )),
        ("Queue", (
            PanelSpec("Queue free", "percentunit",
                      (_q('cdcwatch_debezium_queue_remaining_capacity{$E, target=~"$target", server=~"$server"} / '
                          'cdcwatch_debezium_queue_capacity{$E, target=~"$target", server=~"$server"}', "{{server}} {{context}}"),)),
        )),
        ("Schema history", (
            PanelSpec("Schema history state", "none",
                      (_q('cdcwatch_debezium_schema_history_state{$E, target=~"$target", server=~"$server"} == 1', "{{server}}: {{state}}"),),
                      kind="stat"),
            PanelSpec("Schema changes applied", "short",
                      (_q('cdcwatch_debezium_schema_history_changes_applied_total{$E, target=~"$target", server=~"$server"}', "{{server}}"),)),
        )),
    ))

_KAFKA = DashboardSpec(
    "cdcwatch-kafka", "CDC: Kafka consumer lag", "Lag of every consumer group on the CDC topics, in messages, in seconds and as a status.",
    (Variable("group", "label_values(cdcwatch_kafka_consumergroup_lag_messages{$E}, group)"),
     Variable("topic", 'label_values(cdcwatch_kafka_consumergroup_lag_messages{$E, group=~"$group"}, topic)')),
    (
        ("Lag", (
            PanelSpec("Lag in seconds", "s",
                      (_q('group_topic:cdcwatch_kafka_consumergroup_lag_seconds:max{group=~"$group", topic=~"$topic"}', "{{group}} {{topic}}"),)),
            PanelSpec("Lag in messages", "short",
                      (_q('sum by (group, topic) (cdcwatch_kafka_consumergroup_lag_messages{$E, group=~"$group", topic=~"$topic"})', "{{group}} {{topic}}"),)),
            PanelSpec("Status (0 OK, 1 WARN, 2 STALL, 3 STOP, 4 REWIND)", "none",
                      (_q('max by (group, topic) (cdcwatch_kafka_consumergroup_status_code{$E, group=~"$group", topic=~"$topic"})', "{{group}} {{topic}}"),)),
        )),
        ("Topics", (
            PanelSpec("Messages produced", "ops",
                      (_q('sum by (topic) (rate(cdcwatch_kafka_log_end_offset{$E, topic=~"$topic"}[5m]))', "{{topic}}"),)),
            PanelSpec("Newest change: age", "s",
                      (_q('time() - max by (topic) (cdcwatch_kafka_newest_source_commit_timestamp_seconds{$E, topic=~"$topic"})', "{{topic}}"),)),
        )),
    ))

_SPARK = DashboardSpec(
    "cdcwatch-spark", "CDC: Spark apply", "Apply lag percentiles, throughput, duplicates and query state of the apply jobs.",
    (Variable("query", "label_values(cdcwatch_spark_batches_total{$S}, query)"),),
    (
        ("Lag", (
            PanelSpec("Apply lag", "s",
                      (_q('max by (query, percentile) (cdcwatch_spark_apply_lag_seconds{$S, query=~"$query"})', "{{query}} p{{percentile}}"),)),
            PanelSpec("Freshness of the target", "s",
                      (_q('max by (query) (cdcwatch_spark_freshness_seconds{$S, query=~"$query"})', "{{query}}"),)),
            PanelSpec("Offsets behind latest", "short",
                      (_q('sum by (query) (cdcwatch_spark_source_offsets_behind_latest{$S, query=~"$query"})', "{{query}}"),)),
        )),
        ("Throughput", (
            PanelSpec("Rows processed", "ops",
                      (_q('max by (query) (cdcwatch_spark_processed_rows_per_second{$S, query=~"$query"})', "{{query}}"),)),
            PanelSpec("Batch duration p95", "s",
                      (_q('histogram_quantile(0.95, sum by (query, le) (rate(cdcwatch_spark_batch_duration_seconds_bucket{$S, query=~"$query"}[5m])))', "{{query}}"),)),
        )),
        ("Correctness", (
            PanelSpec("Duplicates and stale events", "ops",
                      (_q('sum by (query) (rate(cdcwatch_spark_duplicates_total{$S, query=~"$query"}[5m]))', "{{query}} duplicates"),
                       _q('sum by (query) (rate(cdcwatch_spark_stale_events_total{$S, query=~"$query"}[5m]))', "{{query}} stale"))),
            PanelSpec("Malformed records", "short",
                      (_q('sum by (query) (cdcwatch_spark_malformed_events_total{$S, query=~"$query"})', "{{query}}"),)),
            PanelSpec("Query state", "none",
                      (_q('cdcwatch_spark_query_state{$S, query=~"$query"} == 1', "{{query}}: {{state}}"),), kind="stat"),
        )),
    ))

DASHBOARDS: tuple[DashboardSpec, ...] = (_OVERVIEW, _DEBEZIUM, _KAFKA, _SPARK)


def _expr(text: str, config: MixinConfig) -> str:
    return text.replace("$E", config.selectors.cdcwatch).replace("$S", config.selectors.spark)


def _build(spec: DashboardSpec, config: MixinConfig) -> dict[str, Any]:
    from grafana_foundation_sdk.builders import common, dashboard, prometheus, stat, timeseries
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models.common import DataSourceRef, LegendDisplayMode, LegendPlacement
    from grafana_foundation_sdk.models.dashboard import DashboardLinkType, VariableRefresh, VariableSort

    datasource = DataSourceRef(type_val="prometheus", uid=config.datasource_uid)
    board = (dashboard.Dashboard(spec.title).uid(spec.uid).description(spec.description).tags(["cdcwatch"])
             .refresh("30s").time("now-1h", "now").timezone("browser")
             .link(dashboard.DashboardLink("CDC dashboards").type(DashboardLinkType.DASHBOARDS).tags(["cdcwatch"])
                   .as_dropdown(True).include_vars(False).keep_time(True))
             .with_variable(dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus")))
    for variable in spec.variables:
        board = board.with_variable(
            dashboard.QueryVariable(variable.name).label(variable.name).datasource(datasource)
            .query(_expr(variable.query, config)).definition(_expr(variable.query, config))
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED).sort(VariableSort.ALPHABETICAL_ASC)
            .multi(True).include_all(True).all_value(".*"))
    for title, panels in spec.rows:
        board = board.with_row(dashboard.Row(title))
        width = 24 // len(panels)
        for panel in panels:
            builder = (timeseries.Panel().legend(common.VizLegendOptions().show_legend(True)
                                                 .display_mode(LegendDisplayMode.LIST).placement(LegendPlacement.BOTTOM))
                       if panel.kind == "timeseries" else stat.Panel())
            builder = builder.title(panel.title).unit(panel.unit).datasource(datasource).span(width).height(8)
            if panel.description:
                builder = builder.description(panel.description)
            for index, query in enumerate(panel.queries):
                builder = builder.with_target(prometheus.Dataquery().expr(_expr(query.expr, config))
                                              .legend_format(query.legend).ref_id("ABCDEFGH"[index]))
            board = board.with_panel(builder)
    return json.loads(json.dumps(board.build(), cls=JSONEncoder))


def build_dashboards(config: MixinConfig) -> dict[str, dict[str, Any]]:
    """File name → dashboard JSON model (the classic model every Grafana from 10 on imports; the SDK
    warns that it prefers its v2 resources, which older Grafanas cannot import)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return {f"{spec.uid}.json": _build(spec, config) for spec in DASHBOARDS}


def panel_queries(model: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL expression) of every query of a dashboard model."""
    return [(panel["title"], target["expr"]) for panel in model.get("panels", []) if panel.get("type") != "row"
            for target in panel.get("targets", [])]
