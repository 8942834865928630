"""The `cdcwatch` command: the flags are parsed here, the work is done by the modules it calls (`serve`: server.py)."""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict

from cdcwatch import __version__, reference
from cdcwatch.check import render_table
from cdcwatch.config import (
    DEFAULT_PORT,
    WATCH_INTERVAL_SECONDS,
    Config,
    ConfigError,
    load_config,
)
from cdcwatch.exporter import Exporter
from cdcwatch.mixin import MixinConfig, load_mixin_config, write_files
from cdcwatch.mixin.generate import rules_yaml
from cdcwatch.mixin.preview import render_preview
from cdcwatch.server import ListenError, serve
from cdcwatch.spark import DEFAULT_METRICS_ADDRESS, DEFAULT_METRICS_PORT
from cdcwatch.spark.apply import ApplySettings, KafkaSourceMissing, run_apply
from cdcwatch.web import load_web_config

__all__ = ["main"]

EXIT_OK, EXIT_DOWN, EXIT_CONFIG = 0, 1, 2

_DESCRIPTION = f"""\
cdcwatch watches change-data-capture pipelines (Debezium → Kafka → Spark) and exports what
it sees as Prometheus metrics.

  cdcwatch serve --config cdcwatch.yml   serve /metrics (default http://127.0.0.1:{DEFAULT_PORT}/metrics)
  cdcwatch check --config cdcwatch.yml   scrape every target once and print a table
  cdcwatch docs metrics|config           print the metrics or configuration reference
  cdcwatch apply --bootstrap-servers B --subscribe-pattern P --target DSN --checkpoint DIR
                                         the reference Spark apply job, listener attached
  cdcwatch alerts [--config mixin.yml]   print the Prometheus alert and recording rules
  cdcwatch mixin generate                write alerts/, alertmanager/, dashboards/, the Helm chart's files/
                                         and the references in docs/ (what the repository commits)
  cdcwatch dashboards preview            render the dashboards' panels from a Prometheus

The config file is YAML; see the configuration reference in the documentation (docs/).
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
    docs.add_argument("what", choices=["metrics", "config"])

    apply = commands.add_parser("apply", help="run the reference Spark CDC apply job (Kafka → PostgreSQL)")
    apply.add_argument("--bootstrap-servers", required=True, help="Kafka bootstrap servers")
    apply.add_argument("--subscribe-pattern", required=True,
                       help=r"regex of the topics to read, e.g. 'inventory\..*|__debezium-heartbeat\.inventory'")
    apply.add_argument("--target", required=True, help="PostgreSQL connection string of the target")
    apply.add_argument("--target-schema", default="cdcwatch_apply", help="schema of the target tables")
    apply.add_argument("--checkpoint", required=True, help="Spark checkpoint directory (offsets live here)")
    apply.add_argument("--master", default="local[*]", help="Spark master URL")
    apply.add_argument("--query-name", default="cdc_apply", help="the `query` label")
    apply.add_argument("--trigger-seconds", type=float, default=1.0, help="micro-batch interval")
    apply.add_argument("--metrics-address", default=DEFAULT_METRICS_ADDRESS,
                       help=f"address the listener's /metrics binds to (default {DEFAULT_METRICS_ADDRESS}: every "
                       "interface; 127.0.0.1 or the driver's own address restricts it)")
    apply.add_argument("--metrics-port", type=int, default=DEFAULT_METRICS_PORT,
                       help=f"port of the listener's /metrics (default {DEFAULT_METRICS_PORT}; 0: none)")
    apply.add_argument("--pushgateway", help="also push the metrics to this Pushgateway after every batch")
    apply.add_argument("--jars", default="", help="comma-separated jars for Spark (spark-sql-kafka-0-10 and its "
                       "dependencies), when Spark's classpath lacks them")
    apply.add_argument("--commit-group", help="also commit finished offsets under this Kafka consumer group, so lag "
                       "monitors (cdcwatch's kafka collector, kafka-consumer-groups) see the job")
    apply.add_argument("--max-offsets-per-trigger", type=int, help="cap on records per micro-batch")
    apply.add_argument("--no-fail-on-data-loss", dest="fail_on_data_loss", action="store_false",
                       help="skip offsets gone from the broker and count them instead of failing")
    apply.add_argument("--kafka-option", action="append", default=[], metavar="KEY=VALUE",
                       help="a librdkafka / Kafka client setting (repeatable)")
    apply.add_argument("--linger-after-failure", type=float, default=0.0, metavar="SECONDS",
                       help="keep /metrics up this long after the query failed")

    alerts = commands.add_parser("alerts", help="print the alert and recording rules (YAML)")
    alerts.add_argument("--config", help="mixin config: selectors, thresholds, for durations (YAML)")

    boards = commands.add_parser("dashboards", help="preview the Grafana dashboards (`mixin generate` writes them)")
    board_commands = boards.add_subparsers(dest="action", required=True, metavar="ACTION")
    preview = board_commands.add_parser("preview", help="render every panel from a Prometheus server into PNGs + one HTML page")
    preview.add_argument("--prometheus", required=True, help="Prometheus base URL, e.g. http://127.0.0.1:9090")
    preview.add_argument("--config", help="mixin config (YAML)")
    preview.add_argument("--out", default="dashboard-preview", help="directory for the PNGs and index.html")
    preview.add_argument("--range", default="1h", help="time range to plot, e.g. 30m, 1h, 6h")

    mixin = commands.add_parser("mixin", help="write every generated file: rules, their tests, inhibitions, dashboards, "
                                "the Helm chart's rules and dashboards, the references in docs/")
    mixin.add_argument("action", choices=["generate"])
    mixin.add_argument("--config", help="mixin config (YAML)")
    mixin.add_argument("--out", default=".", help="root to write alerts/, alertmanager/, dashboards/ and charts/cdcwatch/files/ "
                       "under; the references in its docs/ pages are rewritten where they have them")

    return parser


def _load(path: str, log_level: str | None = None) -> Config:
    config = load_config(path)
    logging.getLogger().setLevel((log_level or config.log_level).upper())
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
    print(reference.metrics_page() if args.what == "metrics" else reference.config_page(), end="")
    return EXIT_OK


def _apply(args: argparse.Namespace) -> int:
    try:
        re.compile(args.subscribe_pattern)
    except re.error as exc:
        print(f"cdcwatch: --subscribe-pattern is not a regular expression: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        conninfo_to_dict(args.target)
    except Exception as exc:  # psycopg.ProgrammingError: the libpq parser's message
        print(f"cdcwatch: --target is not a PostgreSQL connection string: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_CONFIG
    options = {}
    for option in args.kafka_option:
        name, equals, value = option.partition("=")
        if not equals or not name:
            print(f"cdcwatch: --kafka-option {option!r}: expected KEY=VALUE", file=sys.stderr)
            return EXIT_CONFIG
        options[name] = value
    jars = tuple(j for j in args.jars.split(",") if j)
    missing = [jar for jar in jars if not Path(jar).is_file()]
    if missing:
        print(f"cdcwatch: --jars: no such file: {', '.join(missing)}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        return _run_apply(args, options, jars)
    except KafkaSourceMissing as exc:
        print(f"cdcwatch: {exc}", file=sys.stderr)
        return EXIT_CONFIG


def _run_apply(args: argparse.Namespace, options: dict[str, str], jars: tuple[str, ...]) -> int:
    return run_apply(ApplySettings(
        bootstrap_servers=args.bootstrap_servers, subscribe_pattern=args.subscribe_pattern, target_dsn=args.target,
        checkpoint=args.checkpoint, master=args.master, query_name=args.query_name, target_schema=args.target_schema,
        trigger_seconds=args.trigger_seconds, metrics_address=args.metrics_address,
        metrics_port=args.metrics_port or None, pushgateway=args.pushgateway, fail_on_data_loss=args.fail_on_data_loss,
        max_offsets_per_trigger=args.max_offsets_per_trigger, jars=jars,
        commit_group=args.commit_group, kafka_options=options,
        linger_after_failure_seconds=args.linger_after_failure))


def _mixin_config(path: str | None) -> MixinConfig:
    return load_mixin_config(path)


def _alerts(args: argparse.Namespace) -> int:
    print(rules_yaml(_mixin_config(args.config)), end="")
    return EXIT_OK


def _dashboards(args: argparse.Namespace) -> int:
    print(render_preview(args.prometheus, _mixin_config(args.config), Path(args.out), args.range))
    return EXIT_OK


def _mixin(args: argparse.Namespace) -> int:
    for path in write_files(_mixin_config(args.config), Path(args.out)):
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
    args = _parser().parse_args(argv)
    handlers = {"serve": _serve, "check": _check, "docs": _docs, "apply": _apply, "alerts": _alerts,
                "dashboards": _dashboards, "mixin": _mixin}
    if args.command is None:
        _parser().print_help()
        return EXIT_CONFIG
    try:
        return handlers[args.command](args)
    except (ConfigError, ListenError) as exc:
        print(f"cdcwatch: {exc}", file=sys.stderr)
        return EXIT_CONFIG


if __name__ == "__main__":
    console_main()
