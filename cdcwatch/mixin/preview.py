"""Dashboards rendered from a real Prometheus: every panel's queries over a time range, one PNG per
dashboard (matplotlib), and an index.html that shows them all. Template variables are resolved
through the Prometheus API (`label_values` → all values), as Grafana's "All" would."""

from __future__ import annotations

import html
import json
import math
import re
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from cdcwatch.mixin.config import MixinConfig
from cdcwatch.mixin.dashboards import build_dashboards
from cdcwatch.mixin.templates import humanize, humanize1024, humanize_duration
from cdcwatch.promapi import PrometheusApi

__all__ = ["panel_series", "render_board", "render_preview", "resolve_variables", "substitute",
           "thresholds", "value_text"]

_LABEL_VALUES = re.compile(r"^label_values\((.*),\s*(\w+)\)$")
_DURATION = re.compile(r"^(\d+)([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def resolve_variables(api: PrometheusApi, model: dict[str, Any], rate_interval: str = "1m",
                      range_: str = "1h") -> dict[str, str]:
    """Each query variable → a regex of all its current values (in order, so later ones see earlier ones),
    and Grafana's $__rate_interval and $__range (the board's time range)."""
    values: dict[str, str] = {"__rate_interval": rate_interval, "__range": range_}
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
    values = resolve_variables(api, model, f"{int(max(4 * step, 60))}s", f"{int(end - start)}s")
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


_COLOURS = {"green": "#56a64b", "red": "#e02f44", "orange": "#ff9830", "yellow": "#fade2a", "blue": "#3274d9"}
_GRID_PIXELS = (80, 30)
"""One grid column and one grid row in pixels at 1920 wide: 24 columns, 30 px rows (Grafana's)."""


def _colour(name: str) -> str:
    return _COLOURS.get(name, name)


def value_text(panel: dict[str, Any], value: float) -> tuple[str, str | None]:
    """How Grafana shows a value in this panel: its mapped word (or the number in the panel's unit) and colour
    (a value mapping's, else the threshold step it reaches; None: no colour)."""
    defaults = panel.get("fieldConfig", {}).get("defaults", {})
    for mapping in defaults.get("mappings", []):
        options = mapping.get("options", {})
        if mapping.get("type") == "value" and (hit := options.get(exact_key(value))) is not None:
            return hit.get("text") or _unit_text(defaults.get("unit", ""), value), hit.get("color")
        if mapping.get("type") == "range" and value >= (options.get("from") if options.get("from") is not None else -math.inf) \
                and value <= (options.get("to") if options.get("to") is not None else math.inf):
            result = options.get("result", {})
            return result.get("text") or _unit_text(defaults.get("unit", ""), value), result.get("color")
    colour = None
    for step in defaults.get("thresholds", {}).get("steps", []):
        if step.get("value") is None or value >= float(step["value"]):
            colour = step.get("color")
    return _unit_text(defaults.get("unit", ""), value), colour


