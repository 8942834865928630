"""The `cdcwatch` command as a user runs it."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from cdcwatch import __version__
from devstack.configs import exporter_config, jmx_target
from devstack.procs import free_port, port_open
from tests.integration.conftest import value

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "cdcwatch.cli"]


def run(*args, env=None):
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, env=env)


def test_version_and_help():
    assert run("--version").stdout.strip() == f"cdcwatch {__version__}"
    help_text = run("--help").stdout
    for word in ("serve", "check", "/metrics", "config"):
        assert word in help_text


def test_config_error_exits_2_naming_the_key_and_serves_nothing(tmp_path):
    port = free_port()
    config = tmp_path / "bad.yml"
    config.write_text(exporter_config(listen={"port": port}, debezium=[
        jmx_target("a", 1, jmx={"username": "u", "password": "${CDCWATCH_TEST_PW}"}),
        {"name": "b", "jmx": {"host": "127.0.0.1", "port": "x"}}]))  # the port is no integer
    env = {"CDCWATCH_TEST_PW": "very-secret-pw", "PATH": "/usr/bin:/bin"}
    for command in ("check", "serve"):
        done = run(command, "--config", str(config), env=env)
        assert done.returncode == 2
        assert "debezium[1].jmx.port: expected an integer" in done.stderr
        assert "very-secret-pw" not in done.stderr + done.stdout
    assert not port_open(port)
    assert run("check", "--config", str(tmp_path / "missing.yml")).returncode == 2


def test_check_exits_1_when_a_target_is_down(tmp_path):
    config = tmp_path / "down.yml"
    config.write_text(exporter_config(debezium=[jmx_target("nobody-home", free_port(), timeout_seconds=5)]))
    done = run("check", "--config", str(config))
    assert done.returncode == 1, done.stderr
    # a Kafka cluster whose every broker is down fails at once, with why, not at its deadline (5 s)
    assert all(int(re.search(r" (\d+)ms ", line).group(1)) < 4000
               for line in done.stdout.splitlines() if line.startswith(("kafka-refused ", "kafka-nowhere "))), done.stdout
    line = next(line for line in done.stdout.splitlines() if line.startswith("nobody-home"))
    assert "NO" in line and "error:" in line


def test_check_names_each_failed_targets_address_what_failed_and_what_to_check(kafka, tmp_path):
    closed, nowhere = free_port(), "no-such-host.invalid"  # RFC 2606: never resolves
    wrong_password = kafka.secure_client_settings("not-the-password")
    no_ca = {k: v for k, v in kafka.secure_client_settings().items() if k != "ssl.ca.location"}
    config = tmp_path / "down.yml"
    config.write_text(exporter_config(
        debezium=[jmx_target("jmx-refused", closed), jmx_target("jmx-nowhere", 9010, host=nowhere)],
        kafka=[{"name": "kafka-refused", "bootstrap_servers": f"127.0.0.1:{closed}"},
               {"name": "kafka-nowhere", "bootstrap_servers": f"{nowhere}:9092"},
               {"name": "kafka-password", "bootstrap_servers": kafka.secure_bootstrap, "client": wrong_password},
               {"name": "kafka-untrusted", "bootstrap_servers": kafka.secure_bootstrap, "client": no_ca}],
        connect=[{"name": "connect-refused", "url": f"http://127.0.0.1:{closed}"},
                 {"name": "connect-nowhere", "url": f"http://{nowhere}:8083"}],
        postgres=[{"name": "pg-refused", "port": closed}, {"name": "pg-nowhere", "host": nowhere}],
        mysql=[{"name": "mysql-refused", "port": closed, "user": "monitor"},
               {"name": "mysql-nowhere", "host": nowhere, "user": "monitor"}]))
    expected = {
        "jmx-refused": (f"127.0.0.1:{closed}", "connection refused"), "jmx-nowhere": (f"{nowhere}:9010", "unknown host"),
        "kafka-refused": (f"127.0.0.1:{closed}", "connection refused"), "kafka-nowhere": (f"{nowhere}:9092", "unknown host"),
        "kafka-password": (kafka.secure_bootstrap, "authentication failed"), "kafka-untrusted": (kafka.secure_bootstrap, "TLS failed"),
        "connect-refused": (f"http://127.0.0.1:{closed}", "connection refused"),
        "connect-nowhere": (f"http://{nowhere}:8083", "unknown host"),
        "pg-refused": (f"127.0.0.1:{closed}", "connection refused"), "pg-nowhere": (f"{nowhere}:5432", "unknown host"),
        "mysql-refused": (f"127.0.0.1:{closed}", "connection refused"), "mysql-nowhere": (f"{nowhere}:3306", "unknown host"),
    }
    done = run("check", "--config", str(config))
    assert done.returncode == 1, done.stderr
    # a Kafka cluster whose every broker is down fails at once, with why, not at its deadline (5 s)
    assert all(int(re.search(r" (\d+)ms ", line).group(1)) < 4000
               for line in done.stdout.splitlines() if line.startswith(("kafka-refused ", "kafka-nowhere "))), done.stdout
    rows = {line.split()[0]: line for line in done.stdout.splitlines()[1:]}
    for name, (address, kind) in expected.items():
        said = rows[name].partition("  error: ")[2]
        assert said.startswith(f"{address}: {kind}: ") and "; check " in said, rows[name]
        assert f"is down: {said}" in done.stderr, f"the log line of {name} says it otherwise"  # serve's log line
    assert "not-the-password" not in done.stdout + done.stderr


def test_serve_landing_page_metrics_and_404(serve_factory):
    serve = serve_factory(exporter_config(debezium=[jmx_target("nobody-home", free_port())]))
    base = f"http://127.0.0.1:{serve.port}"
    assert b'href="/metrics"' in urllib.request.urlopen(base + "/", timeout=10).read()
    text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    assert 'cdcwatch_up{collector="debezium",target="nobody-home"} 0.0' in text
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(base + "/other", timeout=10)
    assert raised.value.code == 404


def test_serve_reads_the_series_limit_from_the_config_file(postgres, serve_factory):
    source = {"postgres": [{"name": "main", "host": "127.0.0.1", "port": postgres.port, "slots": {"allow": ["limits_cap"]}}]}
    postgres.sql("SELECT pg_create_physical_replication_slot('limits_cap')")
    try:
        unlimited, capped = serve_factory(exporter_config(**source)).scrape(), \
            serve_factory(exporter_config(limits={"max_series_per_target": 3}, **source)).scrape()
    finally:
        postgres.drop_slot("limits_cap")

    def exported(values):
        return sum(1 for name, _ in values if name.startswith("cdcwatch_postgres_"))

    assert exported(unlimited) > 3 and value(unlimited, "cdcwatch_series_dropped_total", target="main") == 0
    assert exported(capped) == 3
    assert value(capped, "cdcwatch_series_dropped_total", target="main") == exported(unlimited) - 3


@pytest.mark.parametrize("argument, value, message", [
    ("--subscribe-pattern", "inventory\\.(", "--subscribe-pattern is not a regular expression"),
    ("--target", "host=db port", "--target is neither delta:ROOT nor a PostgreSQL connection string"),
    ("--target", "delta:", "--target delta: needs the tables' root"),
    ("--kafka-option", "acks", "--kafka-option 'acks': expected KEY=VALUE"),
])
def test_apply_rejects_bad_input_before_starting_spark(tmp_path, argument, value, message):
    arguments = {"--bootstrap-servers": "127.0.0.1:1", "--subscribe-pattern": "inventory\\..*", "--target": "host=db",
                 "--checkpoint": str(tmp_path / "checkpoint"), argument: value}
    done = subprocess.run([sys.executable, "-m", "spark_listeners.apply", *[part for pair in arguments.items() for part in pair]],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "checkpoint").exists()
