"""Dashboards rendered from a real Prometheus: every panel's queries over a time range, one PNG per
dashboard (matplotlib), and an index.html that shows them all. Template variables are resolved
through the Prometheus API (`label_values` → all values), as Grafana's "All" would."""

from __future__ import annotations

import html
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from cdcwatch.mixin.config import MixinConfig
from cdcwatch.mixin.dashboards import build_dashboards
from cdcwatch.mixin.templates import humanize, humanize1024, humanize_duration

__all__ = ["PrometheusApi", "panel_series", "render_preview", "resolve_variables", "substitute", "thresholds"]

_LABEL_VALUES = re.compile(r"^label_values\((.*),\s*(\w+)\)$")
_DURATION = re.compile(r"^(\d+)([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class PrometheusApi:
    """The few HTTP API calls the preview and the dashboard checks need."""

    def __init__(self, url: str, timeout: float = 30) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def get(self, path: str, **params: Any) -> Any:
        query = urllib.parse.urlencode(params, doseq=True)
        try:
            with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=self.timeout) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:  # Prometheus says why in the body
            body = json.loads(exc.read() or b"{}")
        if body.get("status") != "success":
            raise RuntimeError(f"{path} {params}: {body.get('error', body)}")
        return body["data"]

    def label_values(self, selector: str, label: str) -> list[str]:
        return sorted(self.get(f"/api/v1/label/{label}/values", **{"match[]": selector}))

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.get("/api/v1/query_range", query=expr, start=start, end=end, step=step)["result"]
        return result

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.get("/api/v1/query", query=expr)["result"]
        return result


def resolve_variables(api: PrometheusApi, model: dict[str, Any], rate_interval: str = "1m") -> dict[str, str]:
    """Each query variable → a regex of all its current values (in order, so later ones see earlier ones),
    and Grafana's $__rate_interval."""
    values: dict[str, str] = {"__rate_interval": rate_interval}
    for variable in model.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        match = _LABEL_VALUES.match(substitute(variable["query"], values))
        if match is None:
            raise ValueError(f"variable {variable['name']}: only label_values(selector, label) is supported")
        found = api.label_values(match.group(1), match.group(2))
        values[variable["name"]] = "|".join(_promql_regex(v) for v in found) if found else "^$"
    return values


_REGEX_SPECIAL = re.compile(r"([.^$|?*+()\[\]{}\\])")


def _promql_regex(value: str) -> str:
    """`value` matched literally by an RE2 regex inside a double-quoted PromQL string."""
    return _REGEX_SPECIAL.sub(r"\\\\\1", value).replace('"', '\\"')


def substitute(expr: str, values: dict[str, str]) -> str:
    for name in sorted(values, key=len, reverse=True):
        expr = expr.replace(f"${name}", values[name])
    return expr


def panel_series(api: PrometheusApi, model: dict[str, Any], start: float, end: float,
                 step: float) -> list[tuple[dict[str, Any], list[tuple[str, list[dict[str, Any]]]]]]:
    """Every panel with, per query, its legend format and the series Prometheus returns."""
    values = resolve_variables(api, model, f"{int(max(4 * step, 60))}s")
    panels = []
    for panel in model.get("panels", []):
        if panel.get("type") == "row":
            continue
        results = [(t.get("legendFormat", ""), api.query_range(substitute(t["expr"], values), start, end, step))
                   for t in panel.get("targets", [])]
        panels.append((panel, results))
    return panels


def _legend(fmt: str, labels: dict[str, str]) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt) or json.dumps(labels)


def _seconds(text: str) -> int:
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"range {text!r}: expected a number and s, m, h or d (e.g. 30m)")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]


_UNIT_AXES = {"s": "seconds", "bytes": "bytes", "Bps": "bytes per second", "percentunit": "percent", "ops": "per second",
              "short": "", "none": ""}


def _axis_formatter(unit: str) -> Any:
    """A y-axis tick formatter that writes values in the panel's unit, as Grafana would."""
    from matplotlib.ticker import FuncFormatter

    formats: dict[str, Callable[[float], str]] = {
        "s": humanize_duration, "bytes": lambda v: f"{humanize1024(v)}B", "percentunit": lambda v: f"{v * 100:.4g}%",
        "Bps": lambda v: f"{humanize1024(v)}B/s", "ops": lambda v: f"{humanize(v)}/s"}
    return FuncFormatter(lambda value, _: formats.get(unit, humanize)(value))


def thresholds(panel: dict[str, Any]) -> list[float]:
    """The values of a panel's threshold steps (the first step, from -infinity, has none)."""
    steps = panel.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {}).get("steps", [])
    return [float(step["value"]) for step in steps if step.get("value") is not None]


def render_preview(prometheus_url: str, config: MixinConfig, out: Path, range_text: str = "1h") -> Path:
    """Write <uid>.png per dashboard and index.html into `out`; return the index path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    api = PrometheusApi(prometheus_url)
    end = time.time()
    start = end - _seconds(range_text)
    step = max((end - start) / 240, 1.0)
    out.mkdir(parents=True, exist_ok=True)
    sections = []
    for name, model in build_dashboards(config).items():
        panels = panel_series(api, model, start, end, step)
        columns = 3
        rows = (len(panels) + columns - 1) // columns
        figure, axes = plt.subplots(rows, columns, figsize=(6 * columns, 3.2 * rows), squeeze=False)
        figure.suptitle(model["title"], fontsize=14, fontweight="bold")
        for axis, (panel, results) in zip(axes.flat, panels, strict=False):
            unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
            axis.set_title(panel["title"], fontsize=10)
            axis.set_ylabel(_UNIT_AXES.get(unit, unit), fontsize=8)
            axis.yaxis.set_major_formatter(_axis_formatter(unit))
            drawn = 0
            for legend, series in results:
                for one in series[:12]:
                    stamps = [datetime.fromtimestamp(float(t)) for t, _ in one["values"]]
                    points = [float(v) for _, v in one["values"]]
                    axis.plot(stamps, points, label=_legend(legend, one["metric"])[:40], linewidth=1.2)
                    drawn += 1
            for value in thresholds(panel):
                axis.axhline(value, color="red", linestyle="--", linewidth=1, label="alert threshold")
                drawn += 1
            if drawn:
                axis.legend(fontsize=7, loc="upper left")
            else:
                axis.text(0.5, 0.5, "no data", ha="center", va="center", transform=axis.transAxes, color="grey")
            locator = mdates.AutoDateLocator(minticks=3, maxticks=6)
            axis.xaxis.set_major_locator(locator)
            axis.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
            axis.tick_params(labelsize=7)
            axis.grid(alpha=0.3)
        for axis in list(axes.flat)[len(panels):]:
            axis.axis("off")
        figure.tight_layout()
        image = out / name.replace(".json", ".png")
        figure.savefig(image, dpi=80)
        plt.close(figure)
        sections.append(f"<h2>{html.escape(model['title'])}</h2><p>{html.escape(model.get('description', ''))}</p>"
                        f'<img src="{image.name}" alt="{html.escape(model["title"])}" style="max-width:100%">')
    index = out / "index.html"
    index.write_text("<!doctype html><html><head><meta charset='utf-8'><title>cdcwatch dashboards</title></head><body>"
                     f"<h1>cdcwatch dashboards</h1><p>From {html.escape(prometheus_url)}, last {html.escape(range_text)}.</p>"
                     + "".join(sections) + "</body></html>\n", encoding="utf-8")
    return index
