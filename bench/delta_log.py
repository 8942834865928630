"""Cost of reading a Delta table's figures from its log: cdcwatch's reader (cdcwatch/delta/log.py) next to
deltalake's DeltaTable (load, then update_incremental + get_add_actions + history per read) for the same figures.

The table: --commits commits (default 10,000) written as log files directly (writing them with deltalake takes
minutes; the log is the same: commitInfo as delta-rs writes it, one add with stats per commit, every other commit
a MERGE that also removes the oldest file, an OPTIMIZE every 1,000), so about --commits / 2 live files, and a
checkpoint every --checkpoint-interval commits written by deltalake's create_checkpoint. --tables copies of its log
(hard links) are read side by side.

Each reader runs in a fresh process (its RSS its own): the first read of one table; the p50/p95 of a read after one
new commit (each round writes the commit, then times the read) and of a read with nothing new; the RSS growth per
table (VmRSS after reading every table, minus before, over the tables); the p50 of reading all tables in threads
after one new commit each. Budgets: a read after one commit p50 < 20 ms, < 20 MiB RSS per table, all ten tables
< 100 ms. Local disk, warm page cache: on an object store, each file read is a request instead.

    .venv/bin/python bench/delta_log.py [--commits 10000] [--checkpoint-interval 100] [--tables 10] [--rounds 100]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

START = datetime(2024, 1, 1, tzinfo=UTC)
SCHEMA = {"type": "struct", "fields": [{"name": name, "type": kind, "nullable": True, "metadata": {}}
                                       for name, kind in (("id", "long"), ("ts", "timestamp"), ("v", "string"))]}
MiB = 1024 * 1024


def rss() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


def add_action(version: int, rng: random.Random) -> dict[str, Any]:
    moment = START + timedelta(seconds=version)
    stamp = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    records = rng.randint(1, 5000)
    stats = {"numRecords": records, "minValues": {"id": version * 10_000, "ts": stamp, "v": "a"},
             "maxValues": {"id": version * 10_000 + records, "ts": stamp, "v": "z"},
             "nullCount": {"id": 0, "ts": 0, "v": 0}}
    size = rng.choice((rng.randint(1024, 8 * MiB), rng.randint(32 * MiB, 256 * MiB)))
    return {"add": {"path": f"part-00000-{uuid.UUID(int=rng.getrandbits(128))}-c000.snappy.parquet",
                    "partitionValues": {}, "size": size, "modificationTime": int(moment.timestamp() * 1000),
                    "dataChange": True, "stats": json.dumps(stats, separators=(",", ":"))}}


def commit_info(operation: str, version: int, metrics: dict[str, int]) -> dict[str, Any]:
    return {"commitInfo": {"timestamp": int((START + timedelta(seconds=version)).timestamp() * 1000),
                           "operation": operation, "operationParameters": {}, "engineInfo": "delta-rs:py-1.6.6",
                           "operationMetrics": metrics, "clientVersion": "delta-rs.py-1.6.6"}}


def remove_action(add: dict[str, Any]) -> dict[str, Any]:
    return {"remove": {"path": add["add"]["path"], "dataChange": True, "deletionTimestamp": 0,
                       "extendedFileMetadata": True, "partitionValues": {}, "size": add["add"]["size"]}}


def build(root: Path, commits: int, interval: int) -> None:
    from deltalake import DeltaTable

    log = root / "_delta_log"
    log.mkdir(parents=True)
    rng = random.Random(7)
    live: list[dict[str, Any]] = []
    table: Any = None
    for version in range(commits):
        new = add_action(version, rng)
        if version == 0:
            actions = [commit_info("WRITE", 0, {"num_added_files": 1, "num_added_rows": 1}),
                       {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
                       {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                                     "schemaString": json.dumps(SCHEMA), "partitionColumns": [], "configuration": {},
                                     "createdTime": 0}}, new]
        elif version % 1000 == 500:
            old = live.pop(0)
            new["add"]["dataChange"] = False
            actions = [commit_info("OPTIMIZE", version, {"numFilesAdded": 1, "numFilesRemoved": 1}),
                       remove_action(old) | {"dataChange": False}, new]
        elif version % 2 == 0:
            old = live.pop(0)
            actions = [commit_info("MERGE", version, {"num_target_rows_inserted": 3, "num_target_rows_updated": 2,
                                                      "num_target_rows_deleted": 0, "num_target_rows_copied": 40}),
                       remove_action(old), new]
        else:
            actions = [commit_info("WRITE", version, {"num_added_files": 1, "num_added_rows": 5}), new]
        live.append(new)
        (log / f"{version:020d}.json").write_text("".join(json.dumps(action) + "\n" for action in actions))
        if version % interval == interval - 1:
            if table is None:
                table = DeltaTable(str(root))
            else:
                table.update_incremental()
            table.create_checkpoint()


def append_commit(root: Path, rng: random.Random) -> int:
    """One WRITE after the newest commit (found by probing from the checkpoint hint); its version."""
    log = root / "_delta_log"
    version = json.loads((log / "_last_checkpoint").read_text())["version"]
    while (log / f"{version + 1:020d}.json").exists():
        version += 1
    actions = [commit_info("WRITE", version + 1, {"num_added_files": 1, "num_added_rows": 5}),
               add_action(version + 1, rng)]
    (log / f"{version + 1:020d}.json").write_text("".join(json.dumps(action) + "\n" for action in actions))
    return version + 1


class Cdcwatch:
    def __init__(self, root: Path) -> None:
        from cdcwatch.delta import DeltaLog

        self.log = DeltaLog(str(root), "ts")

    def read(self) -> tuple[int, int, float | None]:
        state = self.log.read()
        return state.version, state.files, state.newest_commit_time


class DeltaRs:
    """The same figures from deltalake: version, history of the new commits (operations and metrics), the add
    actions (files, bytes, small files, the column's max)."""

    def __init__(self, root: Path) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc
        from deltalake import DeltaTable

        self.pa, self.pc = pa, pc
        self.table = DeltaTable(str(root))
        self.version = -1
        self.figures()

    def figures(self) -> tuple[int, int, float | None]:
        version = self.table.version()
        new = version - self.version if self.version >= 0 else 100  # the first: about the commits since the checkpoint
        history = self.table.history(limit=new) if new else []
        self.version = version
        adds = self.pa.table(self.table.get_add_actions(flatten=True))
        sizes = adds.column("size_bytes")
        small = self.pc.sum(self.pc.less(sizes, 32 * MiB)).as_py()
        newest = self.pc.max(adds.column("max.ts")).as_py()
        assert len(history) == new and small is not None
        return version, adds.num_rows, newest.timestamp() if newest else None

    def read(self) -> tuple[int, int, float | None]:
        self.table.update_incremental()
        return self.figures()


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(int(len(ordered) * share), len(ordered) - 1)]


