"""JMX with credentials on the real Debezium JVM: its connector server takes a password file; cdcwatch
reads the password from the environment, with both backends. A wrong password is up 0, not a crash."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from devstack.configs import exporter_config, jmx_target, listen
from devstack.debezium import DebeziumProcess, postgres_connector_properties
from devstack.procs import free_port, port_open, wait_for
from tests.integration.conftest import parse, value

pytestmark = pytest.mark.integration

SECRET = "jmx-s3cret"


@pytest.fixture(scope="module")
def secured_connector(postgres, stack_dir):
    postgres.sql("DROP TABLE IF EXISTS jmx_items; CREATE TABLE jmx_items (id int PRIMARY KEY)")
    state = stack_dir / "dbz-jmx-auth"
    state.mkdir(parents=True, exist_ok=True)
    passwords, access = state / "jmx.password", state / "jmx.access"
    passwords.write_text(f"monitor {SECRET}\n", encoding="utf-8")
    access.write_text("monitor readonly\n", encoding="utf-8")
    passwords.chmod(0o600)
    process = DebeziumProcess(state, free_port(),
                              postgres_connector_properties(state, postgres.port, "authsrv", "public.jmx_items",
                                                            slot="jmx_auth_slot"),
                              extra_spec={"jmx_password_file": str(passwords), "jmx_access_file": str(access)})
    process.start()
    yield process
    process.stop()
    postgres.drop_slot("jmx_auth_slot")


@pytest.mark.parametrize("backend", ["jpype", "jmxquery"])
def test_credentials_from_the_environment(secured_connector, stack_dir, backend) -> None:
    port = free_port()
    config = stack_dir / f"jmx-auth-{backend}.yml"
    def target(name: str, **credentials: str) -> dict[str, object]:
        return jmx_target(name, secured_connector.jmx_port, jmx={**credentials, "backend": backend}, timeout_seconds=20)

    config.write_text(exporter_config(listen=listen(port), debezium=[
        target("good", username="monitor", password="${JMX_PASSWORD}"),
        target("bad", username="monitor", password="wrong"),
        target("anonymous")]), encoding="utf-8")
    log = stack_dir / f"jmx-auth-{backend}.log"
    process = subprocess.Popen([sys.executable, "-m", "cdcwatch.cli", "serve", "--config", str(config)],
                               env={**os.environ, "JMX_PASSWORD": SECRET}, stdout=open(log, "ab"), stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: port_open(port), 30, "cdcwatch serve")
        import urllib.request

        def scrape():
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as response:
                return parse(response.read().decode())

        wait_for(lambda: value(scrape(), "cdcwatch_debezium_mbeans", target="good") or 0, 60, "the beans")
        values = scrape()
        assert value(values, "cdcwatch_up", target="good") == 1
        assert value(values, "cdcwatch_up", target="bad") == 0
        assert value(values, "cdcwatch_up", target="anonymous") == 0
        assert SECRET not in log.read_text(encoding="utf-8")
    finally:
        process.terminate()
        process.wait(30)
