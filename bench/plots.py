"""One PNG per benchmark: the timings of each contender side by side (docs/bench/<name>.png)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PLOTS = Path(__file__).resolve().parents[1] / "docs" / "bench"


def _pyplot() -> Any:
    """matplotlib's pyplot without a display; None (said once) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing (pip install 'cdcwatch[preview]'): no plot written")
        return None
    PLOTS.mkdir(parents=True, exist_ok=True)
    return plt


def _save(plt: Any, figure: Any, name: str) -> Path:
    figure.tight_layout()
    path = PLOTS / f"{name}.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def _draw_timings(axes: Any, timings: dict[str, list[float]], unit: str, target: float | None,
                  first_on_top: bool = False) -> None:
    axes.boxplot(list(timings.values()), tick_labels=list(timings), vert=False)
    if first_on_top:
        axes.invert_yaxis()
    if target is not None:
        axes.axvline(target, color="tab:red", linestyle="--", label=f"target {target:g} {unit}")
        axes.legend(loc="lower right")
    axes.set_xlabel(unit)


def save_timings(name: str, title: str, timings: dict[str, list[float]], unit: str = "ms",
                 target: float | None = None) -> Path | None:
    """A box plot of each contender's timings (in `unit`), with the target as a line; None without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return None
    figure, axes = plt.subplots(figsize=(7, 3.5))
    _draw_timings(axes, timings, unit, target)
    axes.set_title(title)
    return _save(plt, figure, name)


def save_timing_panels(name: str, title: str, panels: dict[str, dict[str, list[float]]], unit: str = "ms",
                       target: float | None = None) -> Path | None:
    """`save_timings` with one box plot per panel (panel title -> contender -> timings), the first panel on top and
    each panel's first contender at its top; None without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return None
    panels = {panel: timings for panel, timings in panels.items() if timings}
    rows = [max(len(timings), 1) for timings in panels.values()]
    figure, axes_list = plt.subplots(len(panels), 1, figsize=(7, 1.4 + 0.45 * sum(rows) + 0.6 * len(panels)),
                                     height_ratios=rows, squeeze=False)
    for axes, (panel, timings) in zip(axes_list[:, 0], panels.items(), strict=True):
        _draw_timings(axes, timings, unit, target, first_on_top=True)
        axes.set_title(panel, fontsize="medium")
    figure.suptitle(title)
    return _save(plt, figure, name)


def _draw_percentiles(axes: Any, percentiles: dict[str, dict[str, tuple[float, float]]], unit: str) -> None:
    contenders = list(dict.fromkeys(c for by_contender in percentiles.values() for c in by_contender))
    height = 0.8 / len(percentiles)
    for n, (case, by_contender) in enumerate(percentiles.items()):
        rows = [i + n * height for i, c in enumerate(contenders) if c in by_contender]
        p50s = [by_contender[c][0] for c in contenders if c in by_contender]
        p95s = [by_contender[c][1] for c in contenders if c in by_contender]
        color = f"C{n}"
        axes.barh(rows, p95s, height, color=color, alpha=0.35)
        axes.barh(rows, p50s, height, color=color, label=f"{case}: p50 (light: p95)")
    axes.set_yticks([i + height * (len(percentiles) - 1) / 2 for i in range(len(contenders))], contenders)
    axes.invert_yaxis()
    axes.set_xlabel(unit)
    axes.legend(loc="upper right", fontsize="small")


def save_percentiles(name: str, title: str, percentiles: dict[str, dict[str, tuple[float, float]]],
                     unit: str = "ms") -> Path | None:
    """Bars of each contender's p50 (solid) and p95 (light) per case (e.g. offsets static, moving), side by side;
    `percentiles`: case -> contender -> (p50, p95). None without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return None
    contenders = list(dict.fromkeys(c for by_contender in percentiles.values() for c in by_contender))
    figure, axes = plt.subplots(figsize=(7, 1.2 + 0.35 * len(contenders) * len(percentiles)))
    _draw_percentiles(axes, percentiles, unit)
    axes.set_title(title)
    return _save(plt, figure, name)


def save_percentile_panels(name: str, title: str, panels: dict[str, dict[str, dict[str, tuple[float, float]]]],
                           unit: str = "ms") -> Path | None:
    """`save_percentiles` with one panel per `panels` entry (panel title -> case -> contender -> (p50, p95)), the
    first on top; None without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return None
    panels = {panel: cases for panel, cases in panels.items() if cases}
    rows = [max(1, len({c for by_contender in cases.values() for c in by_contender}) * len(cases))
            for cases in panels.values()]
    figure, axes_list = plt.subplots(len(panels), 1, figsize=(7, 1.2 + 0.35 * sum(rows) + 0.6 * len(panels)),
                                     height_ratios=rows, squeeze=False)
    for axes, (panel, cases) in zip(axes_list[:, 0], panels.items(), strict=True):
        _draw_percentiles(axes, cases, unit)
        axes.set_title(panel, fontsize="medium")
    figure.suptitle(title)
    return _save(plt, figure, name)


def save_series(name: str, title: str, minutes: list[float], memory: dict[str, list[float]],
                files: dict[str, list[float]], warmup: float | None = None) -> Path | None:
    """Memory (MiB) and open files of each process over time, the warm-up's end as a line; None without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return None
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True, height_ratios=(2, 1))
    for label, values in memory.items():
        top.plot(minutes, values, marker=".", label=label)
    for label, values in files.items():
        bottom.plot(minutes, values, marker=".", label=label)
    for axes in (top, bottom):
        if warmup is not None:
            axes.axvline(warmup, color="grey", linestyle=":")
        axes.legend(loc="center right", fontsize="small")
        axes.set_ylim(bottom=0)
    top.set_ylabel("MiB")
    bottom.set_ylabel("open files")
    bottom.set_xlabel("minutes (dotted: end of the warm-up)")
    top.set_title(title)
    return _save(plt, figure, name)
