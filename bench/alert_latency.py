"""Time from fault injection to the webhook notification, per demo scenario, next to the floor
Prometheus sets (scrape interval + evaluation interval + the alert's `for`). Target: within floor + 5 s.

Starts `scripts/demo` (headless) in a temporary directory, runs every scenario against it in turn
(`scripts/demo --scenario NAME --report FILE`), prints one row per scenario, stops the demo.
The lag-spike row includes the time the burst takes to build real lag, so it sits above the floor by design.

    .venv/bin/python bench/alert_latency.py [--scenario NAME ...]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devstack.procs import exit_on_sigterm  # noqa: E402
from devstack.scenarios import SCENARIOS  # noqa: E402

DEMO = str(Path(__file__).resolve().parents[1] / "scripts" / "demo")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", action="append", choices=[name for name, scenario in SCENARIOS.items() if scenario.check is None],
                        help="default: every scenario with an alert")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cdcwatch-alert-bench-"))
    work.chmod(0o755)
    log = work / "demo.out"
    demo = subprocess.Popen([DEMO, "--headless"], cwd=work, stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    try:
        while "ready:" not in log.read_text():
            if demo.poll() is not None:
                sys.exit(f"the demo exited:\n{log.read_text()[-2000:]}")
            time.sleep(2)
        rows: list[tuple[str, str | None, dict[str, Any] | None]] = []
        for name in args.scenario or [name for name, scenario in SCENARIOS.items() if scenario.check is None]:
            report_file = work / f"{name}.json"
            done = subprocess.run([DEMO, "--scenario", name, "--report", str(report_file)], cwd=work,
                                  capture_output=True, text=True)
            if done.returncode != 0:
                print(done.stdout + done.stderr)
                rows.append((name, SCENARIOS[name].alert, None))
                continue
            rows.append((name, SCENARIOS[name].alert, json.loads(report_file.read_text())))
        print(f"\n{'scenario':<16} {'alert':<24} {'floor s':>8} {'notified s':>11} {'diff s':>7} {'resolved s':>11}")
        for name, alert, report in rows:
            if report is None:
                print(f"{name:<16} {alert or 'no page':<24} {'failed':>8}")
                continue
            if alert is None:  # ridden out without a page: how long until the pipeline flowed again
                print(f"{name:<16} {'no page':<24} {'':>8} {'':>11} {'':>7} {report['flowing_after']:>11.1f} (flowing)")
                continue
            diff = report["fired_after"] - report["floor_seconds"]
            print(f"{name:<16} {alert:<24} {report['floor_seconds']:>8.1f} {report['fired_after']:>11.1f} "
                  f"{diff:>+7.1f} {report['resolved_after']:>11.1f}")
    finally:
        demo.send_signal(signal.SIGINT)
        demo.wait(180)


if __name__ == "__main__":
    exit_on_sigterm()  # stopped by kill: the servers it started stop too
    main()
