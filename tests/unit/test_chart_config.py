"""The chart's `config` value is checked by the exporter's own rules (values.schema.json's `config`, generated from
cdcwatch/config.py by `cdcwatch mixin generate`, and the templates' checks of what a schema cannot say): one corpus of
configurations goes through `helm template` and through `cdcwatch check`'s validator, with the same verdict. And no
secret reaches the values or the ConfigMap: each kind is refused, saying how, without repeating it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import SecretStr

from cdcwatch.config import ConfigError
from cdcwatch.mixin import chart_schema
from cdcwatch.validation import config_model, parse_config
from tests.tools import ROOT
from tests.unit.test_chart import CHART, KUBERNETES_VERSIONS, exporter_config, helm

pytestmark = pytest.mark.chart

CONFFILES = ROOT / "tests" / "conffiles"
ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
NOT_VALUES = {"invalid-yaml-syntax.yaml": "malformed YAML is no values file: helm refuses it as such"}
EXPORTER_ONLY = {"invalid-kafka-regex.yaml": "a Python regular expression: only Python can tell it compiles",
                 "invalid-kafka-client-property.yaml": "librdkafka's settings: only the library can tell which it takes"}
"""Corpus files whose verdict the chart cannot give, and why (docs/deploy/kubernetes.md says so too)."""
CORPUS = sorted([*CONFFILES.glob("invalid-*.yaml"), *CONFFILES.glob("valid*.yaml")])


def env_of(text: str) -> dict[str, str]:
    """What a file's ${VAR}s are set to (the chart sets them from Secrets): its `# env: NAME=value ...` line, or a
    value for each but those its `# error: ` lines say are not set."""
    line = next((li for li in text.splitlines() if li.startswith("# env: ")), None)
    if line is not None:
        return dict(pair.split("=", 1) for pair in line.removeprefix("# env: ").split())
    unset = set(re.findall(r"environment variable (\w+) is not set", text))
    return {name: "a-value" for name in ENV_REF.findall(text) if name not in unset}


def exporter_accepts(text: str, env: dict[str, str]) -> bool:
    try:
        parse_config(text, "corpus", env)
    except ConfigError:
        return False
    return True


def chart_values(text: str, env: dict[str, str]) -> dict[str, Any]:
    """The configuration as the chart's values: without `listen` (the chart's), each ${VAR} set from a Secret, each
    file it names under the chart's mounts from a Secret or ConfigMap of `files`."""
    config = yaml.safe_load(text)
    if isinstance(config, dict):
        config.pop("listen", None)
    mounts = sorted(set(re.findall(r"/etc/cdcwatch/(secrets|files)/([^/]+)/", text)), key=lambda mount: mount[1])
    files = [{"name": name, ("secret" if kind == "secrets" else "configMap"): name} for kind, name in mounts]
    return {"config": config if config is not None else {}, "files": files,
            "secretEnv": {name: {"secretName": "cdcwatch", "key": name.lower().replace("_", "-")} for name in env}}


def helm_template(values: dict[str, Any], tmp_path: Path, *more: str) -> tuple[bool, str]:
    path = tmp_path / "values.json"
    path.write_text(json.dumps(values))
    done = helm("template", "cdcwatch", str(CHART), "--kube-version", KUBERNETES_VERSIONS[-1], "-f", str(path), *more)
    return done.returncode == 0, done.stdout + done.stderr


