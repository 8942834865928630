"""Files from Secrets and ConfigMaps (`files`): mounted read-only where the exporter's configuration names them, a
Secret's readable by the pod's group only; the examples' verify-full PostgreSQL source (sslrootcert), TLS JMX target
(ca_file) and Kafka client certificate and key as the pod gets them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cdcwatch.validation import parse_config
from tests.unit.test_chart import CHART, container, exporter_config, found_secret_env, of_kind, rendered

pytestmark = pytest.mark.chart

EXAMPLE = CHART / "examples"


def mounted_files(objects: tuple[dict[str, Any], ...]) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Mount path → (its volume mount, its volume), for the volumes of `files`."""
    (deployment,) = of_kind(objects, "Deployment")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    return {m["mountPath"]: (m, volumes[m["name"]]) for m in container(objects)["volumeMounts"] if m["name"].startswith("files-")}


def file_of(objects: tuple[dict[str, Any], ...], path: str) -> dict[str, Any]:
    """The volume a file of the configuration is in; its mount read-only, the file one the volume holds."""
    mounts = mounted_files(objects)
    (directory,) = [d for d in mounts if path.startswith(d + "/")]
    mount, volume = mounts[directory]
    assert mount["readOnly"] is True
    source = volume.get("secret") or volume["configMap"]
    if "items" in source:
        assert path.removeprefix(directory + "/") in {item["path"] for item in source["items"]}
    return dict(volume)


def loaded(example: str) -> tuple[tuple[dict[str, Any], ...], Any]:
    objects = rendered(str(EXAMPLE / example))
    env = {name: "x" for name in found_secret_env(container(objects))}
    return objects, parse_config(exporter_config(objects), env=env)


def test_a_verify_full_postgres_source_reads_its_ca_from_a_config_map() -> None:
    objects, config = loaded("values-postgres.yaml")
    (source,) = config.postgres
    assert source.sslmode == "verify-full" and source.sslrootcert
    volume = file_of(objects, source.sslrootcert)
    assert volume["configMap"] == {"name": "orders-db-ca", "defaultMode": 0o444}


def test_a_tls_jmx_target_reads_its_ca_from_a_config_map() -> None:
    objects, config = loaded("values-jmx-tls.yaml")
    (target,) = config.debezium
    assert target.jmx.ssl and target.jmx.ca_file and target.jmx.backend == "jpype"
    assert file_of(objects, target.jmx.ca_file)["configMap"]["name"] == "debezium-jmx-ca"


def test_a_client_key_comes_from_a_secret_only_the_pods_group_reads() -> None:
    objects, config = loaded("values-cluster.yaml")
    (cluster,) = config.kafka
    key = file_of(objects, cluster.client["ssl.key.location"])
    assert key["secret"]["secretName"] == "cdcwatch" and key["secret"]["defaultMode"] == 0o440
    assert file_of(objects, cluster.client["ssl.ca.location"])["secret"]["secretName"] == "cdc-cluster-ca-cert"
    (deployment,) = of_kind(objects, "Deployment")
    assert deployment["spec"]["template"]["spec"]["securityContext"]["fsGroup"] == 10001  # the group that reads it
    for source in (config.postgres[0].sslrootcert, config.reconcile[0].source.sslrootcert):
        assert source and file_of(objects, source)["configMap"]["name"] == "orders-db-ca"


@pytest.mark.parametrize(("files", "refused"), [
    ([{"name": "a", "secret": "s", "configMap": "c"}], "/files/0"),
    ([{"name": "a"}], "/files/0"),
    ([{"name": "a", "secret": "s"}, {"name": "a", "configMap": "c"}], 'files: name "a" is used twice'),
    ([{"name": "Not_A_Name", "secret": "s"}], "/files/0/name"),
], ids=["both", "neither", "twice", "name"])
def test_bad_files_are_refused(files: list[Any], refused: str, tmp_path: Path) -> None:
    from tests.unit.test_chart import KUBERNETES_VERSIONS, helm

    (tmp_path / "values.json").write_text(json.dumps({"config": {"postgres": [{"name": "db"}]}, "files": files}))
    done = helm("template", "x", str(CHART), "--kube-version", KUBERNETES_VERSIONS[-1], "-f", str(tmp_path / "values.json"))
    assert done.returncode != 0 and refused in done.stderr, done.stderr
