"""Config validation: one invalid file per failure case, each with its message."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdcwatch.config import DEFAULT_PORT, ConfigError, load_config, parse_config

CONFFILES = Path(__file__).resolve().parent.parent / "conffiles"

INVALID = {
    "invalid-port-type.yaml": "targets[1].jmx.port: expected an integer",
    "invalid-port-range.yaml": "targets[0].jmx.port: must be less than or equal to 65535",
    "invalid-host.yaml": "targets[0].jmx.host: not a valid host name or IP address",
    "invalid-unknown-key.yaml": "targets[0].jmx.colour: unknown key",
    "invalid-no-host.yaml": "targets[0].jmx: give either host and port, or url",
    "invalid-host-and-url.yaml": "targets[0].jmx: give either host and port, or url, not both",
    "invalid-url.yaml": "targets[0].jmx.url: must start with 'service:jmx:'",
    "invalid-missing-env.yaml": "targets[0].jmx.password: environment variable CDCWATCH_UNSET_SECRET is not set",
    "invalid-duplicate-name.yaml": "(top level): target name 'a' is used twice",
    "invalid-reserved-label.yaml": "targets[0].labels: label name 'server' is set by cdcwatch itself",
    "invalid-label-name.yaml": "targets[0].labels: label name 'bad-label' is not a valid Prometheus label name",
    "invalid-no-targets.yaml": "(top level): nothing to scrape: configure at least one of targets, kafka, connect or postgres",
    "invalid-backend.yaml": "targets[0].jmx.backend: expected 'jpype' or 'jmxquery'",
    "invalid-timeout.yaml": "targets[0].timeout_seconds: must be greater than 0",
    "invalid-ssl-type.yaml": "targets[0].jmx.ssl: expected true or false",
    "invalid-username-without-password.yaml": "targets[0].jmx: username and password go together",
    "invalid-yaml-syntax.yaml": "line 2, column 8: expected ','",
    "invalid-top-level-list.yaml": "(top level): expected a mapping",
    "invalid-missing-targets.yaml": "(top level): nothing to scrape: configure at least one of targets, kafka, connect or postgres",
    "invalid-kafka-regex.yaml": "kafka[0].groups.deny: 'spark-(unclosed' is not a regular expression",
    "invalid-kafka-granularity.yaml": "kafka[0].granularity: expected 'partition' or 'topic'",
    "invalid-kafka-window.yaml": "kafka[0].status.window_samples: must be greater than or equal to 3",
    "invalid-target-name.yaml": "targets[0].name: use letters, digits",
}


@pytest.mark.parametrize("name, message", sorted(INVALID.items()))
def test_invalid_config(name, message):
    with pytest.raises(ConfigError) as raised:
        load_config(CONFFILES / name, env={})
    assert any(message in problem for problem in raised.value.problems), raised.value.problems
    assert name in str(raised.value)


def test_every_invalid_file_has_a_case():
    assert {p.name for p in CONFFILES.glob("invalid-*.yaml")} == set(INVALID)


def test_valid_config_and_env_interpolation():
    config = load_config(CONFFILES / "valid.yaml", env={"CDC_JMX_PASSWORD": "s3cr3t-value"})
    first, second = config.targets
    assert first.jmx.password is not None and first.jmx.password.get_secret_value() == "s3cr3t-value"
    assert first.jmx.service_url == "service:jmx:rmi:///jndi/rmi://127.0.0.1:9010/jmxrmi"
    assert first.labels == {"env": "prod"} and first.timeout_seconds == 5.0
    assert second.jmx.backend == "jmxquery" and second.timeout_seconds == 3
    assert "s3cr3t-value" not in repr(config) and "s3cr3t-value" not in str(config.model_dump())


def test_secret_never_in_error_messages():
    text = "targets:\n  - name: a\n    jmx: {host: h, port: '${PORT}', username: u, password: '${PW}'}\n"
    with pytest.raises(ConfigError) as raised:
        parse_config(text, env={"PW": "hunter2-secret", "PORT": "hunter2-secret"})
    assert "hunter2" not in str(raised.value)
    assert "targets[0].jmx.port: expected an integer" in raised.value.problems


def test_defaults_and_env_default_syntax():
    config = parse_config("targets:\n  - name: a\n    jmx: {host: '${H:-127.0.0.1}', port: 9}\n", env={})
    assert config.listen.port == DEFAULT_PORT and config.listen.address == "127.0.0.1"
    assert config.targets[0].jmx.host == "127.0.0.1"


def test_all_errors_reported_at_once():
    text = "targets:\n  - name: a\n    jmx: {host: h, port: x}\n  - name: b\n    jmx: {host: h, port: 1}\n    extra: 1\n"
    with pytest.raises(ConfigError) as raised:
        parse_config(text, env={})
    assert raised.value.problems == ["targets[0].jmx.port: expected an integer", "targets[1].extra: unknown key"]
