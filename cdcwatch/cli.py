"""The `cdcwatch` command: the flags are parsed here, the work is done by the modules it calls (`serve`: server.py)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cdcwatch import __version__, reference
from cdcwatch.check import render_table
from cdcwatch.config import DEFAULT_PORT, WATCH_INTERVAL_SECONDS, Config, ConfigError
from cdcwatch.exporter import Exporter
from cdcwatch.server import ListenError, serve
from cdcwatch.validation import literal_secret_warnings, load_config
from cdcwatch.web import load_web_config

if TYPE_CHECKING:
    from cdcwatch.mixin import MixinConfig

__all__ = ["main"]

EXIT_OK, EXIT_DOWN, EXIT_CONFIG = 0, 1, 2

_DESCRIPTION = f"""\
cdcwatch watches change-data-capture pipelines (Debezium → Kafka → a Spark job or a sink connector) and exports what
it sees as Prometheus metrics.

  cdcwatch serve --config.file cdcwatch.yml   serve /metrics (default http://127.0.0.1:{DEFAULT_PORT}/metrics)
  cdcwatch check --config.file cdcwatch.yml   scrape every target once and print a table
  cdcwatch docs metrics|config|mixin          print the metrics, configuration or mixin configuration reference
  cdcwatch alerts [--mixin.file mixin.yml]    print the Prometheus alert and recording rules
  cdcwatch mixin generate                     write alerts/, alertmanager/ and dashboards/ (in a checkout also the
                                              Helm chart's files/ and the references in docs/)
  cdcwatch dashboards preview                 render the dashboards' panels from a Prometheus

Two YAML files: the exporter's configuration (--config.file: serve, check) and the mixin config
(--mixin.file: alerts, mixin generate, dashboards preview); see the documentation (docs/).
The reference Spark apply job and the reconciliation as a Spark job are commands of their own, cdcwatch-apply and
cdcwatch-reconcile (the spark extra).
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cdcwatch", description=_DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"cdcwatch {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = commands.add_parser("serve", help="serve /metrics for Prometheus")
    serve.add_argument("--config.file", "--config", "-c", dest="config", required=True, help="YAML configuration file")
    serve.add_argument("--web.listen-address", dest="web_listen_address", metavar="[HOST]:PORT",
                       help="override listen.address and listen.port from the config")
    serve.add_argument("--listen-address", help=argparse.SUPPRESS)  # older spelling: the host only
    serve.add_argument("--port", type=int, help=argparse.SUPPRESS)  # older spelling: the port only
    serve.add_argument("--log.level", dest="log_level", choices=["debug", "info", "warning", "error"],
                       help="override log_level from the config")
    serve.add_argument("--web.config.file", dest="web_config_file",
                       help="TLS and basic auth for /metrics (exporter-toolkit web config format)")
    serve.add_argument("--config-watch-interval", type=float, default=WATCH_INTERVAL_SECONDS, metavar="SECONDS",
                       help=f"check the config file for changes this often (default {WATCH_INTERVAL_SECONDS:g}); "
                       "0: reload on SIGHUP only")

    check = commands.add_parser("check", help="scrape every target once; exit 0 all up, 1 any down, 2 bad config")
    check.add_argument("--config.file", "--config", "-c", dest="config", required=True, help="YAML configuration file")
    check.add_argument("--log.level", dest="log_level", choices=["debug", "info", "warning", "error"],
                       help="override log_level from the config")

    docs = commands.add_parser("docs", help="print a generated reference (Markdown)")
    docs.add_argument("what", choices=["metrics", "config", "mixin"])

    alerts = commands.add_parser("alerts", help="print the alert and recording rules (YAML)")
    _mixin_file(alerts)

    boards = commands.add_parser("dashboards", help="preview the Grafana dashboards (`mixin generate` writes them)")
    board_commands = boards.add_subparsers(dest="action", required=True, metavar="ACTION")
    preview = board_commands.add_parser("preview", help="render every panel from a Prometheus server into PNGs + one HTML page")
    preview.add_argument("--prometheus", required=True, help="Prometheus base URL, e.g. http://127.0.0.1:9090")
    _mixin_file(preview)
    preview.add_argument("--out", default="dashboard-preview", help="directory for the PNGs and index.html")
    preview.add_argument("--range", default="1h", help="time range to plot, e.g. 30m, 1h, 6h")

    mixin = commands.add_parser("mixin", help="write the generated files: rules, their tests, inhibitions, dashboards; in "
                                "a checkout the Helm chart's rules and dashboards and the references in docs/")
    mixin.add_argument("action", choices=["generate"])
    _mixin_file(mixin)
    mixin.add_argument("--out", default=".", help="root to write alerts/, alertmanager/ and dashboards/ under; the chart's "
                       "files where it holds charts/cdcwatch/ and the references where it has docs/ pages")

    return parser


def _load(path: str, log_level: str | None = None) -> Config:
    config = load_config(path)
    logging.getLogger().setLevel((log_level or config.log_level).upper())
    for warning in literal_secret_warnings(path):
        logging.getLogger("cdcwatch").warning("%s", warning)
    return config


def listen_override(value: str) -> tuple[str | None, int]:
    """`--web.listen-address` as the Prometheus exporters take it: `HOST:PORT`, `:PORT` or `[IPv6]:PORT`."""
    host, colon, port = value.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError("the command line", [f"--web.listen-address: expected [HOST]:PORT, got {value!r}"])
    return host.strip("[]") or None, int(port)


def _serve(args: argparse.Namespace) -> int:
    if args.config_watch_interval < 0:
        print("cdcwatch: --config-watch-interval must be 0 (off) or a positive number of seconds", file=sys.stderr)
        return EXIT_CONFIG
    config = _load(args.config, args.log_level)
    address, port = args.listen_address or config.listen.address, args.port or config.listen.port
    if args.web_listen_address:
        host, port = listen_override(args.web_listen_address)
        address = host or "0.0.0.0"
    serve(args.config, config, address, port, args.web_config_file or config.listen.web_config_file,
          args.config_watch_interval)
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    config = _load(args.config, args.log_level)
    if config.listen.web_config_file:  # what `serve` would refuse, `check` refuses too
        load_web_config(config.listen.web_config_file)
    exporter = Exporter.from_config(config)
    try:
        results = exporter.scrape()
    finally:
        exporter.close()
    print(render_table(results))
    return EXIT_OK if all(r.up for r in results) else EXIT_DOWN


def _docs(args: argparse.Namespace) -> int:
    if args.what == "mixin":
        from cdcwatch.mixin.config_page import mixin_config_page

        print(mixin_config_page(), end="")
    else:
        print(reference.metrics_page() if args.what == "metrics" else reference.config_page(), end="")
    return EXIT_OK


def _mixin_file(command: argparse.ArgumentParser) -> None:
    command.add_argument("--mixin.file", dest="mixin_file", help="mixin config: selectors, thresholds, for durations (YAML)")
    command.add_argument("--config.file", "--config", "-c", dest="config", help=argparse.SUPPRESS)  # refused: not this file
    command.add_argument("--stages-from", metavar="CONFIG_FILE", help=(
        "the exporter's configuration: each stage on when it collects it, as the Helm chart's `auto` (a stage the "
        "mixin file sets keeps its value), so nothing pages about a part you do not run"))
    command.add_argument("--spark", action="store_true", help=(
        "with --stages-from: Prometheus scrapes the Spark listener too (the apply job's driver), so its stage is on"))


class _Placeholders(dict[str, str]):
    """Every environment variable, as a placeholder: deriving the stages reads which sections are configured, never a
    secret, so a password variable that is unset where the rules are generated is no error."""

    def __missing__(self, name: str) -> str:
        return "1"

    def __contains__(self, name: object) -> bool:
        return True


def _mixin_config(args: argparse.Namespace) -> MixinConfig:
    """The mixin commands' config; the mixin (and the Grafana SDK the dashboards are built with) is imported only by
    them, so that `serve` does not carry it."""
    from cdcwatch.mixin import load_mixin_config

    if args.config is not None:
        raise ConfigError("the command line", [f"--config.file is the exporter's configuration (serve, check); the mixin "
                                               f"config goes in --mixin.file: --mixin.file {args.config}, or derive "
                                               f"the stages from it: --stages-from {args.config}"])
    if args.spark and args.stages_from is None:
        raise ConfigError("the command line", ["--spark says the Spark listener's stage is on for --stages-from: give "
                                               "--stages-from with it (without, every stage is on unless the mixin file "
                                               "turns it off)"])
    config = load_mixin_config(args.mixin_file)
    if args.stages_from is not None:
        from cdcwatch.mixin.stages import configured_stages

        collected = configured_stages(load_config(args.stages_from, _Placeholders()), args.spark)
        stages = config.stages
        chosen = {name: getattr(stages, name) if name in stages.model_fields_set else name in collected
                  for name in type(stages).model_fields}
        config = config.model_copy(update={"stages": type(stages)(**chosen)})
        logging.getLogger("cdcwatch").info("stages from %s: %s", args.stages_from,
                                           ", ".join(n for n, on in chosen.items() if on) or "none")
    if not config.runbook_base_url.startswith(("http://", "https://")):
        logging.getLogger("cdcwatch").warning(
            "runbook links are relative (%s): a notification's link opens nothing; set runbook_base_url in the mixin "
            "file to the address your on-call reads the runbook at", config.runbook_base_url)
    return config


def _alerts(args: argparse.Namespace) -> int:
    from cdcwatch.mixin.generate import rules_yaml

    print(rules_yaml(_mixin_config(args)), end="")
    return EXIT_OK


def _dashboards(args: argparse.Namespace) -> int:
    config = _mixin_config(args)  # a bad file is said first, with or without the preview extra
    from cdcwatch.mixin.preview import render_preview

    print(render_preview(args.prometheus, config, Path(args.out), args.range))
    return EXIT_OK


def _mixin(args: argparse.Namespace) -> int:
    from cdcwatch.mixin import write_files

    for path in write_files(_mixin_config(args), Path(args.out)):
        print(path)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command and return its exit code (callable in-process, e.g. by tests)."""
    return _run(argv)


def console_main() -> None:
    """The `cdcwatch` command: exits at once after the command if a JVM was started (its threads would hold the exit)."""
    code = main()
    if "jpype" in sys.modules and sys.modules["jpype"].isJVMStarted():
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(code)
    sys.exit(code)


def _run(argv: Sequence[str] | None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if (sys.argv[1:] if argv is None else list(argv))[:1] == ["apply"]:  # the apply job has its own command
        print("cdcwatch: the reference Spark apply job is its own command now: cdcwatch-apply (or python -m "
              "spark_listeners.apply), with the same flags; it needs the spark extra", file=sys.stderr)
        return EXIT_CONFIG
    args = _parser().parse_args(argv)
    handlers = {"serve": _serve, "check": _check, "docs": _docs, "alerts": _alerts,
                "dashboards": _dashboards, "mixin": _mixin}
    if args.command is None:
        _parser().print_help()
        return EXIT_CONFIG
    try:
        return handlers[args.command](args)
    except (ConfigError, ListenError) as exc:
        print(f"cdcwatch: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except ModuleNotFoundError as missing:
        extra = _EXTRAS.get((missing.name or "").split(".")[0])
        if extra is None:
            raise
        print(f"cdcwatch {args.command} needs {missing.name}, which comes with the {extra} extra: "
              f"pip install 'cdcwatch[{extra}]'", file=sys.stderr)
        return EXIT_CONFIG


_EXTRAS = {"grafana_foundation_sdk": "dashboards", "matplotlib": "preview"}
"""A library a command imports when it runs, not installed with cdcwatch itself → the extra that brings it."""


if __name__ == "__main__":
    console_main()
