"""A full reconcile pass over a table of --rows rows (default 1 million): how long it takes and what it costs the
source, at a given row budget per side.

Two PostgreSQL servers of the devstack (source and target, each its own postmaster, so the source's load is its
own): `items (id bigint PRIMARY KEY, name text, qty int, price numeric(12, 2), seen timestamptz)` filled with --rows
rows on the source and copied to the target, where --drift rows are then deleted, changed or added. One pass of the
collector's comparison (`cdcwatch.reconcile.compare.Reconciler`, the same code `cdcwatch serve` runs on its thread)
at --budget rows/s per side. Measured:

- the pass's wall time, and the rows read per second on the source by PostgreSQL's own statistics
  (`pg_stat_user_indexes.idx_tup_read` of the table, before and after; `seq_scan` must not move);
- the CPU time of the source's backend serving the comparison (`/proc/<pid>/stat`, utime + stime), as a share of
  one core over the pass;
- that the differing rows were all found (as suspects: one pass does not confirm them).

The table is written to docs/bench/reconcile.md with the date, the machine and the versions. Starts servers: run it
under the server lock.

    flock /tmp/cdcwatch-servers.lock .venv/bin/python bench/reconcile.py [--rows 1000000] [--budget 100000]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cdcwatch import __version__  # noqa: E402
from cdcwatch.config import ReconcileConfig  # noqa: E402
from cdcwatch.reconcile.compare import Reconciler  # noqa: E402
from cdcwatch.tables import make_side  # noqa: E402
from devstack.postgres import PostgresServer  # noqa: E402
from devstack.procs import exit_on_sigterm, free_port  # noqa: E402

PAGE = ROOT / "docs" / "bench" / "reconcile.md"
TABLE = ("CREATE TABLE items (id bigint PRIMARY KEY, name text, qty int, price numeric(12, 2), seen timestamptz);"
         "INSERT INTO items SELECT g, 'item ' || g, g % 100, g * 0.25, timestamptz '2026-01-01' + g * interval '1 s' "
         "FROM generate_series(1, {rows}) g")


def _sleep(seconds: float) -> bool:
    """The budget's wait: never interrupted here."""
    time.sleep(seconds)
    return False


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stats(server: PostgresServer) -> tuple[int, int]:
    row = server.sql("SELECT pg_stat_clear_snapshot(); SELECT coalesce(sum(i.idx_tup_read), 0), max(t.seq_scan) "
                     "FROM pg_stat_user_indexes i JOIN pg_stat_user_tables t USING (relid) WHERE t.relname = 'items'")
    reads, scans = row.splitlines()[-1].split("|")
    return int(reads), int(scans)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--budget", type=float, default=100_000, help="rows per second per side")
    parser.add_argument("--chunk", type=int, default=1000)
    parser.add_argument("--drift", type=int, default=30, help="rows made to differ in the target (a third of each kind)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cdcwatch-bench-reconcile-") as state:
        Path(state).chmod(0o755)
        source, target = PostgresServer(Path(state) / "source", free_port()), PostgresServer(Path(state) / "target", free_port())
        try:
            for server in (source, target):
                server.start()
                server.sql(TABLE.format(rows=args.rows))
                server.sql("VACUUM ANALYZE items")
            third = max(args.drift // 3, 1)
            step = args.rows // (3 * third + 1)
            keys = [step * (i + 1) for i in range(3 * third)]
            target.sql(f"DELETE FROM items WHERE id IN ({', '.join(map(str, keys[:third]))});"
                       f"UPDATE items SET qty = -1 WHERE id IN ({', '.join(map(str, keys[third:2 * third]))});"
                       f"INSERT INTO items SELECT g, 'extra', 0, 0, now() FROM generate_series({args.rows + 1}, "
                       f"{args.rows + third}) g")
            side = {"engine": "postgres", "user": "postgres", "table": "public.items", "rows_per_second": args.budget}
            config = ReconcileConfig.model_validate({
                "name": "bench", "source": {**side, "port": source.port}, "target": {**side, "port": target.port},
                "chunk_rows": args.chunk, "settle_seconds": 3600})
            sides = make_side("source", config.source, config.source), make_side("target", config.target, config.source)
            reconciler = Reconciler(config, *sides, wait=_sleep)
            reconciler.prepare()
            backend = int(sides[0]._connect().execute("SELECT pg_backend_pid()").fetchone()[0])  # type: ignore[attr-defined]
            reads_before, scans_before = _stats(source)
            cpu_before, started = _cpu_seconds(backend), time.monotonic()
            reconciler.run_pass()
            seconds, cpu = time.monotonic() - started, _cpu_seconds(backend) - cpu_before
            time.sleep(2)  # the backend's statistics are flushed once it is idle for a second
            reads, scans = (now - then for now, then in zip(_stats(source), (reads_before, scans_before), strict=True))
            found = {kind: sum(s.kind == kind for s in reconciler.suspects.values())
                     for kind in ("missing", "extra", "different")}
            for s in sides:
                s.close()
        finally:
            source.stop()
            target.stop()
    version = "?"
    try:
        import psycopg

        version = psycopg.__version__
    except ImportError:
        pass
    cpu_model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), platform.machine())
    rows = [("rows in the table", f"{args.rows:,}"), ("budget per side", f"{args.budget:,.0f} rows/s"),
            ("chunk", f"{args.chunk} keys"), ("pass duration", f"{seconds:.1f} s"),
            ("rows read on the source (idx_tup_read)", f"{reads:,}"),
            ("rows read per second on the source", f"{reads / seconds:,.0f}"),
            ("sequential scans of the source table", str(scans)),
            ("CPU of the source backend", f"{cpu:.1f} s ({cpu / seconds:.0%} of one core)"),
            ("differing rows found (missing / extra / different)",
             f"{found['missing']} / {found['extra']} / {found['different']} of {third} each"),
            ("chunks compared", str(reconciler.chunks_checked))]
    table = "\n".join(["| measure | value |", "|---|---|", *(f"| {name} | {value} |" for name, value in rows)])
    print(table)
    PAGE.write_text(
        "# Benchmark: a reconcile pass over a million rows\n\n"
        "`bench/reconcile.py`: one full pass of the reconcile collector's comparison (PostgreSQL source, PostgreSQL "
        "target, each its own server on the same machine) over a table of "
        f"{args.rows:,} rows, {3 * third} of them made to differ in the target. Rows read come from PostgreSQL's "
        "own statistics; CPU from the source backend's /proc/<pid>/stat.\n\n"
        f"Run {time.strftime('%Y-%m-%d', time.gmtime())} on {cpu_model}, {os.cpu_count()} cores; "
        f"PostgreSQL {source_server_version(ROOT)}, Python {platform.python_version()}, psycopg {version}, "
        f"cdcwatch {__version__}.\n\n{table}\n\n"
        "A pass reads each key about three times on each side (the walk of the source's keys, the checksum of each "
        "chunk on both sides, then the same for the target's keys), so at the default budget of 1000 rows/s a pass "
        f"over {args.rows:,} rows takes about {3 * args.rows / 1000 / 60:.0f} minutes; the time above, at "
        f"{args.budget:,.0f} rows/s, shows what the pass costs when the budget does not hold it back.\n",
        encoding="utf-8")
    return 0 if all(found[k] == third for k in found) and scans == 0 else 1


def source_server_version(root: Path) -> str:
    """The devstack PostgreSQL's version (its pg_config)."""
    import subprocess

    from devstack.postgres import _bin_dir

    done = subprocess.run([str(_bin_dir() / "postgres"), "--version"], capture_output=True, text=True)
    words = done.stdout.split()  # postgres (PostgreSQL) 15.18 (Debian ...)
    return words[2] if done.returncode == 0 and len(words) > 2 else "?"


if __name__ == "__main__":
    exit_on_sigterm()  # stopped by kill: the servers it started stop too
    sys.exit(main())
