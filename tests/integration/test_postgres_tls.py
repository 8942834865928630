"""The postgres collector with `sslmode: verify-full` against the real PostgreSQL serving TLS with a
certificate from a throw-away CA, valid for 127.0.0.1 only: with that CA as `sslrootcert` the slots are read
(up 1); with another CA, or under a host name the certificate does not name (localhost), the source is up 0
with libpq's reason in the log, and cdcwatch carries on."""

from __future__ import annotations

import shutil

import pytest

from devstack.configs import exporter_config, postgres_source
from devstack.procs import wait_for
from devstack.tls import make_pki
from tests.integration.conftest import parse, value

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tls_postgres(postgres, stack_dir):
    """The session's PostgreSQL with ssl = on (reloaded, no restart), and off again afterwards."""
    pki = make_pki(stack_dir / "pg-pki", names=("pg",), alt_names="IP:127.0.0.1")
    cert, key = postgres.dir / "tls-server.crt", postgres.dir / "tls-server.key"
    shutil.copy(pki.cert("pg"), cert)
    shutil.copy(pki.key("pg"), key)
    key.chmod(0o600)
    for path in (cert, key):
        shutil.chown(path, postgres.dir.owner(), postgres.dir.group())
    postgres.sql(f"ALTER SYSTEM SET ssl_cert_file = '{cert}'")
    postgres.sql(f"ALTER SYSTEM SET ssl_key_file = '{key}'")
    postgres.sql("ALTER SYSTEM SET ssl = on")
    postgres.sql("SELECT pg_reload_conf()")
    wait_for(lambda: postgres.sql("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()") == "t", 10, "TLS on")
    yield pki
    for setting in ("ssl", "ssl_cert_file", "ssl_key_file"):
        postgres.sql(f"ALTER SYSTEM RESET {setting}")
    postgres.sql("SELECT pg_reload_conf()")


def source(name: str, host: str, port: int, rootcert: object) -> dict[str, object]:
    return postgres_source(name, port, host=host, timeout_seconds=5, sslmode="verify-full", sslrootcert=str(rootcert))


def test_verify_full(tls_postgres, postgres, stack_dir, serve_factory) -> None:
    postgres.sql("SELECT pg_create_logical_replication_slot('tls_slot', 'pgoutput')")
    other = make_pki(stack_dir / "pg-other-ca", names=(), ca_name="some other CA")
    try:
        serve = serve_factory(exporter_config(postgres=[source("verified", "127.0.0.1", postgres.port, tls_postgres.ca),
                                                        source("wrong-ca", "127.0.0.1", postgres.port, other.ca),
                                                        source("wrong-name", "localhost", postgres.port, tls_postgres.ca)]))
        values = parse(serve.text())
        assert value(values, "cdcwatch_up", collector="postgres", target="verified") == 1
        assert value(values, "cdcwatch_postgres_replication_slot_active", target="verified", slot="tls_slot") == 0
        assert value(values, "cdcwatch_up", collector="postgres", target="wrong-ca") == 0
        assert value(values, "cdcwatch_up", collector="postgres", target="wrong-name") == 0
        assert serve.process.poll() is None
        serve.stop()
        log = serve.log.read_text()
        down = {name: next(line for line in log.splitlines() if f"target {name} (postgres) is down" in line)
                for name in ("wrong-ca", "wrong-name")}
        assert "certificate verify failed" in down["wrong-ca"], down
        assert 'does not match host name "localhost"' in down["wrong-name"], down
    finally:
        postgres.drop_slot("tls_slot")
