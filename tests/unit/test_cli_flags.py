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


def _alert_names(rules: str) -> set[str]:
    import yaml

    return {rule["alert"] for group in yaml.safe_load(rules)["groups"] for rule in group["rules"] if "alert" in rule}


def test_the_rules_stages_come_from_the_exporters_configuration_as_the_charts_auto(
        tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    """A VM deployment collecting Kafka and PostgreSQL gets their rules and none of a stage it does not run (no Spark
    listener: no CdcSparkDriverAbsent), even with its passwords' variables unset where the rules are generated; the
    mixin file's own `stages` and `--spark` turn a stage on; relative runbook links are warned about."""
    monkeypatch.delenv("PG_PASSWORD", raising=False)
    config = tmp_path / "cdcwatch.yml"
    config.write_text("kafka:\n  - {name: main, bootstrap_servers: 'b:9092'}\n"
                      "postgres:\n  - {name: src, host: db, password: '${PG_PASSWORD}'}\n")
    assert main(["alerts", "--stages-from", str(config)]) == 0
    out = capsys.readouterr().out
    names = _alert_names(out)
    assert {"CdcKafkaConsumerLagHigh", "CdcPostgresSlotRunwayCritical", "CdcwatchTargetDown"} <= names
    assert not {n for n in names if n.startswith(("CdcSpark", "CdcDebezium", "CdcConnect", "CdcCanary", "CdcDelta",
                                                  "CdcReconcile", "CdcMysql"))}
    assert "runbook links are relative" in caplog.text
    caplog.clear()
    mixin = tmp_path / "mixin.yml"
    mixin.write_text("stages: {canary: true}\nrunbook_base_url: https://docs.example.com/cdcwatch/runbook/\n")
    assert main(["alerts", "--stages-from", str(config), "--mixin.file", str(mixin), "--spark"]) == 0
    out = capsys.readouterr().out
    names = _alert_names(out)
    assert "CdcSparkDriverAbsent" in names and "CdcCanaryStale" in names and "CdcDebeziumConnectorDisconnected" not in names
    assert "runbook links are relative" not in caplog.text


def test_spark_without_stages_from_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["alerts", "--spark"]) == 2
    assert "give --stages-from with it" in capsys.readouterr().err
