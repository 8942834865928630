"""JMX over TLS with credentials on the real Debezium JVM: its own JMX agent with
`com.sun.management.jmxremote.ssl=true`, `registry.ssl=true`, a PKCS#12 keystore whose certificate a
throw-away private CA signed, and a password file. cdcwatch trusts that CA through `jmx.ca_file` and reads
the password from the environment; without the CA (another CA, the JVM's default trust store, no TLS) the
target is up 0 with an error that names it and TLS, and the password is nowhere in the log or /metrics."""

from __future__ import annotations

import pytest

from devstack.configs import exporter_config, jmx_target
from devstack.debezium import DebeziumProcess, postgres_connector_properties
from devstack.procs import free_port, wait_for
from devstack.tls import KEYSTORE_PASSWORD, make_pki
from tests.integration.conftest import parse, value

pytestmark = pytest.mark.integration

SECRET = "jmx-tls-s3cret-Q8v"


@pytest.fixture(scope="module")
def tls_connector(postgres, stack_dir):
    postgres.sql("DROP TABLE IF EXISTS jmx_tls_items; CREATE TABLE jmx_tls_items (id int PRIMARY KEY)")
    state = stack_dir / "dbz-jmx-tls"
    pki = make_pki(state / "pki", names=("jmx",))
    passwords, access = state / "jmx.password", state / "jmx.access"
    passwords.write_text(f"monitor {SECRET}\n", encoding="utf-8")
    access.write_text("monitor readonly\n", encoding="utf-8")
    passwords.chmod(0o600)
    port = free_port()
    agent = {"port": port, "rmi.port": port, "host": "127.0.0.1", "ssl": "true", "registry.ssl": "true",
             "authenticate": "true", "password.file": passwords, "access.file": access}
    options = [f"-Dcom.sun.management.jmxremote.{key}={setting}" for key, setting in agent.items()]
    options += [f"-Djavax.net.ssl.keyStore={pki.pkcs12('jmx')}", f"-Djavax.net.ssl.keyStorePassword={KEYSTORE_PASSWORD}",
                "-Djavax.net.ssl.keyStoreType=PKCS12"]
    process = DebeziumProcess(state, port,
                              postgres_connector_properties(state, postgres.port, "tlssrv", "public.jmx_tls_items",
                                                            slot="jmx_tls_slot"),
                              extra_spec={"jmx_agent": True, "jvm_options": options})
    process.start()
    yield process, pki
    process.stop()
    postgres.drop_slot("jmx_tls_slot")


def target(name: str, port: int, **tls: object) -> dict[str, object]:
    return jmx_target(name, port, jmx={"username": "monitor", "password": "${CDCW_JMX_TLS_PASSWORD}", **tls}, timeout_seconds=10)


def test_tls_with_a_private_ca_and_credentials(tls_connector, serve_factory, stack_dir, monkeypatch) -> None:
    process, pki = tls_connector
    monkeypatch.setenv("CDCW_JMX_TLS_PASSWORD", SECRET)
    trusted = serve_factory(exporter_config(debezium=[target("tls", process.jmx_port, ssl=True, ca_file=str(pki.ca))]),
                            "--log.level", "debug")
    wait_for(lambda: value(trusted.scrape(), "cdcwatch_debezium_mbeans", target="tls") or 0, 60, "the Debezium beans over TLS")
    good = trusted.text()
    assert value(parse(good), "cdcwatch_up", target="tls") == 1
    assert value(parse(good), "cdcwatch_debezium_snapshot_state", target="tls", state="completed") is not None

    other = make_pki(stack_dir / "other-pki", names=(), ca_name="some other CA")
    untrusted = serve_factory(exporter_config(debezium=[
        target("wrong-ca", process.jmx_port, ssl=True, ca_file=str(other.ca)),
        target("default-trust", process.jmx_port, ssl=True), target("no-tls", process.jmx_port)]), "--log.level", "debug")
    bad = untrusted.text()
    for name in ("wrong-ca", "default-trust", "no-tls"):
        assert value(parse(bad), "cdcwatch_up", target=name) == 0, name
    untrusted.stop()
    trusted.stop()
    log = untrusted.log.read_text()
    for name in ("wrong-ca", "default-trust"):
        line = next(line for line in log.splitlines() if f"target {name} " in line and "is down" in line)
        assert "TLS handshake failed" in line and "not signed by a trusted CA" in line, line
    assert SECRET not in good + bad + log + trusted.log.read_text(), "the JMX password leaked"
