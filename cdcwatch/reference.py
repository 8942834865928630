"""Generated Markdown references: metrics from their specs, configuration from the models.

`cdcwatch docs config|metrics` prints them as the documentation's pages docs/configuration.md and
docs/metrics.md (`DOCS_PAGES`), which `cdcwatch mixin generate` writes; tests fail on any drift.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import textwrap
from functools import cache
from typing import Any, Literal, get_args, get_origin

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from cdcwatch.collectors import COLLECTORS, Registry
from cdcwatch.self_metrics import SELF_METRICS
from cdcwatch.spark import DEFAULT_METRICS_PORT, SPARK_METRICS
from cdcwatch.specs import reference_row
from cdcwatch.validation import config_model

__all__ = ["DOCS_PAGES", "config_page", "config_reference", "example_config", "metric_types", "metrics_page",
           "metrics_reference", "model_reference"]

def metrics_reference(registry: Registry = COLLECTORS) -> str:
    """Every metric cdcwatch exports, with type, labels, help and where it is read: the exporter's own, each
    registered collector's section, then the Spark listener's."""
    lines = ["### Self metrics", "", "| metric | type | labels | help |", "|---|---|---|---|"]
    lines += [reference_row(spec) for spec in SELF_METRICS.values()]
    for entry in registry:
        lines += ["", *entry.reference()]
    lines += ["", "### Spark listener (`spark_listeners`, the apply job's driver)", "",
              f"Served by the listener's own /metrics (default port {DEFAULT_METRICS_PORT}, every interface), not by `cdcwatch serve`.", "",
              "| metric | type | labels | help |", "|---|---|---|---|"]
    lines += [reference_row(spec) for spec in SPARK_METRICS.values()]
    lines += [""]
    return "\n".join(lines)


def metric_types() -> dict[str, str]:
    """Every exported metric (sample name, `_total` included) → its declared type, from the same tables."""
    return dict(re.findall(r"^\| `(cdcwatch_\w+)` \| (\w+) \|", metrics_reference(), re.MULTILINE))


_TYPE_WORDS = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "SecretStr": "secret string"}
_SECTION, _SECTION_LIST = "mapping (keys below)", "list of mappings (keys below)"
"""The type words of keys whose value holds further keys: one mapping, or a list of them."""


def _type_name(annotation: Any) -> str:
    """A reader's name for a field type (no `|`, which would break the table); `X | None` reads as X."""
    origin, args = get_origin(annotation), [a for a in get_args(annotation) if a is not type(None)]
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin is dict:
        return f"mapping of {_type_name(args[0])} to {_type_name(args[1])}" if args else "mapping"
    if origin is list:
        return f"list of {_type_name(args[0])}s" if args else "list"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _SECTION
    if args:  # Optional / Union
        return _type_name(args[0])
    name = getattr(annotation, "__name__", str(annotation))
    return _TYPE_WORDS.get(name, name)


def _alternatives(annotation: Any) -> tuple[type[BaseModel], ...]:
    """The models a key's value may be, where it is one of several (`engine` tells which)."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if len(args) > 1 and all(isinstance(a, type) and issubclass(a, BaseModel) for a in args):
        return tuple(args)
    return ()


def _section(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model a key's value is (or is a list of; the first of several), and whether it is a list."""
    if _alternatives(annotation):
        return _alternatives(annotation)[0], False
    origin, args = get_origin(annotation), [a for a in get_args(annotation) if a is not type(None)]
    if origin is list and args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return args[0], True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    if origin is not None and origin is not list and origin is not dict and len(args) == 1:  # X | None
        return _section(args[0])
    return None, False


def _default(field: FieldInfo, nested: type[BaseModel] | None, value: Any) -> str:
    """The default as YAML (what the user would write), `required`, or `-` (absent: no value, or the keys below)."""
    if field.is_required():
        return "required"
    if nested is not None or value is None:
        return "-"
    return f"`{json.dumps(value)}`"


