"""The exporter-style flags of `cdcwatch serve` and `check`, with the older spellings kept as aliases."""

from __future__ import annotations

import pytest

from cdcwatch.cli import _parser, listen_override, main
from cdcwatch.config import ConfigError


@pytest.mark.parametrize("argv", [
    ["serve", "--config.file", "a.yml", "--web.listen-address", "127.0.0.2:9999", "--log.level", "debug"],
    ["serve", "--config", "a.yml", "--web.listen-address", "127.0.0.2:9999", "--log.level", "debug"],
    ["serve", "-c", "a.yml", "--web.listen-address", "127.0.0.2:9999", "--log.level", "debug"],
])
def test_serve_flags_in_the_exporters_style_and_their_aliases(argv: list[str]) -> None:
    args = _parser().parse_args(argv)
    assert (args.config, args.web_listen_address, args.log_level) == ("a.yml", "127.0.0.2:9999", "debug")


def test_check_takes_the_config_file_flag() -> None:
    assert _parser().parse_args(["check", "--config.file", "b.yml"]).config == "b.yml"


@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.2:9999", ("127.0.0.2", 9999)),
    (":10121", (None, 10121)),          # every interface, as the exporter toolkit reads it
    ("[::1]:8080", ("::1", 8080)),
])
def test_listen_address_forms(text: str, expected: tuple[str | None, int]) -> None:
    assert listen_override(text) == expected


@pytest.mark.parametrize("text", ["10121", "host:", "host:port", "host:70000", "host:0"])
def test_a_bad_listen_address_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match="--web.listen-address"):
        listen_override(text)


def test_the_apply_job_is_its_own_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["apply", "--bootstrap-servers", "b:9092"]) == 2
    assert "cdcwatch-apply" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["alerts"], ["mixin", "generate"]])
def test_a_mixin_command_given_the_exporters_flag_names_its_own(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command, "--config", "mixin.yml"]) == 2
    assert "--mixin.file mixin.yml" in capsys.readouterr().err
