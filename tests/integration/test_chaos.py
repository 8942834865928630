"""The short form of bench/chaos.py on the demo pipeline: the Kafka Connect worker killed between two
offset flushes (changes re-delivered), the Spark driver killed, and the broker (in a
network namespace of its own, every client reaching it through a veth link) cut off the network for 20 s,
each under steady traffic. After each: the expected alert fired and resolved, the target equals the source
row for row, every scrape of cdcwatch was answered within its deadline (a cut broker must not hang one),
and the duplicates the listener counted equal the re-deliveries counted from the topic itself (or are at
least as many where a restarted driver re-ran a batch).
The long form (every component crashed and paused) is `bench/chaos.py`; its table is in docs/benchmarks.md."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from devstack.procs import python_env

pytestmark = pytest.mark.integration

CHAOS = Path(__file__).resolve().parents[2] / "bench" / "chaos.py"


def test_short_chaos_run_loses_nothing() -> None:
    done = subprocess.run([sys.executable, str(CHAOS), "--faults", "short", "--cut-seconds", "20"],
                          capture_output=True, text=True,
                          timeout=1200, env=python_env())
    print(done.stdout[-4000:])
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    table = done.stdout.split("\nfault ", 1)[1]
    assert "PASS" in table and " NO " not in table
    cut = next(line for line in table.splitlines() if line.startswith("broker network cut"))
    assert "CdcwatchTargetDown" in cut, cut
    during = re.search(r" (\d+) \((\d+\.\d)s\)", cut)
    assert during and int(during.group(1)) >= 3, f"cdcwatch was hardly scraped while the broker was cut off: {cut}"
    re_delivered = int(table.split("duplicates: ")[1].split()[0])
    assert re_delivered > 0, "the worker was killed with nothing to re-deliver: the duplicate check proved nothing"