def measure(kind: str, roots: list[Path], rounds: int) -> dict[str, float]:
    # the libraries are loaded before the baseline: their cost is not a table's
    import deltalake  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import cdcwatch.delta  # noqa: F401

    make = Cdcwatch if kind == "cdcwatch" else DeltaRs
    rng = random.Random(11)
    before = rss()
    started = time.perf_counter()
    first = make(roots[0])
    first_read = time.perf_counter() - started
    if kind == "cdcwatch":
        first.read()
        first_read = time.perf_counter() - started
    one_table_rss = rss() - before
    after_commit, idle = [], []
    for _ in range(rounds):
        version = append_commit(roots[0], rng)
        started = time.perf_counter()
        read = first.read()
        after_commit.append(time.perf_counter() - started)
        started = time.perf_counter()
        first.read()
        idle.append(time.perf_counter() - started)
        assert read[0] == version, (read, version)
    readers = [first]
    for root in roots[1:]:
        reader = make(root)
        if kind == "cdcwatch":
            reader.read()
        readers.append(reader)
    per_table_rss = (rss() - before) / len(roots)
    side_by_side = []
    with ThreadPoolExecutor(len(readers)) as pool:
        for _ in range(max(rounds // 5, 5)):
            for root in roots:
                append_commit(root, rng)
            started = time.perf_counter()
            list(pool.map(lambda reader: reader.read(), readers))
            side_by_side.append(time.perf_counter() - started)
    figures = {"first_read_ms": first_read * 1000, "one_table_rss_mib": one_table_rss / MiB,
               "after_commit_p50_ms": percentile(after_commit, 0.5) * 1000,
               "after_commit_p95_ms": percentile(after_commit, 0.95) * 1000,
               "idle_p50_ms": percentile(idle, 0.5) * 1000, "rss_per_table_mib": per_table_rss / MiB,
               "tables_threads_p50_ms": percentile(side_by_side, 0.5) * 1000, "tables": len(roots)}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--checkpoint-interval", type=int, default=100)
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--measure", choices=("cdcwatch", "deltalake"), help=argparse.SUPPRESS)
    parser.add_argument("--roots", nargs="*", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.roots, args.rounds)))
        return
    with tempfile.TemporaryDirectory(prefix="cdcwatch-delta-bench-") as work:
        base = Path(work) / "table0"
        started = time.perf_counter()
        build(base, args.commits, args.checkpoint_interval)
        roots = [base]
        for number in range(1, args.tables):
            root = Path(work) / f"table{number}"
            (root / "_delta_log").mkdir(parents=True)
            for entry in (base / "_delta_log").iterdir():
                os.link(entry, root / "_delta_log" / entry.name)
            roots.append(root)
        live = sum(1 for _ in (base / "_delta_log").glob("*.checkpoint.parquet"))
        print(f"built {args.commits} commits, {live} checkpoints, {args.tables} tables in "
              f"{time.perf_counter() - started:.1f} s")
        results = {}
        for kind in ("cdcwatch", "deltalake"):
            done = subprocess.run([sys.executable, __file__, "--measure", kind, "--rounds", str(args.rounds),
                                   "--roots", *map(str, roots)], capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"{kind}: {done.stderr[-3000:]}")
            results[kind] = json.loads(done.stdout.splitlines()[-1])
    names = list(results["cdcwatch"])
    print(f"\n{'':<24} {'cdcwatch':>10} {'deltalake':>10}")
    for name in names:
        print(f"{name:<24} {results['cdcwatch'][name]:>10.2f} {results['deltalake'][name]:>10.2f}")
    ours = results["cdcwatch"]
    for label, value, budget in (("read after 1 commit p50 ms", ours["after_commit_p50_ms"], 20),
                                 ("RSS per table MiB", ours["rss_per_table_mib"], 20),
                                 (f"{args.tables} tables in threads p50 ms", ours["tables_threads_p50_ms"], 100)):
        print(f"{label:<34} {value:8.2f} < {budget:<4} {'MET' if value < budget else 'NOT MET'}")


if __name__ == "__main__":
    main()
