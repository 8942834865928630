"""Every configuration file cdcwatch reads goes through one loader and fails the same way: each command that
takes the file exits 2, printing `cdcwatch: invalid configuration in FILE:` and one line per problem that names
its key path (or, for YAML syntax, its line and column), and no traceback.

One file per failure case under tests/conffiles/, per kind: `invalid-*.yaml` (the exporter's config),
`web-invalid-*.yaml` (the web config), `mixin-invalid-*.yaml` (the mixin config). Each file lists the
problem lines it must produce as `# error: ` comments (each a prefix of one line, in order)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from cdcwatch.cli import main
from cdcwatch.config import ConfigError
from cdcwatch.exporter import Exporter
from cdcwatch.web import load_web_config
from tests.tools import ROOT

CONFFILES = ROOT / "tests" / "conffiles"

Command = Callable[[Path, Path], list[str]]
"""(the file under test, a scratch directory) → the command line that reads it."""


def _with_web_config(scratch: Path, web: Path, in_config: bool) -> Path:
    """A valid exporter config, naming `web` as its listen.web_config_file or not."""
    config = scratch / "cdcwatch.yml"
    listen = f"listen: {{web_config_file: '{web}'}}\n" if in_config else ""
    config.write_text(listen + "postgres:\n  - name: main\n    port: 1\n", encoding="utf-8")
    return config


COMMANDS: dict[str, dict[str, Command]] = {
    "invalid": {
        "check": lambda f, d: ["check", "--config.file", str(f)],
        "serve": lambda f, d: ["serve", "--config.file", str(f)],
    },
    "web-invalid": {
        "serve --web.config.file": lambda f, d: ["serve", "--config.file", str(_with_web_config(d, f, False)),
                                                 "--web.config.file", str(f)],
        "serve, listen.web_config_file": lambda f, d: ["serve", "--config.file", str(_with_web_config(d, f, True))],
        "check, listen.web_config_file": lambda f, d: ["check", "--config.file", str(_with_web_config(d, f, True))],
    },
    "mixin-invalid": {
        "alerts": lambda f, d: ["alerts", "--mixin.file", str(f)],
        "mixin generate": lambda f, d: ["mixin", "generate", "--mixin.file", str(f), "--out", str(d / "out")],
        "dashboards preview": lambda f, d: ["dashboards", "preview", "--prometheus", "http://127.0.0.1:1",
                                            "--mixin.file", str(f), "--out", str(d / "out")],
    },
}


def _cases() -> list[pytest.param]:
    cases = []
    for kind, commands in COMMANDS.items():
        for path in sorted(CONFFILES.glob(f"{kind}-*.yaml")):
            cases += [pytest.param(path, command, id=f"{path.stem} | {name}") for name, command in commands.items()]
    return cases


def expected_problems(path: Path) -> list[str]:
    return [line.removeprefix("# error: ") for line in path.read_text(encoding="utf-8").splitlines()
            if line.startswith("# error: ")]


@pytest.fixture
def never_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file wrongly accepted fails the test here, instead of a scrape or a server that never returns."""

    def reached(*args: object, **kwargs: object) -> None:
        raise AssertionError("the configuration was accepted")

    monkeypatch.setattr(Exporter, "from_config", reached)  # what `check` and `serve` build once the files are good
    monkeypatch.delenv("CDCWATCH_UNSET_SECRET", raising=False)


def run_rejected(argv: list[str], source: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """Run the command, assert exit 2 with the message's header and no traceback; the problem lines."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    header = f"cdcwatch: invalid configuration in {source}:"
    assert header in lines and "Traceback" not in captured.err, captured.err
    return [line.strip() for line in lines[lines.index(header) + 1:] if line.startswith("  ")]


@pytest.mark.parametrize(("path", "command"), _cases())
def test_a_bad_file_exits_2_with_one_line_per_problem(path: Path, command: Command, tmp_path: Path, never_serving: None,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    expected = expected_problems(path)
    assert expected, f"{path.name} lists no `# error: ` line"
    problems = run_rejected(command(path, tmp_path), path, capsys)
    assert len(problems) == len(expected), problems
    for line, wanted in zip(problems, expected, strict=True):
        assert line.startswith(wanted), (line, wanted)
    assert not (tmp_path / "out").exists(), "a generator wrote files from a bad config"


@pytest.mark.parametrize("kind", sorted(COMMANDS))
def test_a_missing_file_exits_2_naming_it(kind: str, tmp_path: Path, never_serving: None,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.yml"
    for command in COMMANDS[kind].values():
        assert run_rejected(command(missing, tmp_path), missing, capsys) == ["cannot read file: No such file or directory"]


def test_every_kind_has_the_basic_failure_cases() -> None:
    """YAML syntax, a document that is no mapping, an unknown key, a wrong type: for each kind of file."""
    for kind in COMMANDS:
        names = {p.stem.removeprefix(f"{kind}-") for p in CONFFILES.glob(f"{kind}-*.yaml")}
        assert {"yaml-syntax", "top-level-list", "unknown-key"} <= names, kind
        assert names & {"port-type", "threshold", "type"}, kind


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two self-signed certificates with their keys (openssl), for the TLS checks that need real PEM files."""
    d = tmp_path_factory.mktemp("pki")
    for name in ("a", "b"):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                        "-keyout", str(d / f"{name}.key"), "-out", str(d / f"{name}.crt"), "-days", "1", "-subj", f"/CN={name}"],
                       check=True, capture_output=True)
    return d


def test_a_web_config_with_real_tls_files_and_bcrypt_hashes_loads(pki: Path) -> None:
    (pki / "web.yml").write_text("tls_server_config: {cert_file: a.crt, key_file: a.key, client_ca_file: b.crt,\n"
                                 "                    client_auth_type: RequireAndVerifyClientCert}\n"
                                 "basic_auth_users: {prometheus: '$2b$04$abcdefghijklmnopqrstuu'}\n", encoding="utf-8")
    web = load_web_config(pki / "web.yml")
    assert web.tls_server_config is not None and web.tls_server_config.cert_file == "a.crt"
    assert set(web.basic_auth_users) == {"prometheus"}


def test_a_key_that_is_not_the_certificates_is_named(pki: Path) -> None:
    (pki / "mismatch.yml").write_text("tls_server_config: {cert_file: a.crt, key_file: b.key}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_web_config(pki / "mismatch.yml")
    assert raised.value.problems == ["tls_server_config: cert_file and key_file are not a PEM certificate and its key: "
                                     "[X509: KEY_VALUES_MISMATCH] key values mismatch"]


def test_a_client_ca_file_that_holds_no_certificate_is_named(pki: Path) -> None:
    (pki / "ca.yml").write_text("tls_server_config: {cert_file: a.crt, key_file: a.key, client_ca_file: a.key,\n"
                                "                    client_auth_type: RequireAndVerifyClientCert}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_web_config(pki / "ca.yml")
    assert len(raised.value.problems) == 1
    assert raised.value.problems[0].startswith("tls_server_config.client_ca_file: not PEM CA certificates: ")
