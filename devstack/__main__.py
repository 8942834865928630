"""`python -m devstack demo`: the local stack's commands (scripts/demo runs this).

  demo                      start the whole monitored CDC pipeline on 127.0.0.1 until Ctrl-C
  demo --sink jdbc          the same without Spark: the Debezium JDBC sink connector applies the changes
  demo --scenario NAME      inject a fault into the running demo and report the alerts it raised
  demo --list-scenarios     what can be broken
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from cdcwatch.config import DEFAULT_PORT
from devstack.demo_settings import SINKS

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scripts/demo", description="the whole monitored CDC pipeline, locally; break it with --scenario",
        epilog="shapes: `scripts/demo` applies the changes with the Spark apply job (listener attached); `scripts/demo "
               "--sink jdbc` runs PostgreSQL → Debezium → Kafka → the Debezium JDBC sink connector → PostgreSQL without "
               "Spark, the target's freshness from a canary. Each scenario belongs to one shape: --list-scenarios says "
               "which (e.g. sink-failed, sink-paused, dead-letter, schema-drift need --sink jdbc).")
    parser.add_argument("command", nargs="?", default="demo", choices=["demo"], help=argparse.SUPPRESS)
    parser.add_argument("--state-dir", default=".cdcwatch/demo", help="where the demo keeps its data and logs")
    parser.add_argument("--port", "--web.listen-port", type=int, default=DEFAULT_PORT, help="port of cdcwatch's /metrics")
    parser.add_argument("--rows", type=int, default=20000, help="rows in the demo table before the snapshot")
    parser.add_argument("--sink", choices=SINKS, default="spark", help="what applies the changes to the target: the "
                        "Spark apply job (default) or the Debezium JDBC sink connector (no Spark)")
    parser.add_argument("--headless", action="store_true", help="a status line every 30 s instead of the live screen "
                        "(the default when stdout is not a terminal)")
    parser.add_argument("--scenario", help="inject this fault into the running demo (same --state-dir) and report "
                        "which alerts fired and resolved")
    parser.add_argument("--report", help="with --scenario: also write the report as JSON to this file")
    parser.add_argument("--list-scenarios", action="store_true", help="list the scenarios")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from devstack.scenarios import SCENARIOS

    args = _parser().parse_args(argv)
    if args.list_scenarios:
        for scenario in SCENARIOS.values():
            print(f"{scenario.name:<16} [--sink {'|'.join(scenario.sinks)}] {scenario.description} → "
                  f"{scenario.alert or 'no page: checked'}")
        return EXIT_OK
    if args.scenario:
        from devstack.scenarios import run_scenario

        if args.scenario not in SCENARIOS:
            print(f"demo: unknown scenario {args.scenario!r}; one of {', '.join(SCENARIOS)}", file=sys.stderr)
            return EXIT_USAGE
        try:
            report = run_scenario(args.state_dir, args.scenario)
        except Exception as exc:  # the demo is not running, or the alert never came
            print(f"demo --scenario {args.scenario}: {exc}", file=sys.stderr)
            return EXIT_FAILED
        if args.report:
            Path(args.report).write_text(json.dumps(dataclasses.asdict(report), indent=2), encoding="utf-8")
        return EXIT_OK if report.ok else EXIT_FAILED
    from devstack.demo import run_demo

    return run_demo(args.state_dir, args.port, args.rows, True if args.headless else None, sink=args.sink)


if __name__ == "__main__":
    sys.exit(main())
