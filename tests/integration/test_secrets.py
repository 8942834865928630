"""Secrets never leave cdcwatch: not in its log (at debug level), not in `cdcwatch check`'s output,
not in `/metrics`, not in the error a bad config gives, for every collector that takes one (JMX,
Kafka SASL, Kafka Connect basic auth, PostgreSQL). Each secret comes from the environment, as the
README tells users to pass them, and every target fails (nothing listens there), so every error
path that could echo a setting runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from devstack.configs import connect_worker, exporter_config, jmx_target, kafka_cluster, postgres_source
from devstack.procs import free_port

pytestmark = pytest.mark.integration

SECRETS = {"CDCW_JMX_PASSWORD": "jmx-secret-V4t9", "CDCW_KAFKA_PASSWORD": "kafka-secret-Zr2q",
           "CDCW_CONNECT_PASSWORD": "connect-secret-Ws3k", "CDCW_PG_PASSWORD": "pg-secret-Xq1m"}


def config_sections() -> dict[str, Any]:
    """A target of every kind with a secret from the environment, each on a port nothing listens on."""
    return {
        "debezium": [jmx_target("jvm", free_port(), jmx={"username": "monitor", "password": "${CDCW_JMX_PASSWORD}"},
                                timeout_seconds=2)],
        "kafka": [kafka_cluster("broker", f"127.0.0.1:{free_port()}", timeout_seconds=2, client={
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "monitor",
            "sasl.password": "${CDCW_KAFKA_PASSWORD}"})],
        "connect": [connect_worker("worker", f"http://127.0.0.1:{free_port()}", timeout_seconds=2, username="monitor",
                                   password="${CDCW_CONNECT_PASSWORD}")],
        "postgres": [postgres_source("source", free_port(), timeout_seconds=2, user="monitor",
                                     password="${CDCW_PG_PASSWORD}")],
    }


def config_text() -> str:
    return exporter_config(**config_sections())


def leaked(text: str) -> list[str]:
    return [name for name, secret in SECRETS.items() if secret in text]


@pytest.fixture(autouse=True)
def secrets_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, secret in SECRETS.items():
        monkeypatch.setenv(name, secret)


def test_no_secret_in_the_log_the_metrics_or_check(serve_factory, tmp_path: Path) -> None:
    serve = serve_factory(config_text(), "--log.level", "debug")
    scrapes = serve.text() + serve.text()
    assert 'cdcwatch_up{collector="postgres",target="source"} 0.0' in scrapes  # every target failed, errors logged
    assert not leaked(scrapes), "a secret is in /metrics"
    serve.stop()
    assert "source" in serve.log.read_text() and not leaked(serve.log.read_text()), "a secret is in the log"
    config = tmp_path / "check.yml"
    config.write_text(config_text())
    done = subprocess.run([sys.executable, "-m", "cdcwatch.cli", "check", "--config.file", str(config),
                           "--log.level", "debug"], capture_output=True, text=True, timeout=120, env=os.environ)
    assert done.returncode != 0 and "source" in done.stdout + done.stderr  # the failures are reported ...
    assert not leaked(done.stdout + done.stderr), "a secret is in cdcwatch check's output"  # ... without secrets


@pytest.mark.parametrize("section, path, wrong", [
    ("postgres", ("passwrod",), "x"),  # an unknown key beside the password
    ("connect", ("username",), ["monitor"]),  # a wrong type beside it
    ("debezium", ("jmx", "port"), "not-a-port"),
    ("postgres", ("password",), ["${CDCW_PG_PASSWORD}"]),  # the secret itself of a wrong type
    ("kafka", ("client", "sasl.password"), {"${CDCW_KAFKA_PASSWORD}": 1}),
])
def test_a_bad_config_error_shows_no_secret(tmp_path: Path, section: str, path: tuple[str, ...], wrong: object) -> None:
    sections = config_sections()
    entry = sections[section][0]
    for key in path[:-1]:
        entry = entry[key]
    entry[path[-1]] = wrong
    config = tmp_path / "bad.yml"
    config.write_text(exporter_config(**sections))
    done = subprocess.run([sys.executable, "-m", "cdcwatch.cli", "check", "--config.file", str(config)],
                          capture_output=True, text=True, timeout=60, env=os.environ)
    assert done.returncode == 2, done.stdout + done.stderr
    assert not leaked(done.stdout + done.stderr), done.stderr
