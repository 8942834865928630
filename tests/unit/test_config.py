"""Config validation: interpolation, secrets kept out of messages, defaults, every fault at once.
(One invalid file per failure case, run through the commands: test_config_files.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cdcwatch.config import DEFAULT_PORT, MIXIN_SECTIONS, ConfigError, parse_yaml_model
from cdcwatch.mixin import load_mixin_config
from cdcwatch.validation import config_model, load_config, parse_config

ROOT = Path(__file__).resolve().parents[2]
CONFFILES = ROOT / "tests" / "conffiles"


def test_valid_config_and_env_interpolation():
    config = load_config(CONFFILES / "valid.yaml", env={"CDC_JMX_PASSWORD": "s3cr3t-value"})
    first, second = config.debezium
    assert first.jmx.password is not None and first.jmx.password.get_secret_value() == "s3cr3t-value"
    assert first.jmx.service_url == "service:jmx:rmi:///jndi/rmi://127.0.0.1:9010/jmxrmi"
    assert first.labels == {"env": "prod"} and first.timeout_seconds == 5.0
    assert second.jmx.backend == "jmxquery" and second.timeout_seconds == 3
    assert "s3cr3t-value" not in repr(config) and "s3cr3t-value" not in str(config.model_dump())


def test_secret_never_in_error_messages():
    text = "debezium:\n  - name: a\n    jmx: {host: h, port: '${PORT}', username: u, password: '${PW}'}\n"
    with pytest.raises(ConfigError) as raised:
        parse_config(text, env={"PW": "hunter2-secret", "PORT": "hunter2-secret"})
    assert "hunter2" not in str(raised.value)
    assert "debezium[0].jmx.port: expected an integer" in raised.value.problems


def test_defaults_and_env_default_syntax():
    config = parse_config("debezium:\n  - name: a\n    jmx: {host: '${H:-127.0.0.1}', port: 9}\n", env={})
    assert config.listen.port == DEFAULT_PORT and config.listen.address == "127.0.0.1"
    assert config.debezium[0].jmx.host == "127.0.0.1"


def test_all_errors_reported_at_once():
    text = "debezium:\n  - name: a\n    jmx: {host: h, port: x}\n  - name: b\n    jmx: {host: h, port: 1}\n    extra: 1\n"
    with pytest.raises(ConfigError) as raised:
        parse_config(text, env={})
    assert raised.value.problems == ["debezium[0].jmx.port: expected an integer", "debezium[1].extra: unknown key"]


def test_a_key_that_is_no_string_is_named_by_its_mapping():
    with pytest.raises(ConfigError) as raised:
        parse_config("debezium:\n  - {name: a, jmx: {host: h, port: 1}, 7: x}\n", env={})
    assert raised.value.problems == ["debezium[0]: keys must be strings"]


def test_only_the_exporter_config_resolves_environment_variables(tmp_path, monkeypatch):
    """The mixin config's `${...}` are Grafana's (`${datasource}`), taken as written."""
    monkeypatch.setenv("DS", "resolved")
    (tmp_path / "mixin.yml").write_text("datasource_uid: ${DS}\n", encoding="utf-8")
    assert load_mixin_config(tmp_path / "mixin.yml").datasource_uid == "${DS}"
    (tmp_path / "cdcwatch.yml").write_text("postgres: [{name: main, host: '${DS}'}]\n", encoding="utf-8")
    assert load_config(tmp_path / "cdcwatch.yml").postgres[0].host == "resolved"


def test_postgres_client_certificate_and_key_go_together():
    with pytest.raises(ConfigError) as raised:
        parse_config("postgres: [{name: main, sslmode: verify-full, sslrootcert: /ca.pem, sslcert: /c.pem}]\n", env={})
    assert raised.value.problems == ["postgres[0]: sslcert and sslkey go together"]
    source = parse_config("postgres: [{name: main, sslmode: verify-full, sslrootcert: /ca.pem, sslcert: /c.pem,"
                          " sslkey: /c.key}]\n", env={}).postgres[0]
    assert (source.sslrootcert, source.sslcert, source.sslkey) == ("/ca.pem", "/c.pem", "/c.key")


def test_the_mixin_sections_the_exporter_recognizes_are_the_mixin_configs() -> None:
    from cdcwatch.mixin import MixinConfig

    assert set(MixinConfig.model_fields) == MIXIN_SECTIONS


def test_a_built_configuration_loads_as_written() -> None:
    from devstack.configs import exporter_config, jmx_target

    config = parse_config(exporter_config(
        limits={"max_series_per_target": 3},
        debezium=[jmx_target("a", 9010, jmx={"username": "u", "password": "${PW}"}, timeout_seconds=2.5, labels={"env": "x"})],
        kafka=None), env={"PW": "pw"})
    (target,) = config.debezium
    assert (target.name, target.jmx.host, target.jmx.port, target.jmx.username) == ("a", "127.0.0.1", 9010, "u")
    assert target.jmx.password is not None and target.jmx.password.get_secret_value() == "pw"
    assert (target.timeout_seconds, target.labels, config.limits.max_series_per_target) == (2.5, {"env": "x"}, 3)
    assert config.kafka == []


def test_the_models_know_no_collector_and_the_loader_checks_against_the_registry() -> None:
    """`cdcwatch.config`'s models take a file without targets; the exporter's loader (`cdcwatch.validation`) does not."""
    assert parse_yaml_model("log_level: info\n", config_model(), "<config>", {}).targets("debezium") == []
    with pytest.raises(ConfigError) as refused:
        parse_config("log_level: info\n", env={})
    assert refused.value.problems[0].startswith("(top level): nothing to scrape")


def test_importing_the_models_loads_no_collector_nor_the_registry() -> None:
    """The models sit below the collectors: importing them loads only the metric specs and primitives under them."""
    code = "import sys, cdcwatch.config; print(' '.join(sorted(m for m in sys.modules if m.startswith('cdcwatch.'))))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.split()) <= {"cdcwatch.config", "cdcwatch.spark", "cdcwatch.specs"}


def test_the_registry_problems_are_reported_at_once() -> None:
    text = ("kafka:\n  - {name: a, bootstrap_servers: 'h:9092', labels: {job: x, topic: y}}\n"
            "  - {name: a, bootstrap_servers: 'h:9093', labels: {env: z}}\n"
            "postgres:\n  - {name: a, labels: {database: x}}\n")
    with pytest.raises(ConfigError) as refused:
        parse_config(text, env={})
    assert refused.value.problems == [
        "kafka[0].labels: label name 'job' is set by Prometheus (the scrape's job): choose another name",
        "kafka[0].labels: label name 'topic' is set by the kafka collector (a label of cdcwatch_kafka_topic_partitions): "
        "choose another name",
        "(top level): kafka cluster name 'a' is used twice",
        "postgres[0].labels: label name 'database' is set by the postgres collector (a label of "
        "cdcwatch_postgres_table_rows_estimate): choose another name",
    ]


def test_kafka_client_settings_the_library_refuses_are_refused_before_anything_starts(tmp_path: Path) -> None:
    """librdkafka's own words, under the setting's key path: a misspelt name, a value out of its set, a number that is
    none; a good set passes, so does a secret's value, and so does a set it refuses as a whole (that depends on where
    the exporter runs, and is its collector's to report)."""
    def problems(client: str) -> list[str]:
        try:
            parse_config(f"kafka:\n  - {{name: a, bootstrap_servers: 'h:9092', client: {client}}}\n", env={})
        except ConfigError as refused:
            return refused.problems
        return []

    assert problems("{securty.protocol: SASL_SSL, security.protocol: SASL_SSLL, socket.timeout.ms: soon}") == [
        'kafka[0].client.securty.protocol: No such configuration property: "securty.protocol": fix or remove it '
        "(librdkafka's CONFIGURATION.md lists every setting)",
        'kafka[0].client.security.protocol: Invalid value "SASL_SSLL" for configuration property "security.protocol": '
        "fix or remove it (librdkafka's CONFIGURATION.md lists every setting)",
        'kafka[0].client.socket.timeout.ms: Invalid value for configuration property "socket.timeout.ms": fix or '
        "remove it (librdkafka's CONFIGURATION.md lists every setting)"]
    assert problems("{security.protocol: SASL_SSL, sasl.mechanism: PLAIN}") == []  # the collector's: up 0, named
    assert problems("{security.protocol: SASL_SSL, sasl.mechanism: PLAIN, sasl.username: u, sasl.password: 'p\"w'}") == []
    file = tmp_path / "cdcwatch.yml"
    file.write_text("kafka:\n  - {name: a, bootstrap_servers: 'h:9092', client: {securty.protocol: SSL}}\n")
    done = subprocess.run([sys.executable, "-m", "cdcwatch.cli", "serve", "--config.file", str(file)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "kafka[0].client.securty.protocol" in done.stderr and "Traceback" not in done.stderr


def test_a_secret_written_in_the_file_is_warned_about_by_its_path_never_its_value(tmp_path: Path) -> None:
    """The configuration page's rule (a secret is `${VAR}`, never the secret itself), said to a user who broke it,
    without repeating the secret; a reference with a default holds the secret too."""
    from cdcwatch.validation import literal_secret_warnings

    path = tmp_path / "cdcwatch.yml"
    path.write_text("postgres:\n  - {name: source, host: db, user: cdcwatch, password: hunter2}\n"
                    "kafka:\n  - name: main\n    bootstrap_servers: b:9092\n    client:\n"
                    "      sasl.password: ${KAFKA_PASSWORD}\n      ssl.key.password: ${KEY_PASSWORD:-swordfish}\n"
                    "      sasl.username: cdcwatch\n")
    warnings = literal_secret_warnings(path)
    assert [w.split(" holds ")[0] for w in warnings] == [f"{path}: postgres[0].password",
                                                         f"{path}: kafka[0].client.ssl.key.password"]
    assert not any("hunter2" in w or "swordfish" in w for w in warnings)
    assert all("${VAR}" in w for w in warnings)
    path.write_text("postgres:\n  - {name: source, host: db, user: cdcwatch, password: '${PG_PASSWORD}'}\n")
    assert literal_secret_warnings(path) == []
