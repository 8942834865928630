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


def save_timings(name: str, title: str, timings: dict[str, list[float]], unit: str = "ms",
                 target: float | None = None) -> Path | None:
    """A box plot of each contender's timings (in `unit`), with the target as a line; None without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return None
    figure, axes = plt.subplots(figsize=(7, 3.5))
    axes.boxplot(list(timings.values()), tick_labels=list(timings), vert=False)
    if target is not None:
        axes.axvline(target, color="tab:red", linestyle="--", label=f"target {target:g} {unit}")
        axes.legend(loc="lower right")
    axes.set_xlabel(unit)
    axes.set_title(title)
    return _save(plt, figure, name)


def save_percentiles(name: str, title: str, percentiles: dict[str, dict[str, tuple[float, float]]],
                     unit: str = "ms") -> Path | None:
    """Bars of each contender's p50 (solid) and p95 (light) per case (e.g. offsets static, moving), side by side;
    `percentiles`: case -> contender -> (p50, p95). None without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return None
    contenders = list(dict.fromkeys(c for by_contender in percentiles.values() for c in by_contender))
    figure, axes = plt.subplots(figsize=(7, 1.2 + 0.35 * len(contenders) * len(percentiles)))
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
    axes.set_title(title)
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
