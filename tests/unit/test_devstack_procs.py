"""devstack/procs.py: a benchmark stopped by `kill` runs its `finally` blocks, so the servers it started stop too."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from devstack.procs import REPO

PROGRAM = textwrap.dedent("""
    import sys, time
    from devstack.procs import exit_on_sigterm
    exit_on_sigterm()
    try:
        print("started", flush=True)
        time.sleep(60)
    finally:
        open(sys.argv[1], "w").write("stopped")
""")


def test_sigterm_ends_the_process_through_its_finally_blocks(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    process = subprocess.Popen([sys.executable, "-c", PROGRAM, str(marker)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "started\n"
        process.send_signal(signal.SIGTERM)
        # no bound on how fast it ends (a niced process on a busy machine gets little CPU): without the handler it
        # dies at once (-SIGTERM) or sleeps its 60 s out (0), and either status fails this
        assert process.wait(300) == 128 + signal.SIGTERM  # the shell's status of a process ended by SIGTERM
    finally:
        process.kill()
    assert marker.read_text() == "stopped"
