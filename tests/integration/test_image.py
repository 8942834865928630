"""The container image (scripts/build-image.sh) against the local stack, as users run it.

The image is built, or reused when one of the same build inputs exists. Its config is a mounted file and
its secrets (the Kafka Connect REST password, behind Kafka's basic-auth extension, and the MariaDB password)
come from the environment as `${VAR}`: a secret not passed through gives that target up 0. In the container,
`cdcwatch check` exits 0, and `cdcwatch serve` (the image's default command) with a read-only root
filesystem and a tmpfs /tmp, scraped by a real Prometheus, has every configured collector up, reads the
Debezium connector's MBeans through the in-process JVM, and runs as UID 10001. The container shares the
host's network (the stack listens on 127.0.0.1).
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdcwatch import __version__
from cdcwatch.promapi import PrometheusApi
from devstack.configs import connect_worker, exporter_config, jmx_target, kafka_cluster, listen, mysql_source, postgres_source
from devstack.connect import ConnectWorker
from devstack.debezium import postgres_connector_properties
from devstack.procs import free_port, port_open, wait_for
from devstack.prometheus import PrometheusServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SERVER = "imagesrv"
USER, PASSWORD = "monitor", "image-secret-3"
SECRETS = {"CONNECT_PASSWORD": PASSWORD}
"""The environment the container gets (the MariaDB password is added from the fixture)."""
IN_CONTAINER = "/etc/cdcwatch/cdcwatch.yml"
"""Where the image's default command reads its config."""


@pytest.fixture(scope="module")
def image() -> tuple[str, list[str]]:
    """The image's name (built now unless one of the same inputs exists) and the podman flags this host needs."""
    built = subprocess.run([str(ROOT / "scripts/build-image.sh")], capture_output=True, text=True, timeout=1200)
    assert built.returncode == 0, built.stdout + built.stderr
    name = built.stdout.strip().splitlines()[-1]
    flags = subprocess.run([str(ROOT / "image/podman-flags.sh"), name], capture_output=True, text=True, check=True)
    return name, flags.stdout.split()


@pytest.fixture(scope="module")
def worker(postgres, kafka, stack_dir) -> Iterator[ConnectWorker]:
    """A standalone Connect worker (REST behind basic auth, JMX) running the Debezium PostgreSQL connector."""
    postgres.sql("DROP TABLE IF EXISTS image_items; CREATE TABLE image_items (id int PRIMARY KEY);"
                 "INSERT INTO image_items VALUES (1)")
    properties = postgres_connector_properties(stack_dir / "image-connect", postgres.port, SERVER, "public.image_items",
                                               slot="image_slot")
    for engine_only in ("offset.storage", "offset.storage.file.filename", "offset.flush.interval.ms"):
        properties.pop(engine_only)
    process = ConnectWorker(stack_dir / "image-connect", kafka.bootstrap, connectors={"inventory": properties},
                            users={USER: PASSWORD})
    process.start()
    yield process
    process.stop()
    postgres.drop_slot("image_slot")


def config(worker: ConnectWorker, kafka, postgres, mariadb, port: int) -> str:
    return exporter_config(
        listen=listen(port),  # the host's network: loopback is enough here
        debezium=[jmx_target("worker-jvm", worker.jmx_port)],
        connect=[connect_worker("worker", worker.url, jmx_port=worker.jmx_port, username=USER,
                                password="${CONNECT_PASSWORD}")],
        kafka=[kafka_cluster("k4", kafka.bootstrap)],
        postgres=[postgres_source("source", postgres.port)],
        mysql=[mysql_source("binlogs", mariadb.port, mariadb.user, password="${MYSQL_PASSWORD}")])


EXPECTED_UP = {("debezium", "worker-jvm"), ("connect", "worker"), ("kafka", "k4"), ("postgres", "source"),
               ("mysql", "binlogs")}
"""(collector, target) of every source the config above lists."""


def podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)


def running(container: str) -> bool:
    return podman("inspect", "--format", "{{.State.Running}}", container).stdout.strip() == "true"


def test_the_image_checks_and_serves_the_stack_read_only_as_uid_10001(image, worker, kafka, postgres, mariadb,
                                                                       stack_dir) -> None:
    name, flags = image
    port = free_port()
    config_file = stack_dir / "image-cdcwatch.yml"
    config_file.write_text(config(worker, kafka, postgres, mariadb, port), encoding="utf-8")
    config_file.chmod(0o644)  # read by UID 10001 in the container
    secrets = {**SECRETS, "MYSQL_PASSWORD": mariadb.password}
    run = [*flags, "--network", "host", "--read-only", "--tmpfs", "/tmp",
           "--volume", f"{config_file}:{IN_CONTAINER}:ro", *(f"--env={variable}" for variable in secrets)]
    container = f"cdcwatch-it-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, **secrets}  # podman's --env=NAME copies NAME from its own environment

    started = subprocess.run(["podman", "run", "--detach", "--name", container, *run, name], capture_output=True,
                             text=True, env=env, timeout=120)
    assert started.returncode == 0, started.stderr
    prometheus = PrometheusServer(stack_dir / "image-prometheus", {"cdcwatch": [f"127.0.0.1:{port}"]}, interval="2s")
    try:
        wait_for(lambda: port_open(port) or not running(container), 60, f"the container's /metrics on {port}")
        assert running(container), podman("logs", container).stderr
        prometheus.start()
        api = PrometheusApi(prometheus.url)

        def up() -> dict[tuple[str, str], float]:
            return {(r["metric"]["collector"], r["metric"]["target"]): float(r["value"][1])
                    for r in api.query("cdcwatch_up")}

        wait_for(lambda: (found := up()).keys() == EXPECTED_UP and set(found.values()) == {1}, 90,
                 "Prometheus to find every collector of the container up")
        wait_for(lambda: api.query(f'cdcwatch_debezium_connected{{server="{SERVER}"}} == 1'), 90,
                 "the connector's MBeans read through the container's JVM")

        pid = podman("inspect", "--format", "{{.State.Pid}}", container).stdout.strip()
        status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
        assert status["Uid"].split() == ["10001"] * 4 and status["Gid"].split() == ["10001"] * 4
        command = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        assert command[-4:] == ["serve", "--config.file", IN_CONTAINER, ""] and command[-5].endswith("/cdcwatch"), command

        check = subprocess.run(["podman", "run", "--rm", *run, name, "check", "--config.file", IN_CONTAINER],
                               capture_output=True, text=True, env=env, timeout=120)
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        prometheus.stop()
        logged = podman("logs", container)
        logs = logged.stdout + logged.stderr
        podman("rm", "--force", "--time", "10", container)
    assert "Traceback" not in logs, logs


def test_the_image_says_what_it_is_in_oci_labels(image) -> None:
    """What a registry, a scanner or `podman inspect` shows of the image: its version (cdcwatch's own), the commit
    it was built from, when, and its licence."""
    name, _ = image
    inspected = subprocess.run(["podman", "image", "inspect", "--format", "{{json .Labels}}", name],
                               capture_output=True, text=True, check=True)
    labels = json.loads(inspected.stdout)
    assert labels["org.opencontainers.image.version"] == __version__
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert len(labels["org.opencontainers.image.revision"]) == 40, labels
    assert labels["org.opencontainers.image.created"].endswith("Z"), labels
