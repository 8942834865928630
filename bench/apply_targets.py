"""Throughput of the reference apply job's two targets on the same change events: the PostgreSQL target (every table
in one generic table: COPY, then one merge transaction) and the Delta Lake target (a typed table per source table:
a MERGE each, then the ledger's commit).

For each table count, --changes row changes (inserts of --changes/2 rows, then an update of each) are spread over
the tables, produced once to one topic per table of the local Apache Kafka 4 broker with their Kafka Connect schema,
as Debezium's JsonConverter writes them. Each run starts `cdcwatch-apply` (local[2], --batch records per
micro-batch) on a fresh checkpoint and target and times from its listener answering to the changes it counted as
applied reaching --changes: query start-up and every batch, the same for both targets. The rounds alternate which
target goes first; the median rows/s of each and their ratio are printed.

    .venv/bin/python bench/apply_targets.py [--changes 20000] [--tables 1 10] [--rounds 2] [--batch 5000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devstack.kafka import KafkaBroker  # noqa: E402
from devstack.postgres import PostgresServer  # noqa: E402
from devstack.procs import exit_on_sigterm, free_port, wait_for  # noqa: E402
from devstack.samples import parse, total  # noqa: E402
from devstack.spark import ApplyJob  # noqa: E402

_ROW = {"type": "struct", "optional": True, "fields": [
    {"type": "int32", "optional": False, "field": "id"}, {"type": "string", "optional": True, "field": "name"},
    {"type": "int64", "optional": True, "field": "qty"}]}


def change(server: str, table: str, lsn: int, row_id: int, version: int) -> tuple[str, str]:
    """One insert (version 0) or update of `table`'s row `row_id`, as the JsonConverter writes it with its schema."""
    topic = f"{server}.public.{table}"
    key = {"schema": {"type": "struct", "optional": False, "name": f"{topic}.Key",
                      "fields": [{"type": "int32", "optional": False, "field": "id"}]}, "payload": {"id": row_id}}
    now_ms = int(time.time() * 1000)
    after = {"id": row_id, "name": f"row {row_id} v{version}", "qty": row_id * 10 + version}
    value = {"schema": {"type": "struct", "optional": False, "name": f"{topic}.Envelope",
                        "fields": [{**_ROW, "name": f"{topic}.Value", "field": "before"},
                                   {**_ROW, "name": f"{topic}.Value", "field": "after"}]},
             "payload": {"op": "c" if version == 0 else "u", "ts_ms": now_ms, "before": None, "after": after,
                         "source": {"connector": "postgresql", "name": server, "ts_ms": now_ms - 5, "db": "bench",
                                    "schema": "public", "table": table, "lsn": lsn}}}
    return json.dumps(key), json.dumps(value)


def produce(broker: KafkaBroker, server: str, tables: int, changes: int) -> None:
    from confluent_kafka import Producer

    for number in range(tables):
        broker.create_topic(f"{server}.public.t{number}", 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "queue.buffering.max.messages": 1_000_000})
    rows = changes // 2
    for n in range(changes):
        row_id, version = n % rows, n // rows
        table = f"t{row_id % tables}"
        key, value = change(server, table, 1_000_000 + n, row_id, version)
        producer.produce(f"{server}.public.{table}", key=key, value=value, partition=row_id % 2)
        if n % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("the producer could not deliver every record")


def timed_run(base: Path, broker: KafkaBroker, pg: PostgresServer, server: str, target: str, changes: int,
              batch: int, run: int) -> float:
    """Seconds from the job's listener answering to every change counted as applied."""
    if target == "postgres":
        database = f"target_{run}"
        pg.sql(f"CREATE DATABASE {database}")
        dsn = f"host=127.0.0.1 port={pg.port} user=postgres dbname={database}"
    else:
        dsn = f"delta:{base / f'lake-{run}'}"
    job = ApplyJob(base / f"apply-{run}", broker.bootstrap, rf"{server}\..*", dsn, query_name=f"bench_{run}",
                   extra_args=("--max-offsets-per-trigger", str(batch)))
    job.start(timeout=180)
    started = time.perf_counter()
    try:
        wait_for(lambda: (total(parse(job.metrics()), "cdcwatch_spark_changes_applied_total") or 0) >= changes,
                 1800, f"{changes} changes applied to {target}", interval=0.2)
        return time.perf_counter() - started
    finally:
        job.stop()


def main() -> int:
    exit_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--changes", type=int, default=20_000)
    parser.add_argument("--tables", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=5_000, help="maxOffsetsPerTrigger")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="cdcwatch-bench-apply-"))
    pg, broker = PostgresServer(base / "pg", free_port()), KafkaBroker(base / "broker")
    pg.start()
    broker.start()
    rates: dict[tuple[str, int], list[float]] = {}
    run = 0
    try:
        for tables in args.tables:
            server = f"bench{tables}"
            produce(broker, server, tables, args.changes)
            for round_ in range(args.rounds):
                order = ("postgres", "delta") if round_ % 2 == 0 else ("delta", "postgres")
                for target in order:
                    run += 1
                    seconds = timed_run(base, broker, pg, server, target, args.changes, args.batch, run)
                    rates.setdefault((target, tables), []).append(args.changes / seconds)
                    print(f"{tables:>3} table(s) {target:<8} round {round_ + 1}: {seconds:6.1f} s, "
                          f"{args.changes / seconds:8.0f} changes/s", flush=True)
    finally:
        broker.stop()
        pg.stop()
    print(f"\n{args.changes} changes, {args.batch} per micro-batch, local[2]; median of {args.rounds} rounds")
    print("| tables | PostgreSQL target (changes/s) | Delta target (changes/s) | Delta / PostgreSQL |")
    print("|---|---|---|---|")
    for tables in args.tables:
        pg_rate = statistics.median(rates[("postgres", tables)])
        delta_rate = statistics.median(rates[("delta", tables)])
        print(f"| {tables} | {pg_rate:.0f} | {delta_rate:.0f} | {delta_rate / pg_rate:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
