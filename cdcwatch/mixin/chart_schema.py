"""The generated parts of the Helm chart's values.schema.json (charts/cdcwatch): `config`, the exporter's configuration,
from its own models (cdcwatch.config), and `stages`, the mixin's (cdcwatch.mixin.stages).

`helm install`, `helm template` and `helm lint` then refuse what `cdcwatch check` refuses, naming the key's path
(`at '/config/debezium/0/jmx/port': ...`), for every section of the configuration, a new one included: the schema
follows the models. What the models check beyond keys and types is mirrored where JSON schema can say it
(`FIELD_CHECKS`, `MODEL_CHECKS`); what it cannot (a Python regular expression that does not compile) is left to the
exporter, which exits 2 naming it. Names unique within a section, and something to scrape, the chart's templates
check (a JSON schema cannot compare the entries of a list).

The exporter replaces `${VAR}` and `${VAR:-default}` in every string before it validates (`cdcwatch.config`), so a
string holding a reference stands for any value, a port's too: the schema accepts it wherever a scalar goes. It also
reads numbers and booleans given as strings (pydantic's lax mode: `"5432"`, `"yes"`), and so does the schema (their
range is the exporter's to check). It refuses, where the exporter would read them as numbers, booleans given for
numbers.

Secrets (`SecretStr` fields, the Kafka client's credentials, and any key naming a password or secret) are `${VAR}`
references only, set from a Secret (`secretEnv`); private keys are files of a Secret the chart mounts (`files`), and a
PEM private key written anywhere in `config` is refused. The messages say how, and never repeat the refused value.
"""

from __future__ import annotations

import copy
import types
import typing
from collections.abc import Sequence
from typing import Any, Literal, Union

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from cdcwatch.collectors import COLLECTORS, Registry
from cdcwatch.config import _TARGET_NAME, CLIENT_SECRETS, StrictModel
from cdcwatch.mixin.alerts import ALERTS, Alert
from cdcwatch.mixin.stages import stage_names
from cdcwatch.validation import config_model

__all__ = ["CLIENT_KEY_FILES", "CLIENT_SECRETS", "FIELD_CHECKS", "KEY_FILE_FIELDS", "MODEL_CHECKS",
           "SECRETS_ROOT", "config_schema", "rule_overrides_schema", "stages_schema", "validators", "values_schema"]

PREFIX = "config."
"""The generated definitions' names (values_schema replaces every definition so named)."""
CHART_OWNED = ("listen",)
"""Keys of the configuration the chart sets itself (where it listens, with `web`)."""

SECRETS_ROOT = "/etc/cdcwatch/secrets"
"""Where the chart mounts a Secret of `files`."""

ENV_REF = r"\$\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\}"
"""A reference the exporter replaces (cdcwatch.config `_ENV_REF`)."""
SECRET_REF = r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$"
"""A secret's only form: one reference, without a default (a default would be the secret, written here)."""
SECRET_MESSAGE = "${VAR}, with VAR set from a Secret in secretEnv (never the secret itself)"
KEY_FILE_MESSAGE = (f"a file of a Secret mounted with `files` ({SECRETS_ROOT}/<name>/<key>): a private key never comes "
                    "from a ConfigMap, the image or the values")
PEM_KEY = r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----"
PEM_MESSAGE = "no private key in config: put it in a Secret, mount it with `files` and name the file"

CLIENT_KEY_FILES = (r"^(ssl\.key\.location|ssl\.keystore\.location|sasl\.kerberos\.keytab|"
                    r"sasl\.oauthbearer\.assertion\.private\.key\.file)$")
"""Kafka client properties naming a file with a key or a keytab: a file of a Secret."""
KEY_FILE_FIELDS = frozenset({"PostgresSourceConfig.sslkey", "ReconcileSideConfig.sslkey", "TableConfig.sslkey"})
"""Fields naming a private key file: a file of a Secret."""

_INT_TEXT = r"^\s*[+-]?[0-9]+(_[0-9]+)*(\.0*)?\s*$"
_FLOAT_TEXT = r"(?i)^\s*[+-]?(([0-9]+(_[0-9]+)*(\.([0-9]+(_[0-9]+)*)?)?|\.[0-9]+)(e[+-]?[0-9]+)?|inf|infinity|nan)\s*$"
_BOOL_TEXT = r"(?i)^(0|1|f|t|n|y|no|yes|on|off|false|true)$"
_TRUE_TEXT = r"(?i)^(1|t|y|yes|on|true)$"
_HOSTNAME = r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
_IPV6 = r"^[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(%[A-Za-z0-9_.-]+)?$"
_LABEL = r"^[a-zA-Z_][a-zA-Z0-9_]*$"

