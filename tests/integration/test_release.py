"""The release (scripts/release.sh, what .github/workflows/release.yml runs on a tag) against a real OCI registry
started here (go-containerregistry's, built from the Go module proxy by scripts/lint-tools.sh): then pulled back as a
user pulls it. The image runs from the registry and says its version and commit; its SBOM is found as its referrer and
lists what the image holds; the chart comes back with `helm pull`, renders the published image, and its manifest
names the commit. The release runs from a clone of this commit: a release is a commit's, never a work tree's."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cdcwatch import __version__
from devstack.procs import free_port, wait_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".cdcwatch/go/bin"
CHART_VERSION = yaml.safe_load((ROOT / "charts/cdcwatch/Chart.yaml").read_text())["version"]


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A registry on 127.0.0.1 (plain HTTP), answering the distribution API."""
    port = free_port()
    log = (tmp_path_factory.mktemp("registry") / "registry.log").open("w")
    process = subprocess.Popen([str(BIN / "registry"), "-port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    address = f"127.0.0.1:{port}"

    def answers() -> bool:
        with urllib.request.urlopen(f"http://{address}/v2/", timeout=2) as response:
            return response.status == 200
    try:
        wait_for(answers, 30, f"the registry at {address}", interval=0.2)
        yield address
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


@pytest.fixture(scope="module")
def released(registry: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """scripts/release.sh REGISTRY, run in a clone of this commit; (the image's digest reference, the commit)."""
    clone = tmp_path_factory.mktemp("release") / "cdcwatch"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    revision = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True, check=True).stdout.strip()
    done = subprocess.run([str(clone / "scripts/release.sh"), registry], cwd=clone, capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "CDCWATCH_RELEASE_PLAIN_HTTP": "1", "CDCWATCH_GO_BIN": str(BIN)})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip().splitlines()[-1], revision


def test_the_image_runs_from_the_registry_and_says_its_version_and_commit(registry: str, released: tuple[str, str]) -> None:
    reference, revision = released
    # the version's tag is the digest the release attached the SBOM to
    resolved = subprocess.run([str(BIN / "oras"), "resolve", "--plain-http", f"{registry}/cdcwatch:{__version__}"],
                              capture_output=True, text=True)
    assert resolved.returncode == 0 and reference == f"{registry}/cdcwatch@{resolved.stdout.strip()}", resolved
    name = reference
    pulled = subprocess.run(["podman", "pull", "--quiet", "--tls-verify=false", name], capture_output=True, text=True)
    assert pulled.returncode == 0, pulled.stderr
    labels = json.loads(subprocess.run(["podman", "image", "inspect", "--format", "{{json .Labels}}", name],
                                       capture_output=True, text=True, check=True).stdout)
    assert (labels["org.opencontainers.image.version"], labels["org.opencontainers.image.revision"],
            labels["org.opencontainers.image.licenses"]) == (__version__, revision, "Apache-2.0")
    flags = subprocess.run([str(ROOT / "image/podman-flags.sh"), name], capture_output=True, text=True, check=True).stdout.split()
    ran = subprocess.run(["podman", "run", "--rm", *flags, name, "--version"], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and __version__ in ran.stdout, ran.stdout + ran.stderr


def test_the_sbom_is_the_images_referrer_and_lists_what_it_holds(registry: str, released: tuple[str, str],
                                                                  tmp_path: Path) -> None:
    reference, revision = released
    found = subprocess.run([str(BIN / "oras"), "discover", "--plain-http", "--format", "json", reference],
                           capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    (sbom,) = [r for r in json.loads(found.stdout)["referrers"] if r["artifactType"] == "application/spdx+json"]
    assert sbom["annotations"]["org.opencontainers.image.revision"] == revision
    pulled = subprocess.run([str(BIN / "oras"), "pull", "--plain-http", "--output", str(tmp_path),
                             f"{registry}/cdcwatch@{sbom['digest']}"], capture_output=True, text=True)
    assert pulled.returncode == 0, pulled.stderr
    document = json.loads((tmp_path / "sbom.spdx.json").read_text())
    assert document["spdxVersion"] == "SPDX-2.3"
    packages = {(p["name"], p["versionInfo"]): p for p in document["packages"]}
    assert packages[("cdcwatch", __version__)]["licenseDeclared"] == "Apache-2.0"
    # what the image holds, read here from the image itself: its Python distributions and Debian's JRE
    listed = subprocess.run(["podman", "run", "--rm", "--entrypoint", "/opt/cdcwatch/bin/python",
                             *subprocess.run([str(ROOT / "image/podman-flags.sh"), reference], capture_output=True,
                                             text=True, check=True).stdout.split(),
                             reference, "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"],
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert {(d["name"].lower(), d["version"]) for d in json.loads(listed.stdout)} == \
        {(name.lower(), version) for (name, version), p in packages.items() if p["SPDXID"].startswith("SPDXRef-pypi-")}
    assert any(name == "openjdk-17-jre-headless" for name, _ in packages)


def test_the_chart_is_pulled_from_the_registry_and_renders_the_published_image(registry: str, released: tuple[str, str],
                                                                                tmp_path: Path) -> None:
    _, revision = released
    pulled = subprocess.run([str(BIN / "helm"), "pull", f"oci://{registry}/charts/cdcwatch", "--version", CHART_VERSION,
                             "--plain-http", "--destination", str(tmp_path)], capture_output=True, text=True)
    assert pulled.returncode == 0, pulled.stderr
    archive = tmp_path / f"cdcwatch-{CHART_VERSION}.tgz"
    manifest = subprocess.run([str(BIN / "oras"), "manifest", "fetch", "--plain-http",
                               f"{registry}/charts/cdcwatch:{CHART_VERSION}"], capture_output=True, text=True)
    assert manifest.returncode == 0, manifest.stderr
    annotations = json.loads(manifest.stdout)["annotations"]
    assert (annotations["org.opencontainers.image.version"], annotations["org.opencontainers.image.revision"],
            annotations["org.opencontainers.image.licenses"]) == (CHART_VERSION, revision, "Apache-2.0")
    rendered = subprocess.run([str(BIN / "helm"), "template", "cdcwatch", str(archive), "--kube-version", "1.31.0",
                               "--set", "config.postgres[0].name=db", "--set", f"image.repository={registry}/cdcwatch"],
                              capture_output=True, text=True)
    assert rendered.returncode == 0, rendered.stderr
    (deployment,) = [o for o in yaml.safe_load_all(rendered.stdout) if o and o["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == f"{registry}/cdcwatch:{__version__}"