@cache
def _attribute_docs(model: type) -> dict[str, str]:
    """The docstrings written under the fields of `model` and its bases (`x: int = 1` then `\"\"\"...\"\"\"`): the
    meaning of keys whose model says it there rather than in `Field(description=...)`."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
        except (OSError, TypeError):  # built at run time, or not Python source
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for statement, after in zip(body, body[1:], strict=False):
            if (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[statement.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return docs


def _model_rows(model: type[BaseModel], prefix: str, rows: list[str], defaults: BaseModel | None = None) -> None:
    """The rows of `model`'s keys; a section's keys default to what its own default holds (`kafka[].topics`
    leaves out `__.*`, while a NameFilter written out allows everything)."""
    for name, field in model.model_fields.items():
        nested, is_list = _section(field.annotation)
        path = f"{prefix}{name}" + ("[]" if is_list else "")
        kind = (_SECTION_LIST if is_list else _SECTION) if nested else _type_name(field.annotation)
        value = (getattr(defaults, name) if defaults is not None
                 else None if field.is_required() else field.get_default(call_default_factory=True))
        section_doc = " ".join(inspect.cleandoc(nested.__doc__ or "").split()) if nested else ""
        meaning = field.description or _attribute_docs(model).get(name) or section_doc
        meaning = meaning.replace("|", "\\|")
        rows.append(f"| `{path}` | {kind} | {_default(field, nested, value)} | {meaning} |")
        if nested is not None:
            _model_rows(nested, path + ".", rows, value if isinstance(value, BaseModel) else None)
        for other in _alternatives(field.annotation)[1:]:  # its keys the first alternative lacks, and its `engine`
            more: list[str] = []
            _model_rows(other, path + ".", more)
            listed = {row.split(" | ")[0] for row in rows}
            engines = get_args(other.model_fields["engine"].annotation)
            which = " or ".join(f"`engine: {e}`" for e in engines)
            for row in more:
                key, kind_text, default, meaning = row.split(" | ", 3)
                if key not in listed:
                    rows.append(" | ".join([key, kind_text, f"{default} with {which}", f"{which}: {meaning}"]))
                elif key.endswith(".engine`"):
                    index = next(i for i, r in enumerate(rows) if r.split(" | ")[0] == key)
                    first, kind_first, default_first, meaning_first = rows[index].split(" | ", 3)
                    values = ", ".join(f"`{e}`" for e in engines)
                    described = other.model_fields["engine"].description or values
                    rows[index] = " | ".join([first, f"{kind_first}, {values}", default_first,
                                              f"{meaning_first.removesuffix(' |').rstrip('.')}; {described} |"])


def model_reference(model: type[BaseModel]) -> str:
    """Every key of a file read into `model`, with its type, default and meaning: a Markdown table."""
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    _model_rows(model, "", rows)
    return "\n".join(rows) + "\n"


def config_reference(registry: Registry = COLLECTORS) -> str:
    """Every configuration key with its type, default and meaning."""
    return model_reference(config_model(registry))


_EXAMPLE_VALUES = {
    "debezium[].jmx.host": "connect-1", "debezium[].jmx.port": 9010, "connect[].jmx.host": "connect-1",
    "connect[].jmx.port": 9011, "kafka[].bootstrap_servers": "kafka-1:9092,kafka-2:9092",
    "connect[].url": "http://connect-1:8083", "postgres[].password": "${PG_PASSWORD}", "mysql[].user": "cdcwatch",
    "mysql[].password": "${MYSQL_PASSWORD}", "connect[].username": "monitor", "connect[].password": "${CONNECT_PASSWORD}",
    "reconcile[].source.table": "public.orders", "reconcile[].target.table": "public.orders",
    "canary[].source.table": "public.cdc_canary", "canary[].target.table": "public.cdc_canary",
    "reconcile[].freshness_canary.table": "public.cdc_canary",
}
"""Values for the example where the type alone makes no valid one (an endpoint needs host and port)."""
_TYPE_EXAMPLES: dict[str, Any] = {"string": "main", "integer": 1, "number": 1.0, "boolean": True}
_ROW = re.compile(r"^\| `([^`]+)` \| ([^|]+) \| ([^|]+) \|", re.MULTILINE)


def example_config(reference: str) -> dict[str, Any]:
    """A configuration built from a reference's table alone, in the shapes it documents: every section (a mapping,
    or a list of one mapping), every required key, every key with a documented default, and the keys of
    `_EXAMPLE_VALUES`. Loading it with the real loader proves the reference documents what the validator accepts."""
    document: dict[str, Any] = {}
    for path, kind, default in _ROW.findall(reference):
        kind, default = kind.strip(), default.strip()
        if kind in (_SECTION, _SECTION_LIST):
            value: Any = [{}] if kind == _SECTION_LIST else {}
        elif path in _EXAMPLE_VALUES:
            value = _EXAMPLE_VALUES[path]
        elif default == "required" and kind.startswith("one of `"):
            value = kind.split("`")[1]  # the first of the choices
        elif default == "required":
            value = _TYPE_EXAMPLES.get(kind, "main")
        elif default.startswith("`"):
            value = yaml.safe_load(default.strip("`"))
        else:
            continue
        parts = path.removesuffix("[]").split(".")
        node = document
        for part in parts[:-1]:
            node = node[part.removesuffix("[]")]
            node = node[0] if isinstance(node, list) else node
        node[parts[-1]] = value
    return document


def config_page() -> str:
    """docs/configuration.md: the reference, and an example generated from it."""
    reference = config_reference()
    example = yaml.safe_dump(example_config(reference), sort_keys=False, default_flow_style=False)
    return (
        "# Configuration reference\n\n"
        "`cdcwatch serve` and `cdcwatch check` read one YAML file (`--config.file`). Every key, its type, its default and "
        "what it means, generated (`cdcwatch docs config`) from the models the configuration is validated with. "
        "A key marked `[]` holds a list of mappings; `x.y` is key `y` inside the mapping of key `x`. Secrets are "
        "read from the environment: write `${VARIABLE}`, never the secret itself (`serve` and `check` warn, naming the "
        "key, about a secret written in the file). A file with an unknown key, a "
        "value of the wrong type or a missing required key is refused before anything starts (exit status 2), "
        "naming the key.\n\n"
        f"{reference}\n"
        "## Every key at once\n\n"
        "Generated from the table above: every section in its shape, every required key, and every default "
        "spelled out. It loads as it is (with the password variables set); a real file needs only the keys it "
        "changes.\n\n"
        f"```yaml\n{example}```\n")


def metrics_page() -> str:
    """docs/metrics.md: every metric cdcwatch exports."""
    return ("# Metrics reference\n\n"
            "Every metric cdcwatch exports, generated (`cdcwatch docs metrics`) from the declarations the collectors "
            "use.\n\n" + metrics_reference())


DOCS_PAGES = {"docs/configuration.md": config_page, "docs/metrics.md": metrics_page}
"""The generated pages of the documentation (relative to the repository): what `cdcwatch docs config|metrics`
prints."""