ENV: dict[str, Any] = {"type": "string", "pattern": ENV_REF}
HOST: dict[str, Any] = {"anyOf": [{"type": "string", "maxLength": 253, "pattern": _HOSTNAME}, {"type": "string", "pattern": _IPV6},
                                  ENV], "description": "a host name or an IP address"}
HTTP_URL: dict[str, Any] = {"type": "string", "pattern": r"^https?://[^/?#\s@]+([/?#]|$)"}
"""An http(s) URL with no credentials in it (`cdcwatch.config.check_http_url`)."""


def _message(text: str, when: dict[str, Any]) -> dict[str, Any]:
    """`when`, or an error that reads `value must be "<text>"` (without the refused value)."""
    return {"if": when, "else": {"const": text}}


def _labels() -> dict[str, Any]:
    """Static labels: Prometheus label names, none reserved (`__`) nor one cdcwatch sets itself (the collector
    registry's), each error at the label's own key."""
    from cdcwatch.collectors import exporter_labels

    reserved = "|".join(sorted(exporter_labels()))
    return {"patternProperties": {
        _LABEL: {"type": "string"},
        "^__": {"const": "(a label name starting with __ is reserved to Prometheus: choose another name)"},
        f"^({reserved})$": {"const": "(a label cdcwatch sets itself: choose another name)"}},
        "additionalProperties": {"const": "(not a Prometheus label name: letters, digits and _, not a digit first)"}}


def _true() -> dict[str, Any]:
    return {"anyOf": [{"const": True}, {"const": 1}, {"type": "string", "pattern": _TRUE_TEXT}, ENV]}


def _not_with(key: str, reason: str) -> dict[str, Any]:
    """`key` must be absent (or null): the error names it and says why."""
    return {"properties": {key: {"enum": [None, f"({reason})"]}}}


_TABLE_HOST: dict[str, Any] = {"anyOf": [{"type": "string", "pattern": "^/"}, HOST]}
"""A table's host: a name, an address or (PostgreSQL) a socket directory."""
_TABLE_SHAPE: dict[str, Any] = {"allOf": [
    {"if": {"required": ["format"], "properties": {"format": {"const": "apply"}}},
     "then": {"allOf": [{"properties": {"engine": {"anyOf": [{"const": "postgres"}, ENV]}}},
                        _not_with("table", "format apply reads <apply_schema>.rows: give table_id, not table")]},
     "else": {"required": ["table"],
              "properties": {"table": {"anyOf": [{"type": "string", "pattern": r"^[^.]*\.[^.]*$"}, ENV]}}}},
    {"dependencies": {"sslcert": ["sslkey"], "sslkey": ["sslcert"]}},
]}
"""A table's shape (`TableConfig._shape`): format apply reads the apply job's rows, a table is `schema.table`."""

FIELD_CHECKS: dict[str, dict[str, Any] | None] = {
    "_name": {"pattern": _TARGET_NAME.pattern},
    "_labels": {},  # filled by _labels(): the names cdcwatch sets itself come from the collector registry
    "JmxSettings._host": HOST,
    "TableConfig._host": _TABLE_HOST,
    "ReconcileSideConfig._host": _TABLE_HOST,
    "JmxSettings._url": {"pattern": "^service:jmx:"},
    "ConnectWorkerConfig._url": HTTP_URL,
    "ReconcileConfig._freshness_url": HTTP_URL,
    "NameFilter._regexes": None,
    "DeltaTableConfig._uri": None,  # credentials in a URL's authority: Go's regular expressions have no look-ahead
    "DeltaTableLocation._uri": None,  # the same check
    "KafkaClusterConfig._topic_servers": None,
}
"""Each field validator of the models (by `Model.validator`, or its name where models share it): the schema that
says the same, or None where only the exporter can tell (Python regular expressions)."""

