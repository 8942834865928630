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
)


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
        for name, what, expr, unit in _ROWS:
            lines.append(f"  {name if name != stage else '':<9} {what:<22} {_shown(self._value(expr), unit):>12}")
            stage = name
        firing = self.firing()
        lines += ["", f"  firing alerts: {', '.join(firing) if firing else 'none'}", "",
                  f"  Prometheus {self.info['prometheus']}/alerts   metrics {self.info['metrics']}",
                  f"  alerts log {self.info['alerts_log']}",
                  f"  break it:  scripts/demo --scenario NAME --state-dir {self.info['state_dir']}"]
        return "\n".join(lines)

    def line(self) -> str:
        values = {what: _shown(self._value(expr), unit) for _, what, expr, unit in _ROWS}
        firing = self.firing()
        return (f"{time.strftime('%H:%M:%S')} debezium {values['connected']} lag {values['lag behind source']}; "
                f"spark freshness {values['freshness']} apply p99 {values['apply lag p99']} "
                f"duplicates {values['duplicates']}; firing: {', '.join(firing) or 'none'}")
