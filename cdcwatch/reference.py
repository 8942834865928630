"""Generated Markdown references: metrics from their specs, configuration from the models.

The documentation embeds both between markers (`<!-- metrics-reference:start -->` ... `<!-- metrics-reference:end -->`);
`cdcwatch mixin generate` rewrites them (`with_references`), and a test fails on any drift.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel

from cdcwatch.config import Config
from cdcwatch.connect import jmx_rules
from cdcwatch.connect.collector import CONNECT_METRICS
from cdcwatch.connect.jmx_rules import CONNECT_JMX_METRICS
from cdcwatch.debezium import DEBEZIUM_METRICS, mapping
from cdcwatch.debezium.mapping import DEBEZIUM_BEAN_METRICS, RULES
from cdcwatch.exporter import SELF_METRICS
from cdcwatch.families import MetricSpec
from cdcwatch.kafka.collector import KAFKA_METRICS
from cdcwatch.mysql.binlog import BINLOG_METRICS
from cdcwatch.postgres.slots import SLOT_METRICS
from cdcwatch.reconcile.collector import RECONCILE_METRICS
from cdcwatch.spark import DEFAULT_METRICS_PORT
from cdcwatch.spark.metrics import SPARK_METRICS

__all__ = ["config_reference", "has_references", "metric_types", "metrics_reference", "with_references"]

_BEAN_LABELS = "target, plugin, server, context (+ task, database, custom tags, static labels)"
_KAFKA_LABELS = "target (the cluster name) and the cluster's static labels"


def metrics_reference() -> str:
    """Every metric cdcwatch exports, with type, labels, help and its MBean attribute(s)."""
    lines = ["### Self metrics", "", "| metric | type | labels | help |", "|---|---|---|---|"]
    lines += [_row(spec) for spec in SELF_METRICS.values()]
    lines += ["", "### Debezium (JMX)", "",
              f"Every series carries the labels {_BEAN_LABELS}; extra labels are listed per metric.", "",
              "| metric | type | extra labels | MBean attribute(s) | help |", "|---|---|---|---|---|"]
    lines += [_row(spec, ", ".join(f"`{a}`" for a in mapping.sources(spec)))
              for _, spec in sorted(DEBEZIUM_BEAN_METRICS.items())]
    lines += ["", "Not exported (free text or unbounded values, never used as label values): "
              + ", ".join(f"`{r.attribute}`" for r in RULES if r.spec is None) + ".", ""]
    lines += ["Per JVM, with the labels target and the target's static labels:", "",
              "| metric | type | extra labels | source | help |", "|---|---|---|---|---|"]
    lines += [_row(spec, spec.source) for spec in DEBEZIUM_METRICS.values()]
    lines += [""]
    lines += ["### Kafka (consumer groups, topics)", "",
              f"Every series carries the labels {_KAFKA_LABELS}; extra labels are listed per metric.", "",
              "| metric | type | extra labels | help |", "|---|---|---|---|"]
    lines += [_row(spec) for spec in KAFKA_METRICS.values()]
    lines += ["", "### Kafka Connect workers", "",
              "Every series carries the label target (the worker name) and the worker's static labels.", "",
              "| metric | type | extra labels | source | help |", "|---|---|---|---|---|"]
    lines += [_row(spec, spec.source or "REST") for spec in CONNECT_METRICS.values()]
    lines += [_row(spec, "JMX " + ", ".join(jmx_rules.sources(spec))) for spec in CONNECT_JMX_METRICS.values()]
    lines += ["", "### PostgreSQL replication slots", "",
              "Every series carries the label target (the source name) and the source's static labels.", "",
              "| metric | type | extra labels | help |", "|---|---|---|---|"]
    lines += [_row(spec) for spec in SLOT_METRICS.values()]
    lines += ["", "### MySQL / MariaDB binary logs", "",
              "Every series carries the label target (the source name) and the source's static labels; server is the "
              "source's `server` setting.", "",
              "| metric | type | extra labels | help |", "|---|---|---|---|"]
    lines += [_row(spec) for spec in BINLOG_METRICS.values()]
    lines += ["", "### Reconciliation (source-to-target table pairs)", "",
              "Every series carries the label target (the pair's name) and the pair's static labels.", "",
              "| metric | type | extra labels | help |", "|---|---|---|---|"]
    lines += [_row(spec) for spec in RECONCILE_METRICS.values()]
    lines += ["", "### Spark listener (`spark_listeners`, the apply job's driver)", "",
              f"Served by the listener's own /metrics (default port {DEFAULT_METRICS_PORT}, every interface), not by `cdcwatch serve`.", "",
              "| metric | type | labels | help |", "|---|---|---|---|"]
    lines += [_row(spec) for spec in SPARK_METRICS.values()]
    lines += [""]
    return "\n".join(lines)


def metric_types() -> dict[str, str]:
    """Every exported metric (sample name, `_total` included) → its declared type, from the same tables."""
    return dict(re.findall(r"^\| `(cdcwatch_\w+)` \| (\w+) \|", metrics_reference(), re.MULTILINE))


def _row(spec: MetricSpec, source: str | None = None) -> str:
    """A metric's table row: name, type, (extra) labels, the source when given, help."""
    cells = [f"`{spec.name}`", spec.type, ", ".join(spec.labels) or "-", *([source] if source else []), spec.help]
    return "| " + " | ".join(cells) + " |"


_TYPE_WORDS = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "SecretStr": "secret string",
               "dict": "mapping of strings"}


def _type_name(annotation: Any) -> str:
    """A reader's name for a field type (no `|`, which would break the table)."""
    args = [a for a in getattr(annotation, "__args__", ()) if a is not type(None)]
    if getattr(annotation, "__origin__", None) is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if getattr(annotation, "__origin__", None) is dict:
        return _TYPE_WORDS["dict"]
    if args and getattr(annotation, "__origin__", None) is not list:
        return _type_name(args[0])
    return _TYPE_WORDS.get(getattr(annotation, "__name__", ""), getattr(annotation, "__name__", str(annotation)))


def _model_rows(model: type[BaseModel], prefix: str, rows: list[str]) -> None:
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        annotation = field.annotation
        nested = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
        items = getattr(annotation, "__args__", ())
        if nested is None and items and isinstance(items[0], type) and issubclass(items[0], BaseModel):
            nested, path = items[0], path + "[]"
        if field.is_required():
            default = "required"
        elif field.default_factory is not None:
            default = "`{}`" if "dict" in str(annotation) else "-"
        else:
            default = f"`{field.default}`" if field.default is not None else "-"
        kind = nested.__name__ if nested else _type_name(annotation)
        rows.append(f"| `{path}` | {kind} | {default} | {field.description or ''} |")
        if nested is not None:
            _model_rows(nested, path + ".", rows)


def config_reference() -> str:
    """Every configuration key with its type, default and meaning."""
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    _model_rows(Config, "", rows)
    return "\n".join(rows) + "\n"


_REFERENCES = {"config-reference": config_reference, "metrics-reference": metrics_reference}


def has_references(text: str) -> bool:
    """Whether Markdown `text` holds the markers of a reference."""
    return any(f"<!-- {name}:start -->" in text for name in _REFERENCES)


def with_references(text: str) -> str:
    """Markdown `text` with what stands between each reference's start and end markers generated anew."""
    for name, reference in _REFERENCES.items():
        start, end = f"<!-- {name}:start -->\n", f"<!-- {name}:end -->"
        head, found, rest = text.partition(start)
        if found and end in rest:
            text = head + start + reference() + end + rest.partition(end)[2]
    return text