MODEL_CHECKS: dict[str, dict[str, Any] | None] = {
    "JmxSettings._address": {"allOf": [
        {"if": {"required": ["url"]},
         "then": {"allOf": [_not_with("host", "give either host and port, or url, not both"),
                            _not_with("port", "give either host and port, or url, not both")]},
         "else": {"required": ["host", "port"]}},
        {"dependencies": {"username": ["password"], "password": ["username"]}},
        {"if": {"required": ["ca_file"], "properties": {"ca_file": {"type": "string"}}},
         "then": {"required": ["ssl"], "properties": {"ssl": _true(), "backend": {"anyOf": [{"const": "jpype"}, ENV]}}}},
    ]},
    "ConnectWorkerConfig._credentials": {"dependencies": {"username": ["password"], "password": ["username"]}},
    "PostgresSourceConfig._client_certificate": {"dependencies": {"sslcert": ["sslkey"], "sslkey": ["sslcert"]}},
    "TableConfig._shape": _TABLE_SHAPE,
    "ReconcileSideConfig._shape": _TABLE_SHAPE,
    "ReconcileConfig._sides": {"allOf": [
        {"properties": {"source": {"properties": {"format": {"anyOf": [{"const": "table"}, ENV]}}}}},
        {"if": {"required": ["freshness_canary"], "properties": {"freshness_canary": {"type": "object"}}},
         "then": {"allOf": [
             _not_with("freshness_url", "give freshness_url or freshness_canary, not both"),
             {"if": {"properties": {"target": {"required": ["format"], "properties": {"format": {"const": "apply"}}}}},
              "then": {"properties": {"freshness_canary": {
                  "required": ["table_id"], **_not_with("table", "with a target of format apply, give table_id")}}},
              "else": {"properties": {"freshness_canary": {
                  "required": ["table"], **_not_with("table_id", "give table (table_id is for format apply)")}}}}]}},
    ]},
    "CanaryConfig._sides": {"allOf": [
        {"properties": {"source": {"properties": {"format": {"anyOf": [{"const": "table"}, ENV]}}}}},
        {"if": {"properties": {"target": {"required": ["format"], "properties": {"format": {"const": "apply"}}}},
                "not": {"properties": {"target": {"required": ["table_id"]}}}},
         "then": {"required": ["source"]}},
    ]},
    "Config._not_another_file": None,
}
"""Each model validator: the schema that says the same, or None where the schema says it otherwise (an old or a
mixin key is an unknown key) or the chart's templates do (unique names, something to scrape)."""


def _models(model: type[BaseModel], seen: dict[str, type[BaseModel]] | None = None) -> dict[str, type[BaseModel]]:
    """`model` and every model its fields hold, by name."""
    seen = {} if seen is None else seen
    if model.__name__ in seen:
        return seen
    seen[model.__name__] = model
    for field in model.model_fields.values():
        for inner in _inner_types(field.annotation):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                _models(inner, seen)
    return seen


def _inner_types(annotation: Any) -> list[Any]:
    out = [annotation]
    for arg in typing.get_args(annotation):
        out += _inner_types(arg)
    return out


def validators() -> dict[str, list[str]]:
    """Every validator of the configuration's models: `field` and `model` ones, as `Model.name`."""
    found: dict[str, list[str]] = {"field": [], "model": []}
    for name, model in _models(config_model()).items():
        decorators = model.__pydantic_decorators__
        found["field"] += [f"{name}.{v}" for v in decorators.field_validators]
        found["model"] += [f"{name}.{v}" for v in decorators.model_validators]
    return found


def _scalar(annotation: Any, field: FieldInfo, extra: dict[str, Any]) -> dict[str, Any]:
    bounds: dict[str, Any] = {}
    for item in field.metadata:
        if isinstance(item, annotated_types.Ge):
            bounds["minimum"] = item.ge
        elif isinstance(item, annotated_types.Le):
            bounds["maximum"] = item.le
        elif isinstance(item, annotated_types.Gt):
            bounds["exclusiveMinimum"] = item.gt
        elif isinstance(item, annotated_types.Lt):
            bounds["exclusiveMaximum"] = item.lt
    if annotation is bool:
        return {"anyOf": [{"type": "boolean"}, {"enum": [0, 1]}, {"type": "string", "pattern": _BOOL_TEXT}, ENV]}
    if annotation is int:
        return {"anyOf": [{"type": "integer", **bounds}, {"type": "string", "pattern": _INT_TEXT}, ENV]}
    if annotation is float:
        return {"anyOf": [{"type": "number", **bounds}, {"type": "string", "pattern": _FLOAT_TEXT}, ENV]}
    if typing.get_origin(annotation) is Literal:
        return {"anyOf": [{"enum": list(typing.get_args(annotation))}, ENV]}
    if annotation is str:
        if not extra:
            return {"type": "string"}
        if "anyOf" in extra:
            return extra
        return {"anyOf": [{"type": "string", **extra}, ENV]}
    raise TypeError(f"no JSON schema for {annotation!r}: add it to cdcwatch/mixin/chart_schema.py")


