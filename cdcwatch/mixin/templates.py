"""What Prometheus makes of the annotation templates the rules use: `{{ $labels.x }}`,
`{{ $value | f }}` with f one of Prometheus' humanize functions (template.go), and
`{{ range ... | query | sortByLabel "x" }}text{{ .Labels.x }}text{{ end }}`, to write the exact annotations
`promtool test rules` expects."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence

__all__ = ["FUNCTIONS", "render_annotation"]


def _g(value: float) -> str:
    return f"{value:.4g}"


def _scaled(value: float, prefixes: tuple[str, ...], step: Callable[[float], float], done: Callable[[float], bool]) -> str:
    prefix = ""
    for p in prefixes:
        if done(abs(value)):
            break
        prefix, value = p, step(value)
    return f"{_g(value)}{prefix}"


_SMALL = ("m", "u", "n", "p", "f", "a", "z", "y")


def humanize(value: float) -> str:
    if value == 0 or math.isnan(value) or math.isinf(value):
        return _g(value)
    if abs(value) >= 1:
        return _scaled(value, ("k", "M", "G", "T", "P", "E", "Z", "Y"), lambda v: v / 1000, lambda v: v < 1000)
    return _scaled(value, _SMALL, lambda v: v * 1000, lambda v: v >= 1)


def humanize1024(value: float) -> str:
    if abs(value) <= 1 or math.isnan(value) or math.isinf(value):
        return _g(value)
    return _scaled(value, ("ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"), lambda v: v / 1024, lambda v: v < 1024)


def humanize_duration(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        return _g(value)
    if value == 0:
        return f"{_g(value)}s"
    if abs(value) >= 1:
        sign = "-" if value < 0 else ""
        value = abs(value)
        whole = int(value)
        seconds, minutes, hours, days = whole % 60, whole // 60 % 60, whole // 3600 % 24, whole // 86400
        if days:
            return f"{sign}{days}d {hours}h {minutes}m {seconds}s"
        if hours:
            return f"{sign}{hours}h {minutes}m {seconds}s"
        if minutes:
            return f"{sign}{minutes}m {seconds}s"
        return f"{sign}{_g(value)}s"
    return _scaled(value, _SMALL, lambda v: v * 1000, lambda v: v >= 1) + "s"


def humanize_percentage(value: float) -> str:
    return f"{_g(value * 100)}%"


FUNCTIONS: dict[str, Callable[[float], str]] = {
    "humanize": humanize, "humanize1024": humanize1024, "humanizeDuration": humanize_duration,
    "humanizePercentage": humanize_percentage}

_TEMPLATE = re.compile(r"\{\{ \$(?:labels\.(\w+)|value \| (\w+)) \}\}")
_QUERIED = re.compile(r'\{\{ range .+? \| query \| sortByLabel "(\w+)" \}\}'
                      r"([^{}]*)\{\{ \.Labels\.\1 \}\}([^{}]*)\{\{ end \}\}")


def render_annotation(text: str, labels: Mapping[str, str], value: float,
                      queried: Mapping[str, Sequence[str]] | None = None) -> str:
    """The annotation for an alert of these labels and value, its queries answering `queried` (each label's
    values, sorted, as the test case expects them)."""
    def replace(match: re.Match[str]) -> str:
        return labels[match.group(1)] if match.group(1) else FUNCTIONS[match.group(2)](value)

    def answer(match: re.Match[str]) -> str:
        return "".join(f"{match.group(2)}{v}{match.group(3)}" for v in (queried or {})[match.group(1)])
    rendered = _TEMPLATE.sub(replace, _QUERIED.sub(answer, text))
    if "{{" in rendered:
        raise ValueError(f"unsupported template in {text!r}")
    return rendered