def named(error: str) -> list[str]:
    """How the chart names the key of an exporter's `# error: ` line: its JSON pointer under /config (the schema; a
    missing or unknown key by its mapping's pointer and its name), the variable (the templates' check of ${VAR}s),
    `config` (the templates' checks of the whole configuration)."""
    where, problem = error.removeprefix("# error: ").split(": ", 1)
    if unset := re.match(r"environment variable (\w+) is not set", problem):
        return [f"config refers to ${{{unset[1]}}}"]
    if where == "(top level)":
        return ["config"]
    pointer = "at '/config/" + re.sub(r"\[(\d+)\]", r"/\1", where).replace(".", "/")
    if problem in ("required key is missing", "unknown key"):
        parent, key = pointer.rsplit("/", 1)
        return [parent + "'", f"'{key}'"]
    return [pointer]


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_the_chart_and_the_exporter_give_the_same_verdict(path: Path, tmp_path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    env = env_of(text)
    accepted = exporter_accepts(text, env)
    assert accepted == path.name.startswith("valid"), path.name
    if path.name in NOT_VALUES:
        return
    chart_accepted, said = helm_template(chart_values(text, env), tmp_path)
    if path.name in EXPORTER_ONLY:
        assert chart_accepted and not accepted  # the pod exits 2 naming the key
        return
    assert chart_accepted == accepted, said
    if not accepted:  # named where the exporter names it
        assert all(all(part in said for part in named(line)) for line in text.splitlines() if line.startswith("# error: ")), said
    else:  # what the chart renders is what the exporter reads
        config = exporter_config(tuple(o for o in yaml.safe_load_all(said) if o))
        assert exporter_accepts(config, env)


@pytest.mark.parametrize(("config", "named"), [
    ({"debezium": [{"name": "a", "jmx": {"host": "h", "port": "nine"}}]}, "/config/debezium/0/jmx/port"),
    ({"reconcile": [{"name": "r", "source": {"engine": "postgres", "user": "u", "table": "s.t", "colour": "x"},
                     "target": {"engine": "postgres", "user": "u", "format": "apply"}}]}, "/config/reconcile/0/source"),
    ({"kafka": [{"name": "k", "bootstrap_servers": "b:9092", "status": {"window_samples": 1}}]},
     "/config/kafka/0/status/window_samples"),
    ({"postgres": [{"name": "has space"}]}, "/config/postgres/0/name"),
    ({"debezium": [{"name": "a", "jmx": {"host": "h", "port": 1}}, {"name": "a", "jmx": {"host": "h", "port": 2}}]},
     'config.debezium: name "a" is used twice'),
], ids=["port-type", "reconcile-key", "window", "target-name", "duplicate"])
def test_a_refused_key_is_named_by_its_path(config: dict[str, Any], named: str, tmp_path: Path) -> None:
    for command in (["template", "cdcwatch", "--kube-version", KUBERNETES_VERSIONS[-1]], ["lint", "--strict"]):
        (tmp_path / "values.json").write_text(json.dumps({"config": config}))
        done = helm(*command, str(CHART), "-f", str(tmp_path / "values.json"))
        said = done.stdout + done.stderr
        assert (done.returncode != 0 or "[INFO] Fail: " in said) and named in said, said


def test_a_section_the_models_gain_reaches_the_schema_without_the_chart() -> None:
    """The schema is the models': every section and key of Config (but the chart's `listen`), reconciliation's too."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    config = schema["definitions"]["config.Config"]
    assert set(config["properties"]) == set(config_model().model_fields) - {"listen"}
    assert config["additionalProperties"] is False
    pair = schema["definitions"]["config.ReconcileConfig"]
    assert set(pair["properties"]) == set(config_model().model_fields["reconcile"].annotation.__args__[0].model_fields)


def test_every_validator_of_the_models_is_mirrored_or_left_to_the_exporter() -> None:
    """A new validator in cdcwatch/config.py fails here until cdcwatch/mixin/chart_schema.py says what the schema makes of it."""
    found = chart_schema.validators()
    known = set(chart_schema.FIELD_CHECKS) | {"ListenSettings._address"}
    assert [v for v in found["field"] if v not in known and v.split(".", 1)[1] not in known] == []
    assert [v for v in found["model"] if v not in chart_schema.MODEL_CHECKS] == []


LITERAL = "hunter2-literal"
"""A secret written where a ${VAR} belongs: refused, and never repeated by the message."""
SECRET_FIELDS = {
    "JmxSettings.password": {"debezium": [{"name": "d", "jmx": {"host": "h", "port": 1, "username": "u", "password": LITERAL}}]},
    "ConnectWorkerConfig.password": {"connect": [{"name": "c", "url": "http://c:8083", "username": "u", "password": LITERAL}]},
    "PostgresSourceConfig.password": {"postgres": [{"name": "p", "password": LITERAL}]},
    "MysqlSourceConfig.password": {"mysql": [{"name": "m", "user": "u", "password": LITERAL}]},
    "ReconcileSideConfig.password": {"reconcile": [{"name": "r", "source": {"engine": "postgres", "user": "u", "table": "s.t",
                                                                        "password": LITERAL},
                                                    "target": {"engine": "postgres", "user": "u", "format": "apply"}}]},
    "TableConfig.password": {"canary": [{"name": "c", "server": "s", "interval_seconds": 10,
                                         "target": {"engine": "postgres", "user": "u", "table": "s.t", "password": LITERAL}}]},
}
"""A literal in each secret field of the models (SecretStr)."""


def secret_fields() -> set[str]:
    return {f"{name}.{field}" for name, model in chart_schema._models(config_model()).items()
            for field, info in model.model_fields.items() if SecretStr in (info.annotation, *getattr(info.annotation, "__args__", ()))}


def kafka(client: dict[str, str]) -> dict[str, Any]:
    return {"kafka": [{"name": "k", "bootstrap_servers": "b:9092", "client": client}]}


PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"
REFUSED = {
    **{f"secret field {name}": (config, "${VAR}, with VAR set from a Secret") for name, config in SECRET_FIELDS.items()},
    **{f"kafka {key}": (kafka({key: LITERAL}), "${VAR}, with VAR set from a Secret") for key in (
        "sasl.password", "sasl.jaas.config", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.config", "ssl.key.password",
        "ssl.keystore.password")},
    "kafka ssl.key.pem": (kafka({"ssl.key.pem": PEM}), "${VAR}, with VAR set from a Secret"),
    "a secret with a default": (kafka({"sasl.password": "${KAFKA_PASSWORD:-" + LITERAL + "}"}), "${VAR}, with VAR set"),
    "kafka ssl.key.location in the image": (kafka({"ssl.key.location": "/etc/ssl/" + LITERAL + ".key"}), "a file of a Secret"),
    "kafka ssl.keystore.location from a ConfigMap": (kafka({"ssl.keystore.location": "/etc/cdcwatch/files/k/" + LITERAL}),
                                                     "a file of a Secret"),
    "postgres sslkey outside a Secret": ({"postgres": [{"name": "p", "sslcert": "/tmp/c.crt", "sslkey": "/tmp/" + LITERAL}]},
                                         "a file of a Secret"),
    "a PEM private key anywhere": ({"postgres": [{"name": "p", "labels": {"note": PEM + LITERAL}}]}, "no private key in config"),
    "an unknown key naming a secret": (kafka({"my.client.secret": LITERAL}), "${VAR}, with VAR set from a Secret"),
}


def test_every_secret_field_of_the_models_is_tried() -> None:
    assert secret_fields() == set(SECRET_FIELDS)


@pytest.mark.parametrize("field", sorted(secret_fields()))
def test_a_secret_field_takes_a_reference_whatever_its_name(field: str) -> None:
    """Each field cdcwatch keeps secret (SecretStr) refuses a literal by its own schema, not only by its name."""
    import jsonschema  # the test extra (this module's marker keeps it out of the no-extras run)

    model, name = field.split(".")
    schema = json.loads((CHART / "values.schema.json").read_text())["definitions"][f"config.{model}"]["properties"][name]
    assert jsonschema.Draft7Validator(schema).is_valid("${SECRET}")
    assert not jsonschema.Draft7Validator(schema).is_valid(LITERAL)
    assert not jsonschema.Draft7Validator(schema).is_valid("${SECRET:-" + LITERAL + "}")


@pytest.mark.parametrize("case", REFUSED)
def test_a_secret_outside_a_secret_is_refused_saying_how(case: str, tmp_path: Path) -> None:
    config, how = REFUSED[case]
    accepted, said = helm_template({"config": config}, tmp_path)
    assert not accepted and how in said, said
    assert LITERAL not in said and "MIIEvQ" not in said  # the message never repeats the secret


@pytest.mark.parametrize(("config", "files"), [
    (kafka({"sasl.password": "${KAFKA_PASSWORD}", "sasl.jaas.config": "${JAAS}", "ssl.key.pem": "${KEY_PEM}",
            "ssl.key.location": "/etc/cdcwatch/secrets/kafka-user/user.key",
            "ssl.keystore.location": "/etc/cdcwatch/secrets/kafka-user/user.p12", "ssl.keystore.password": "${P12}"}),
     [{"name": "kafka-user", "secret": "kafka-user"}]),
    ({"postgres": [{"name": "p", "sslmode": "verify-full", "sslrootcert": "/etc/cdcwatch/files/pg-ca/ca.crt",
                    "sslcert": "/etc/cdcwatch/secrets/pg-client/tls.crt", "sslkey": "/etc/cdcwatch/secrets/pg-client/tls.key"}]},
     [{"name": "pg-ca", "configMap": "pg-ca"}, {"name": "pg-client", "secret": "pg-client"}]),
], ids=["kafka", "postgres"])
def test_secrets_from_secrets_are_accepted_and_stay_out_of_the_config_map(config: dict[str, Any], files: list[Any],
                                                                          tmp_path: Path) -> None:
    names = set(ENV_REF.findall(json.dumps(config)))
    values = {"config": config, "files": files,
              "secretEnv": {name: {"secretName": "cdcwatch", "key": name.lower()} for name in names}}
    accepted, said = helm_template(values, tmp_path)
    assert accepted, said
    text = exporter_config(tuple(o for o in yaml.safe_load_all(said) if o))
    assert set(ENV_REF.findall(text)) == names and "BEGIN" not in text


@pytest.mark.parametrize(("files", "refused"), [
    ([], "which no `files` entry mounts: add {name: pg-client, secret: ...}"),
    ([{"name": "pg-client", "configMap": "pg-client"}], "which no `files` entry mounts: add {name: pg-client, secret: ...}"),
], ids=["missing", "a-config-map"])
def test_a_key_file_must_be_mounted_from_a_secret(files: list[Any], refused: str, tmp_path: Path) -> None:
    config = {"postgres": [{"name": "p", "sslcert": "/etc/cdcwatch/secrets/pg-client/tls.crt",
                            "sslkey": "/etc/cdcwatch/secrets/pg-client/tls.key"}]}
    accepted, said = helm_template({"config": config, "files": files}, tmp_path)
    assert not accepted and refused in said, said