def _type(annotation: Any, field: FieldInfo, qualified: str, extra: dict[str, Any]) -> dict[str, Any]:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) > 1 and all(isinstance(a, type) and issubclass(a, BaseModel) for a in inner):
            schema = {"anyOf": [_type(a, field, qualified, extra) for a in inner]}  # one of several models
            return schema if len(inner) == len(args) else {"anyOf": [*schema["anyOf"], {"type": "null"}]}
        if len(inner) != 1:
            raise TypeError(f"{qualified}: no JSON schema for {annotation!r}")
        schema = _type(inner[0], field, qualified, extra)
        if "anyOf" in schema and set(schema) <= {"anyOf", "description"}:  # one list of alternatives, null among them
            return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
        return {"anyOf": [schema, {"type": "null"}]}
    if annotation is SecretStr:
        return {"type": "string", **_message(SECRET_MESSAGE, {"pattern": SECRET_REF})}
    if qualified in KEY_FILE_FIELDS:
        return {"type": "string", **_message(KEY_FILE_MESSAGE, {"pattern": f"^{SECRETS_ROOT}/[^/]+/[^/]"})}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {"$ref": f"#/definitions/{PREFIX}{annotation.__name__}"}
    if origin is list:
        return {"type": "array", "items": _type(args[0], field, qualified, {})}
    if origin is dict:
        if args[0] is not str:
            raise TypeError(f"{qualified}: mapping keys other than strings")
        return {"type": "object", "additionalProperties": _type(args[1], field, qualified, {}), **extra}
    return _scalar(annotation, field, extra)


def _field_checks(model: type[BaseModel], name: str) -> dict[str, Any]:
    """What the field validators of `model.name` add to its schema."""
    checks: dict[str, Any] = {}
    for key, decorator in model.__pydantic_decorators__.field_validators.items():
        if name not in decorator.info.fields:
            continue
        check = FIELD_CHECKS.get(f"{model.__name__}.{key}", FIELD_CHECKS.get(key))
        if key == "_labels":
            check = _labels()
        checks |= check or {}
    return checks


def _client(model: type[BaseModel], name: str) -> dict[str, Any]:
    """The Kafka client's properties (a mapping of librdkafka settings): credentials as ${VAR}, key files from Secrets."""
    if (model.__name__, name) != ("KafkaClusterConfig", "client"):
        return {}
    return {"patternProperties": {
        CLIENT_SECRETS: _message(SECRET_MESSAGE, {"type": "string", "pattern": SECRET_REF}),
        CLIENT_KEY_FILES: _message(KEY_FILE_MESSAGE, {"type": "string", "pattern": f"^{SECRETS_ROOT}/[^/]+/[^/]"})}}


