"""`cdcwatch check`: one scrape of every target, printed as a table."""

from __future__ import annotations

from collections.abc import Sequence

from cdcwatch.exporter import TargetResult

__all__ = ["render_table"]


def render_table(results: Sequence[TargetResult]) -> str:
    """A fixed-width table: target, collector, up, duration, key figures or the error."""
    header = ("TARGET", "COLLECTOR", "UP", "TIME", "DETAILS")
    rows = [
        (r.target, r.kind, "yes" if r.up else "NO", f"{r.duration_seconds * 1000:.0f}ms",
         r.collection.summary if r.up else f"error: {r.error}")
        for r in results
    ]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(4)]
    lines = []
    for row in [header, *rows]:
        lines.append("  ".join(str(cell).ljust(width) for cell, width in zip(row[:4], widths, strict=True)) + "  " + row[4])
    return "\n".join(line.rstrip() for line in lines)
