"""One PNG per benchmark: the timings of each contender side by side (docs/bench/<name>.png)."""

from __future__ import annotations

from pathlib import Path

PLOTS = Path(__file__).resolve().parents[1] / "docs" / "bench"


def save_timings(name: str, title: str, timings: dict[str, list[float]], unit: str = "ms",
                 target: float | None = None) -> Path | None:
    """A box plot of each contender's timings (in `unit`), with the target as a line; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is missing (pip install 'cdcwatch[preview]'): no plot written")
        return None
    PLOTS.mkdir(parents=True, exist_ok=True)
    figure, axes = plt.subplots(figsize=(7, 3.5))
    axes.boxplot(list(timings.values()), tick_labels=list(timings), vert=False)
    if target is not None:
        axes.axvline(target, color="tab:red", linestyle="--", label=f"target {target:g} {unit}")
        axes.legend(loc="lower right")
    axes.set_xlabel(unit)
    axes.set_title(title)
    figure.tight_layout()
    path = PLOTS / f"{name}.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