def _model_schema(model: type[BaseModel], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required = []
    for name, field in model.model_fields.items():
        if name in skip:
            continue
        qualified = f"{model.__name__}.{name}"
        typed = _type(field.annotation, field, qualified, _field_checks(model, name) | _client(model, name))
        properties[name] = {**typed, "description": field.description} if field.description else typed
        if field.is_required():
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if model.__doc__ and model.__doc__ != StrictModel.__doc__:
        schema["description"] = " ".join(model.__doc__.split())
    if required:
        schema["required"] = required
    checks = [check for key in model.__pydantic_decorators__.model_validators
              if (check := MODEL_CHECKS.get(f"{model.__name__}.{key}"))]
    if checks:
        schema["allOf"] = checks
    return schema


def _no_literal_secret() -> dict[str, Any]:
    """Anywhere in `config`: a key naming a password or a secret holds a ${VAR} reference, and no string a PEM private
    key."""
    return {
        "if": {"type": "object"},
        "then": {
            "patternProperties": {
                "[Pp][Aa][Ss][Ss][Ww][Oo][Rr][Dd]|[Ss][Ee][Cc][Rr][Ee][Tt]": {
                    "type": "string", **_message(SECRET_MESSAGE, {"pattern": SECRET_REF})}},
            "additionalProperties": {"$ref": f"#/definitions/{PREFIX}noLiteralSecret"}},
        "else": {
            "if": {"type": "array"},
            "then": {"items": {"$ref": f"#/definitions/{PREFIX}noLiteralSecret"}},
            "else": _message(PEM_MESSAGE, {"not": {"type": "string", "pattern": PEM_KEY}})}}


def config_schema(registry: Registry = COLLECTORS) -> tuple[dict[str, Any], dict[str, Any]]:
    """The `config` value's schema, and the definitions it refers to."""
    root = config_model(registry)
    definitions = {f"{PREFIX}{name}": _model_schema(model, CHART_OWNED if model is root else ())
                   for name, model in _models(root).items() if name != "ListenSettings"}
    definitions[f"{PREFIX}noLiteralSecret"] = _no_literal_secret()
    schema = {"description": "the cdcwatch configuration (docs/configuration.md) without `listen` (the chart's: "
                             "0.0.0.0:10121, TLS and basic auth through `web`); secrets as ${VAR} from secretEnv, key "
                             "files from `files` Secrets. Generated from cdcwatch/config.py by `cdcwatch mixin generate`.",
              "allOf": [{"$ref": f"#/definitions/{PREFIX}Config"}, {"$ref": f"#/definitions/{PREFIX}noLiteralSecret"}]}
    return schema, definitions


def stages_schema(registry: Registry = COLLECTORS) -> dict[str, Any]:
    return {"description": "the deployment's stages (the mixin config's `stages`): true, false, or auto (from `config` "
                           "and podMonitor.enabled). Generated by `cdcwatch mixin generate`.",
            "type": "object", "properties": {stage: {"enum": ["auto", True, False]} for stage in stage_names(registry)},
            "additionalProperties": False}


DURATION = r"^([0-9]+(ms|s|m|h|d|w|y))+$"
"""A Prometheus duration, as a rule's `for` takes it."""
SEVERITIES = ("critical", "warning", "info")
CUSTOM_RULE = "prometheusRule.customRule"
"""The definition of what `customRules` takes per alert (its `for`, `severity` and labels)."""
_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}


def custom_rule_schema() -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": {
        "for": {"type": "string", "pattern": DURATION, "description": "a Prometheus duration, e.g. 10m"},
        "severity": {"enum": list(SEVERITIES)},
        "labels": _LABELS}}


def rule_overrides_schema(alerts: Sequence[str]) -> dict[str, Any]:
    """prometheusRule's overrides, in kube-prometheus-stack's words (`defaultRules.disabled`, `additionalRuleLabels`,
    `customRules`): keyed by the generated alerts' names, so a misspelt name fails the install, naming it, instead of
    overriding nothing."""
    custom = {"$ref": f"#/definitions/{CUSTOM_RULE}"}
    return {
        "disabled": {"description": "alerts left out of the PrometheusRule, by name (e.g. CdcSparkDriverAbsent: true)",
                     "type": "object", "properties": {name: {"type": "boolean"} for name in sorted(alerts)},
                     "additionalProperties": False},
        "additionalRuleLabels": {**_LABELS, "description": "labels added to every alert (e.g. team: data)"},
        "customRules": {"description": "per alert, by name: its `for`, its `severity` and labels added to it",
                        "type": "object", "properties": {name: custom for name in sorted(alerts)},
                        "additionalProperties": False},
    }


def values_schema(base: dict[str, Any], registry: Registry = COLLECTORS, alerts: Sequence[Alert] = ALERTS) -> dict[str, Any]:
    """The chart's values schema `base` (its own values, written by hand) with the generated parts replaced: the
    configuration, the stages and the rule overrides keyed by the names of `alerts`."""
    schema = copy.deepcopy(base)
    config, definitions = config_schema(registry)
    kept = {name: value for name, value in schema.get("definitions", {}).items()
            if not name.startswith(PREFIX) and name != CUSTOM_RULE}
    schema["definitions"] = kept | definitions | {CUSTOM_RULE: custom_rule_schema()}
    properties = schema.setdefault("properties", {})
    properties["config"] = config
    properties["stages"] = stages_schema(registry)
    properties["prometheusRule"]["properties"].update(rule_overrides_schema([alert.name for alert in alerts]))
    return schema