def exact_key(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _unit_text(unit: str, value: float) -> str:
    formats: dict[str, Callable[[float], str]] = {
        "s": humanize_duration, "bytes": lambda v: f"{humanize1024(v)}B", "percentunit": lambda v: f"{v * 100:.4g}%",
        "Bps": lambda v: f"{humanize1024(v)}B/s", "ops": lambda v: f"{humanize(v)}/s"}
    return formats.get(unit, humanize)(value)


Series = list[tuple[str, list[dict[str, Any]]]]


def _latest(panel: dict[str, Any], results: Series) -> list[tuple[str, float]]:
    """(legend, latest value) of each series: what a stat or table panel (instant queries) shows."""
    return [(_legend(legend, one["metric"]), float(one["values"][-1][1])) for legend, series in results for one in series
            if one.get("values")]


def _draw_stat(axis: Any, panel: dict[str, Any], results: Series) -> bool:
    values = _latest(panel, results)[:8]
    for index, (name, value) in enumerate(values):
        text, colour = value_text(panel, value)
        width = 1 / len(values)
        axis.add_patch(_rectangle((index * width + 0.01, 0.04), width - 0.02, 0.8, colour))
        axis.text(index * width + width / 2, 0.5, text, ha="center", va="center", fontsize=16 if len(values) < 4 else 11,
                  fontweight="bold", color="white" if colour else "black", transform=axis.transAxes)
        axis.text(index * width + width / 2, 0.18, name[:28], ha="center", va="center", fontsize=8,
                  color="white" if colour else "dimgrey", transform=axis.transAxes)
    axis.set_axis_off()
    return bool(values)


def _rectangle(xy: tuple[float, float], width: float, height: float, colour: str | None) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle(xy, width, height, facecolor=_colour(colour) if colour else "#f4f5f5", edgecolor="none")


def _draw_table(axis: Any, panel: dict[str, Any], results: Series) -> bool:
    rows = [one["metric"] for _, series in results for one in series][:12]
    axis.set_axis_off()
    if not rows:
        return False
    columns = sorted({k for row in rows for k in row if k not in ("__name__", "job", "instance")})
    table = axis.table(cellText=[[row.get(c, "") for c in columns] for row in rows], colLabels=columns,
                       loc="upper center", cellLoc="left")
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    return True


def _draw_timeline(axis: Any, panel: dict[str, Any], results: Series) -> bool:
    lanes = [(_legend(legend, one["metric"]), one["values"]) for legend, series in results for one in series][:10]
    for lane, (name, values) in enumerate(lanes):
        for (start, raw), (end, _) in zip(values, [*values[1:], values[-1]], strict=True):
            text, colour = value_text(panel, float(raw))
            axis.broken_barh([(_date(start), max(_date(end) - _date(start), 1e-4))], (lane + 0.1, 0.8),
                             facecolors=_colour(colour) if colour else "#cccccc")
        axis.text(0.005, (lane + 0.5) / max(len(lanes), 1), name[:30], transform=axis.transAxes, fontsize=7, va="center")
    axis.set_ylim(0, max(len(lanes), 1))
    axis.set_yticks([])
    return bool(lanes)


def _date(stamp: Any) -> float:
    import matplotlib.dates as mdates

    return float(mdates.date2num(datetime.fromtimestamp(float(stamp))))


def _draw_graph(axis: Any, panel: dict[str, Any], results: Series) -> bool:
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
    axis.yaxis.set_major_formatter(_axis_formatter(unit))
    drawn = 0
    for legend, series in results:
        for one in series[:12]:
            stamps = [datetime.fromtimestamp(float(t)) for t, _ in one["values"]]
            axis.plot(stamps, [float(v) for _, v in one["values"]], label=_legend(legend, one["metric"])[:40], linewidth=1.2)
            drawn += 1
    if not drawn:
        return False
    for value in thresholds(panel):
        axis.axhline(value, color=_COLOURS["red"], linestyle="--", linewidth=1, label="alert threshold")
    axis.legend(fontsize=7, loc="upper left")
    axis.grid(alpha=0.3)
    return True


_DRAW: dict[str, Callable[[Any, dict[str, Any], Series], bool]] = {
    "stat": _draw_stat, "table": _draw_table, "state-timeline": _draw_timeline}


def render_board(model: dict[str, Any], panels: list[tuple[dict[str, Any], Series]], image: Path) -> dict[str, str]:
    """One dashboard as Grafana lays it out: each panel at its grid position, stats as words on their colours,
    state timelines as coloured bands, tables as tables, graphs as lines; an empty panel says "No data" (no axis).
    Returns how each panel (by title) was drawn: its drawer, or "no data"."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    rows = max((p["gridPos"]["y"] + p["gridPos"]["h"] for p in model["panels"]), default=1)
    dpi = 80
    columns_px, row_px = _GRID_PIXELS
    figure = plt.figure(figsize=(24 * columns_px / dpi, rows * row_px / dpi), dpi=dpi)
    for header in (p for p in model["panels"] if p["type"] == "row"):
        y = 1 - (header["gridPos"]["y"] + 0.75) / rows
        figure.text(0.005, y, header["title"], fontsize=12, fontweight="bold")
    drawn_as: dict[str, str] = {}
    for panel, results in panels:
        grid = panel["gridPos"]
        left, width = grid["x"] / 24, grid["w"] / 24
        bottom, height = 1 - (grid["y"] + grid["h"]) / rows, grid["h"] / rows
        title_room = 0.7 / rows  # the panel's title inside its cell, under the row's header
        frame = figure.add_axes((left + 0.002, bottom + 0.002, width - 0.004, height - title_room))
        frame.set_xticks([])
        frame.set_yticks([])
        frame.set_facecolor("white")
        frame.set_title(panel["title"], fontsize=9, loc="left")
        axis = figure.add_axes((left + 0.03 * width, bottom + 0.12 * height, width * 0.94, height * 0.7))
        drawer = _DRAW.get(panel["type"], _draw_graph)
        drawn = drawer(axis, panel, results)
        drawn_as[panel["title"]] = drawer.__name__.removeprefix("_draw_") if drawn else "no data"
        if not drawn:
            axis.set_axis_off()
            axis.text(0.5, 0.5, "No data", ha="center", va="center", color="grey", transform=axis.transAxes)
        elif panel["type"] not in ("stat", "table"):
            locator = mdates.AutoDateLocator(minticks=3, maxticks=6)
            axis.xaxis.set_major_locator(locator)
            axis.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
            axis.tick_params(labelsize=7)
    figure.savefig(image, dpi=dpi)
    plt.close(figure)
    return drawn_as


def render_preview(prometheus_url: str, config: MixinConfig, out: Path, range_text: str = "1h") -> Path:
    """Write <uid>.png per dashboard and index.html into `out`; return the index path."""
    api = PrometheusApi(prometheus_url)
    end = time.time()
    start = end - _seconds(range_text)
    step = max((end - start) / 240, 1.0)
    out.mkdir(parents=True, exist_ok=True)
    sections = []
    for name, model in build_dashboards(config).items():
        image = out / name.replace(".json", ".png")
        render_board(model, panel_series(api, model, start, end, step), image)
        sections.append(f"<h2>{html.escape(model['title'])}</h2><p>{html.escape(model.get('description', ''))}</p>"
                        f'<img src="{image.name}" alt="{html.escape(model["title"])}" style="max-width:100%">')
    index = out / "index.html"
    index.write_text("<!doctype html><html><head><meta charset='utf-8'><title>cdcwatch dashboards</title></head><body>"
                     f"<h1>cdcwatch dashboards</h1><p>From {html.escape(prometheus_url)}, last {html.escape(range_text)}.</p>"
                     + "".join(sections) + "</body></html>\n", encoding="utf-8")
    return index
