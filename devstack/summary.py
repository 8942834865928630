"""The demo's live one-screen summary, read from its Prometheus: per stage up, lag, throughput, alerts."""

from __future__ import annotations

import time
from typing import Any

from cdcwatch.promapi import PrometheusApi

__all__ = ["Summary"]

_ROWS: tuple[tuple[str, str, str, str], ...] = (
    # (stage, what, PromQL, unit)
    ("source", "PostgreSQL reachable", 'min(cdcwatch_up{collector="postgres"})', "bool"),
    ("source", "WAL held by the slot", "max(cdcwatch_postgres_replication_slot_retained_wal_bytes)", "bytes"),
    ("debezium", "connected", 'max(cdcwatch_debezium_connected{context="streaming"})', "bool"),
    ("debezium", "lag behind source", "max(server:cdcwatch_debezium_lag_behind_source_seconds:max)", "s"),
    ("debezium", "events/s", "sum(server:cdcwatch_debezium_events_seen:rate5m)", "rate"),
    ("connect", "tasks running", "sum(cdcwatch_connect_connector_tasks_running)", "count"),
    ("kafka", "newest change age", "time() - max(cdcwatch_kafka_newest_source_commit_timestamp_seconds)", "s"),
    ("kafka", "consumer lag", "max(group_topic:cdcwatch_kafka_consumergroup_lag_seconds:max)", "s"),
    ("spark", "freshness", "max(cdcwatch_spark_freshness_seconds)", "s"),
    ("spark", "apply lag p99", "max(query:cdcwatch_spark_apply_lag_seconds:p99)", "s"),
    ("spark", "changes applied/s", "sum(rate(cdcwatch_spark_changes_applied_total[1m]))", "rate"),
    ("spark", "duplicates", "sum(cdcwatch_spark_duplicates_total)", "count"),
    ("sink", "target freshness", "max(cdcwatch_canary_target_age_seconds)", "s"),
    ("sink", "records written/s", "sum(rate(cdcwatch_connect_sink_records_sent_total[1m]))", "rate"),
    ("sink", "dead-lettered", "sum(cdcwatch_connect_task_dlq_produce_requests_total)", "count"),
)
_SHAPE_ROWS = {"spark": "spark", "jdbc": "sink"}
"""Each demo shape's own rows (the others are every shape's)."""


def _shown(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "bool":
        return "up" if value >= 1 else "DOWN"
    if unit == "bytes":
        return f"{value / 1024 / 1024:.1f} MiB"
    if unit == "s":
        return f"{value:.1f} s"
    if unit == "rate":
        return f"{value:.1f}"
    return f"{value:.0f}"


class Summary:
    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info
        self.api = PrometheusApi(info["prometheus"], timeout=5)
        own = _SHAPE_ROWS[info.get("sink", "spark")]
        self.rows = tuple(row for row in _ROWS if row[0] == own or row[0] not in _SHAPE_ROWS.values())

    def _value(self, expr: str) -> float | None:
        try:
            result = self.api.query(expr)
        except Exception:
            return None
        return float(result[0]["value"][1]) if result else None

    def firing(self) -> list[str]:
        try:
            alerts = self.api.alerts()
        except Exception:
            return ["(Prometheus unreachable)"]
        return sorted({f"{a['labels']['alertname']} ({a['labels'].get('severity', '')})"
                       for a in alerts if a.get("state") == "firing"})

    def screen(self) -> str:
        lines = ["\033[2J\033[H" + f"cdcwatch demo (scripts/demo) — {time.strftime('%H:%M:%S')}   (Ctrl-C stops everything)", ""]
        stage = ""
        for name, what, expr, unit in self.rows:
            lines.append(f"  {name if name != stage else '':<9} {what:<22} {_shown(self._value(expr), unit):>12}")
            stage = name
        firing = self.firing()
        lines += ["", f"  firing alerts: {', '.join(firing) if firing else 'none'}", "",
                  f"  Prometheus {self.info['prometheus']}/alerts   metrics {self.info['metrics']}",
                  f"  alerts log {self.info['alerts_log']}",
                  f"  break it:  scripts/demo --scenario NAME --state-dir {self.info['state_dir']}"]
        return "\n".join(lines)

    def line(self) -> str:
        values = {what: _shown(self._value(expr), unit) for _, what, expr, unit in self.rows}
        firing = self.firing()
        applied = (f"sink freshness {values['target freshness']} dead-lettered {values['dead-lettered']}"
                   if "target freshness" in values else
                   f"spark freshness {values['freshness']} apply p99 {values['apply lag p99']} "
                   f"duplicates {values['duplicates']}")
        return (f"{time.strftime('%H:%M:%S')} debezium {values['connected']} lag {values['lag behind source']}; "
                f"{applied}; firing: {', '.join(firing) or 'none'}")
