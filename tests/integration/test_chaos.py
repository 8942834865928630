"""The short form of bench/chaos.py on the demo pipeline: the Kafka Connect worker killed between two
offset flushes (changes re-delivered), the Spark driver killed and cdcwatch killed, each under steady
traffic. After each: the expected alert fired and resolved, the target equals the source row for row,
every scrape of cdcwatch was answered within its deadline, and the duplicates the listener counted are
at least the re-deliveries counted from the topic itself (a batch the killed driver re-runs counts again).
The long form (every component crashed and paused) is `bench/chaos.py`; its table is in the README."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from devstack.procs import python_env

pytestmark = pytest.mark.integration

CHAOS = Path(__file__).resolve().parents[2] / "bench" / "chaos.py"


def test_short_chaos_run_loses_nothing() -> None:
    done = subprocess.run([sys.executable, str(CHAOS), "--faults", "short"], capture_output=True, text=True,
                          timeout=1200, env=python_env())
    print(done.stdout[-4000:])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    table = done.stdout.split("\nfault ", 1)[1]
    assert "PASS" in table and " NO\n" not in table
    re_delivered = int(table.split("duplicates: ")[1].split()[0])
    assert re_delivered > 0, "the worker was killed with nothing to re-deliver: the duplicate check proved nothing"
