"""Readers for the recorded Debezium 3.6.3 MBean dumps in ../shared/fixtures."""

from __future__ import annotations

import os
from pathlib import Path

from cdcwatch.jmx import JmxValue, MBean, parse_object_name

SHARED = Path(os.environ.get("CDCWATCH_SHARED", Path(__file__).resolve().parents[2] / "shared"))
RECORDED = SHARED / "fixtures" / "real-debezium-3.6.3"
SEEDS = SHARED / "seeds"
if not RECORDED.is_dir() or not SEEDS.is_dir():
    raise RuntimeError(f"shared fixtures not found at {SHARED}: check out shared/ beside the repository or set CDCWATCH_SHARED")


def _scalar(text: str, java_type: str) -> JmxValue:
    if text == "null":
        return None
    if java_type in ("java.lang.Long", "java.lang.Integer"):
        return int(text)
    if java_type == "java.lang.Double":
        return float(text)
    if java_type == "java.lang.Boolean":
        return text == "true"
    return text


def _value(text: str, java_type: str) -> JmxValue:
    if java_type.startswith("[L"):
        inner = text.strip()[1:-1].strip()
        return [item.strip() for item in inner.split(",")] if inner else []
    if java_type.startswith("java.util.Map"):
        inner = text.strip()[1:-1].strip().rstrip(",").strip()
        value_type = "java.lang.Long" if java_type.endswith("java.lang.Long>") else "java.lang.String"
        pairs = [p.strip() for p in inner.split(",") if p.strip()]
        return {k: _scalar(v, value_type) for k, _, v in (p.partition("=") for p in pairs)}
    return _scalar(text, java_type)


def read_dump(name: str) -> list[MBean]:
    """Beans of one TSV dump: `### objectname (...)` headers, then attribute/opentype/javatype/value rows."""
    beans: list[MBean] = []
    current: tuple[str, dict[str, JmxValue]] | None = None
    last_attribute = ""
    for line in (RECORDED / name).read_text(encoding="utf-8").splitlines():
        if line.startswith("### "):
            object_name = line[4:].split("  (")[0].strip()
            current = (object_name, {})
            domain, keys = parse_object_name(object_name)
            beans.append(MBean(object_name, domain, keys, current[1]))
            continue
        fields = line.split("\t")
        if current is None:
            continue
        if len(fields) == 4:
            last_attribute = fields[0]
            current[1][last_attribute] = _value(fields[3], fields[2])
        elif last_attribute and isinstance(current[1].get(last_attribute), str):
            current[1][last_attribute] = str(current[1][last_attribute]) + "\n" + line  # multi-line text
    return beans
