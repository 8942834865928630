"""`scripts/demo`: the whole monitored CDC pipeline on one machine, all on 127.0.0.1.

PostgreSQL source → the released Debezium PostgreSQL connector in a Kafka Connect worker (JMX on) → Apache Kafka 4
(KRaft) → the Spark apply job (Spark's Kafka source, listener attached) → PostgreSQL target; or, with `--sink jdbc`, →
the Debezium JDBC sink connector in the same worker → PostgreSQL target, no Spark, the target's freshness from a
canary the source connector writes with its heartbeats. `cdcwatch serve` with every collector; Prometheus with the
generated rules (demo-speed `for`s) scraping cdcwatch and the Spark driver; Alertmanager posting to a local webhook
that appends to `alerts.log`. A traffic generator inserts, updates and deletes steadily. Everything lives under one
state directory (wiped at start); Ctrl-C stops every process it started, by PID.

`demo.json` in the state directory tells where everything runs; `scripts/demo --scenario NAME`
(scenarios.py) reads it and asks the running demo, through its control endpoint, to inject a fault.
"""

from __future__ import annotations

import http.server
import json
import os
import random
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from devstack.configs import (
    canary,
    connect_worker,
    exporter_config,
    jmx_target,
    kafka_cluster,
    listen,
    postgres_source,
    reconcile_pair,
    reconcile_side,
)
from devstack.demo_settings import (
    APPLY_RATE,
    CANARY_INTERVAL_SECONDS,
    CANARY_TABLE,
    CATCH_UP_SECONDS,
    COMMIT_GROUP,
    CONNECTOR,
    DLQ_TOPIC,
    MIXINS,
    PUBLICATION,
    QUERY,
    QUIET_EVALUATIONS,
    RECONCILE_CONFIRM_RECHECKS,
    RECONCILE_PAIR,
    RECONCILE_SETTLE_SECONDS,
    SCRAPE_INTERVAL,
    SERVER,
    SIGNAL_TABLE,
    SINK_CONNECTOR,
    SLOT,
    SLOT_KEEP_MB,
    SNAPSHOT_CHUNK_ROWS,
    SNAPSHOT_TABLE,
    SNAPSHOT_TABLE_ROWS,
    STATE_FILE,
    STATUS_WINDOW_SAMPLES,
)
from devstack.procs import REPO, ServerProcess, StackError, free_port, jvm_dir, port_open, wait_for

__all__ = ["DemoStack", "Traffic", "run_demo"]

def prerequisites(port: int, sink: str = "spark") -> list[str]:
    """What is missing before anything starts, each with how to fix it."""
    problems = []
    fix = "(scripts/setup.sh installs it)"
    for binary, package in (("java", "openjdk-17-jre-headless"), ("prometheus", "prometheus"),
                            ("prometheus-alertmanager", "prometheus-alertmanager"), ("psql", "postgresql-client")):
        if shutil.which(binary) is None:
            problems.append(f"{binary} is missing: apt-get install -y {package} {fix}")
    if not list(Path("/usr/lib/postgresql").glob("*/bin/postgres")):
        problems.append(f"the PostgreSQL server is missing: apt-get install -y postgresql {fix}")
    if sink == "spark":
        try:
            __import__("pyspark")
        except ImportError:
            problems.append(f"Python package pyspark is missing: pip install 'cdcwatch[spark]' {fix}")
    if port_open(port):
        problems.append(f"port {port} is taken: stop what listens there or pass --port")
    for part in ("kafka", "connect", "plugins", *(("spark-kafka",) if sink == "spark" else ())):
        try:
            jvm_dir(part)
        except StackError as exc:
            problems.append(str(exc))
    return problems


class Traffic:
    """Steady inserts, updates and deletes on the source; `burst(n)` adds n rows in one transaction."""

    def __init__(self, pg: Any, first_id: int) -> None:
        self.pg = pg
        self.next_id = first_id
        self.stop = threading.Event()
        self.paused = threading.Event()
        self.lock = threading.Lock()
        self.writing = threading.Lock()

    def pause(self) -> None:
        """No writes from now on (a check that needs the source still): returns once the tick in progress is done."""
        self.paused.set()
        with self.writing:
            pass

    def resume(self) -> None:
        self.paused.clear()

    def run(self) -> None:
        while not self.stop.wait(0.5):
            with self.writing:
                if not self.paused.is_set():
                    self._tick()

    def _tick(self) -> None:
        with self.lock:
            new, victim = self.next_id, random.randint(1, self.next_id - 1)
            self.next_id += 1
        statements = [f"INSERT INTO customers VALUES ({new}, 'customer {new}', now())",
                      f"UPDATE customers SET name = name || '+', updated_at = now() WHERE id = {victim}"]
        if new % 5 == 0:
            statements.append(f"DELETE FROM customers WHERE id = {random.randint(1, new - 1)}")
        try:
            self.pg.sql("; ".join(statements))
        except StackError:
            pass  # the source is down (a scenario): try again next tick

    def burst(self, rows: int) -> None:
        with self.lock:
            first, self.next_id = self.next_id, self.next_id + rows
        self.pg.sql(f"INSERT INTO customers SELECT g, 'burst ' || g, now() FROM generate_series({first}, {first + rows - 1}) g")


def reconcile_config(source_port: int, target_port: int, spark_metrics_port: int | None) -> dict[str, Any]:
    """The customers table compared with its target, re-checks gated on the measured freshness: the apply job's
    (its ledger), or without it the canary in the sink's typed table; a budget far above a production default, so
    that a pass of the demo's table takes a couple of seconds."""
    source = reconcile_side("postgres", source_port, "postgres", rows_per_second=50000, table="public.customers")
    common = {"settle_seconds": RECONCILE_SETTLE_SECONDS, "confirm_rechecks": RECONCILE_CONFIRM_RECHECKS,
              "pass_interval_seconds": 1}
    if spark_metrics_port is None:
        return reconcile_pair(RECONCILE_PAIR, source, reconcile_side("postgres", target_port, "postgres",
                                                                     rows_per_second=50000, table="public.customers"),
                              freshness_canary={"table": CANARY_TABLE}, **common)
    return reconcile_pair(
        RECONCILE_PAIR, source, reconcile_side("postgres", target_port, "postgres", rows_per_second=50000, format="apply"),
        freshness_url=f"http://127.0.0.1:{spark_metrics_port}/metrics", freshness_labels={"server": SERVER}, **common)


def sink_connector_properties(target_port: int) -> dict[str, str]:
    """The Debezium JDBC sink writing the customers and canary topics into the target's tables as they are: no
    schema evolution, only the columns it was set up with (a column added at the source is dropped without a word:
    the `schema-drift` scenario), records no converter reads go to a dead letter queue (the `dead-letter` scenario)."""
    from devstack.debezium import jdbc_sink_properties

    fields = [f"{SERVER}.public.customers:{column}" for column in ("id", "name", "updated_at")]
    fields += [f"{SERVER}.{CANARY_TABLE}:{column}" for column in ("id", "ts")]
    return jdbc_sink_properties(
        f"{SERVER}.public.customers,{SERVER}.{CANARY_TABLE}", f"jdbc:postgresql://127.0.0.1:{target_port}/postgres",
        "postgres", "postgres", **{
            "schema.evolution": "none", "field.include.list": ",".join(fields),
            "errors.tolerance": "all", "errors.deadletterqueue.topic.name": DLQ_TOPIC,
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true"})


_CANARY_UPSERT = (f"INSERT INTO {CANARY_TABLE} (id, ts) VALUES (1, now()) "
                  "ON CONFLICT (id) DO UPDATE SET ts = EXCLUDED.ts")


class _Quiet:
    """Whether no alert has been pending or firing for `seconds` (several rule evaluations in a row).

    The demo is ready once its pipeline has caught up: the connector's initial snapshot (the customers and the
    orders tables) reaches Kafka faster than the apply job, held to APPLY_RATE records a batch, applies it, so a
    backlog builds whatever order the components start in (and the apply job's JVM takes longer to start than the
    snapshot to finish). While it drains, freshness and lag alerts fire; ready before that, the first screen would
    page for a healthy pipeline."""

    def __init__(self, prometheus_url: str, seconds: float) -> None:
        from cdcwatch.promapi import PrometheusApi

        self.api = PrometheusApi(prometheus_url, timeout=5)
        self.seconds = seconds
        self.since: float | None = None
        self.active: list[str] = []

    def held(self) -> bool:
        alerts = self.api.alerts()  # pending and firing alike
        self.active = sorted({f"{a['labels']['alertname']} ({a['state']})" for a in alerts})
        if self.active:
            self.since = None
            return False
        self.since = self.since or time.monotonic()
        return time.monotonic() - self.since >= self.seconds


class DemoStack:
    """Starts, tracks and stops every component of the demo pipeline."""

    def __init__(self, base: Path, port: int, rows: int, log: Callable[[str], None] = print,
                 broker_netns: bool = False, sink: str = "spark") -> None:
        self.base = base
        self.sink = sink
        """`spark` (the apply job) or `jdbc` (the Debezium JDBC sink connector: no Spark)."""
        self.broker_netns = broker_netns
        """Run the broker in a network namespace of its own (devstack/netns.py), every client reaching it through a
        veth link that `broker_host.cut()` cuts: for the chaos run (needs root or CAP_NET_ADMIN)."""
        self.broker_host: Any = None
        self.port = port
        self.rows = rows
        self.log = log
        self.components: list[tuple[str, Any]] = []
        self.runbook_url = "http://127.0.0.1/runbook"
        """Where the alerts' runbook links point: the demo's control endpoint serves docs/runbook.md."""
        self.info: dict[str, Any] = {"state_dir": str(base), "metrics": f"http://127.0.0.1:{port}/metrics", "sink": sink}
        self.scenario_baseline: dict[str, float] = {}
        """Figures a scenario's inject reads for its check to compare against."""

    def _started(self, name: str, component: Any) -> Any:
        self.components.append((name, component))
        return component

    def start(self) -> None:
        from cdcwatch.mixin import MixinConfig
        from cdcwatch.mixin.generate import rules_yaml
        from cdcwatch.mixin.inhibit import inhibit_rules
        from devstack.connect import ConnectWorker
        from devstack.debezium import postgres_connector_properties
        from devstack.kafka import KafkaBroker
        from devstack.postgres import PostgresServer
        from devstack.prometheus import AlertmanagerServer, PrometheusServer, WebhookReceiver
        from devstack.spark import ApplyJob

        base, steps, jdbc = self.base, 8, self.sink == "jdbc"
        self.log(f"[1/{steps}] PostgreSQL source and target ...")
        self.source = self._started("source", PostgresServer(base / "source", free_port()))
        self.source.start()
        self.source.sql("CREATE TABLE customers (id int PRIMARY KEY, name text, updated_at timestamptz DEFAULT now());"
                        f"INSERT INTO customers SELECT g, 'customer ' || g, now() FROM generate_series(1, {self.rows}) g;"
                        f"CREATE TABLE {SNAPSHOT_TABLE} (id int PRIMARY KEY, customer_id int, amount numeric(10, 2));"
                        f"INSERT INTO {SNAPSHOT_TABLE} SELECT g, g % 997, g % 1000 / 10.0 "
                        f"FROM generate_series(1, {SNAPSHOT_TABLE_ROWS}) g;"
                        f"CREATE TABLE {SIGNAL_TABLE} (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, "
                        "data varchar(2048));")
        canary_table = f"CREATE TABLE {CANARY_TABLE} (id int PRIMARY KEY, ts timestamptz NOT NULL)"
        if jdbc:
            self.source.sql(canary_table)
        self.source.sql(f"ALTER SYSTEM SET max_slot_wal_keep_size = '{SLOT_KEEP_MB}MB'")  # not in a transaction
        self.source.sql("SELECT pg_reload_conf()")
        self.target = self._started("target", PostgresServer(base / "target", free_port()))
        self.target.start()
        if jdbc:  # the sink writes the tables as they are (no schema evolution)
            self.target.sql("CREATE TABLE customers (id int PRIMARY KEY, name text, updated_at timestamptz);"
                            + canary_table)
        self.log(f"[2/{steps}] Apache Kafka 4 (KRaft) ...")
        if self.broker_netns:
            from devstack.netns import TestHost

            self.broker_host = self._started("broker-netns", TestHost("broker"))
            self.broker_host.start()
            self.log(f"      in network namespace {self.broker_host.namespace} at {self.broker_host.address}")
        self.broker = self._started("broker", KafkaBroker(base / "broker", netns=self.broker_host))
        self.broker.start()
        self.log(f"[3/{steps}] Kafka Connect worker with the Debezium PostgreSQL connector"
                 f"{' and the Debezium JDBC sink' if jdbc else ''} ...")
        captured = f"public.customers,{SNAPSHOT_TABLE},{SIGNAL_TABLE}" + (f",{CANARY_TABLE}" if jdbc else "")
        properties = postgres_connector_properties(base, self.source.port, SERVER, captured, slot=SLOT)
        properties.update({"signal.data.collection": SIGNAL_TABLE,
                           "incremental.snapshot.chunk.size": str(SNAPSHOT_CHUNK_ROWS)})
        for engine_only in ("name", "offset.storage", "offset.storage.file.filename", "offset.flush.interval.ms",
                            "errors.max.retries"):
            properties.pop(engine_only)
        properties["heartbeat.interval.ms"] = str(int(CANARY_INTERVAL_SECONDS * 1000))
        connectors = {CONNECTOR: properties}
        if jdbc:
            properties["heartbeat.action.query"] = _CANARY_UPSERT
            connectors[SINK_CONNECTOR] = sink_connector_properties(self.target.port)
        # the sink commits its consumer offsets at each flush: every 5 s, within the demo's consumer-status window
        self.connect = self._started("connect", ConnectWorker(base / "connect", self.broker.bootstrap, connectors,
                                                              offset_flush_ms=5000 if jdbc else 30000))
        self.connect.start()
        self.apply: Any = None
        if jdbc:
            self.log(f"[4/{steps}] no Spark: the JDBC sink applies the changes in the Connect worker")
        else:
            self.log(f"[4/{steps}] Spark apply job (local[2], listener attached) ...")
            self.apply = self._started("apply", ApplyJob(
                base / "apply", self.broker.bootstrap, rf"{SERVER}\..*|__debezium-heartbeat\.{SERVER}",
                f"host=127.0.0.1 port={self.target.port} user=postgres dbname=postgres", query_name=QUERY,
                extra_args=["--commit-group", COMMIT_GROUP, "--max-offsets-per-trigger", str(APPLY_RATE)]))
            self.apply.start()
        self.log(f"[5/{steps}] cdcwatch serve ...")
        self.config_file = base / "cdcwatch.yml"
        self.config_file.write_text(exporter_config(
            listen=listen(self.port),
            # named as its `connect` entry: when the worker dies, CdcConnectWorkerDown pages for both
            debezium=[jmx_target("connect", self.connect.jmx_port, timeout_seconds=2)],
            kafka=[kafka_cluster("broker", self.broker.bootstrap, timeout_seconds=2,
                                 status={"window_samples": STATUS_WINDOW_SAMPLES})],
            connect=[connect_worker("connect", self.connect.url, jmx_port=self.connect.jmx_port, timeout_seconds=2)],
            postgres=[postgres_source("source", self.source.port, timeout_seconds=2, slot_servers={SLOT: SERVER},
                                      publication_servers={PUBLICATION: SERVER})],
            reconcile=[reconcile_config(self.source.port, self.target.port, None if jdbc else self.apply.metrics_port)],
            canary=[canary("target", SERVER, CANARY_INTERVAL_SECONDS,
                           {"engine": "postgres", "port": self.target.port, "user": "postgres", "table": CANARY_TABLE},
                           reconcile_side("postgres", self.source.port, "postgres", table=CANARY_TABLE),
                           timeout_seconds=2)] if jdbc else None),
            encoding="utf-8")
        self.serve = self._started("serve", _Serve(self.config_file, self.port, base / "cdcwatch.log"))
        self.serve.start()
        self.log(f"[6/{steps}] Alertmanager and the webhook receiver ...")
        self.alerts_log = base / "alerts.log"
        self.webhook = WebhookReceiver(self.alerts_log)
        self.components.append(("webhook", _Closing(self.webhook)))
        self.alertmanager = self._started("alertmanager", AlertmanagerServer(
            base / "alertmanager", self.webhook.url,
            inhibit_rules(MixinConfig.model_validate(MIXINS[self.sink]))))
        self.alertmanager.start()
        self.log(f"[7/{steps}] Prometheus with the cdcwatch rules ...")
        rules = base / "cdcwatch.rules.yml"
        mixin = MixinConfig.model_validate({**MIXINS[self.sink], "runbook_base_url": self.runbook_url})
        rules.write_text(rules_yaml(mixin), encoding="utf-8")
        jobs = {"cdcwatch": [f"127.0.0.1:{self.port}"]}
        if self.apply is not None:
            jobs["cdcwatch-spark"] = [f"127.0.0.1:{self.apply.metrics_port}"]
        self.prometheus = self._started("prometheus", PrometheusServer(
            base / "prometheus", jobs, [rules], f"127.0.0.1:{self.alertmanager.port}", interval=SCRAPE_INTERVAL))
        self.prometheus.start()
        self.log(f"[8/{steps}] traffic ...")
        self.traffic = Traffic(self.source, self.rows + 1)
        threading.Thread(target=self.traffic.run, name="demo-traffic", daemon=True).start()
        self.components.append(("traffic", _Stopping(self.traffic.stop)))
        self.info.update({
            "prometheus": self.prometheus.url, "alertmanager": self.alertmanager.url,
            "spark_metrics": self.apply.metrics_url if self.apply else None, "connect_rest": self.connect.url,
            "kafka": self.broker.bootstrap,
            "source": f"psql -h 127.0.0.1 -p {self.source.port} -U postgres",
            "target": f"psql -h 127.0.0.1 -p {self.target.port} -U postgres  "
                      + ("(tables customers, cdc_canary)" if jdbc else "(table cdcwatch_apply.rows)"),
            "alerts_log": str(self.alerts_log), "config": str(self.config_file),
            "logs": {"connect": str(self.connect.dir / "worker.log"), "cdcwatch": str(base / "cdcwatch.log"),
                     **({"apply": str(self.apply.log)} if self.apply else {}), "source": str(self.source.log),
                     "prometheus": str(base / "prometheus" / "prometheus.log")},
            "scrape_interval_seconds": float(SCRAPE_INTERVAL.rstrip("s")),
            "pids": self.pids(),
        })
        what = "the sink's first canary" if jdbc else "the apply job's first changes"
        self.log(f"        waiting for Prometheus to see {what} ...")
        log = self.apply.log if self.apply else self.connect.dir / "worker.log"
        wait_for(self._applying, 600, f"{what} in Prometheus (log {log})", interval=1)
        self.log("        waiting for the pipeline to catch up with the initial snapshot ...")
        quiet = _Quiet(self.prometheus.url, float(SCRAPE_INTERVAL.rstrip("s")) * QUIET_EVALUATIONS)
        try:
            wait_for(quiet.held, CATCH_UP_SECONDS, "no alert pending or firing", interval=1)
        except StackError:  # the pipeline runs: show it, with what is still active, rather than stop it
            self.log(f"        not caught up after {CATCH_UP_SECONDS} s; still active: {', '.join(quiet.active)} "
                     f"(see {self.prometheus.url}/alerts)")

    def _applying(self) -> bool:
        """Prometheus holds the apply stage's state of the pipeline: the job applied changes (or the sink wrote a
        canary) and was scraped since (ready before that, a fault on the apply stage would find no stage to stall)."""
        from cdcwatch.mixin.alerts.pipeline import STATE
        from cdcwatch.promapi import PrometheusApi

        return bool(PrometheusApi(self.prometheus.url).query(f'{STATE}{{server="{SERVER}", stage="apply"}} == 1'))

    def pids(self) -> dict[str, int]:
        found = {}
        for name, component in self.components:
            process = getattr(component, "process", None)
            if process is not None and process.poll() is None:
                found[name] = process.pid
            postmaster = getattr(component, "data", Path("/nonexistent")) / "postmaster.pid"
            if postmaster.exists():  # PostgreSQL runs under pg_ctl: its PID is in the data directory
                found[name] = int(postmaster.read_text().split()[0])
        found["demo"] = os.getpid()
        return found

    def stop(self) -> None:
        for name, component in reversed(self.components):
            try:
                component.stop()
            except Exception as exc:  # keep stopping the others
                self.log(f"stopping {name}: {exc}")


class _Serve:
    """`cdcwatch serve` as a child process (its JPype JVM lives there, not in the demo)."""

    def __init__(self, config: Path, port: int, log: Path) -> None:
        self.config, self.port = config, port
        self.server = ServerProcess("cdcwatch serve", log)

    @property
    def process(self) -> Any:
        return self.server.process

    def start(self) -> None:
        # two malloc arenas, as docs/install.md recommends: the collections' threads otherwise multiply glibc's arenas
        env = {"MALLOC_ARENA_MAX": "2", **os.environ}
        self.server.start([sys.executable, "-m", "cdcwatch.cli", "serve", "--config.file", str(self.config)],
                          lambda: port_open(self.port), 60, env=env)

    def stop(self) -> None:
        self.server.stop(30)


class _Closing:
    def __init__(self, thing: Any) -> None:
        self.thing = thing

    def stop(self) -> None:
        self.thing.close()


class _Stopping:
    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def stop(self) -> None:
        self.event.set()


def runbook_html() -> str:
    """docs/runbook.md as a page whose headings are anchors (`#<alert name in lower case>`), as the alerts link."""
    import html
    import re

    lines = []
    for line in (REPO / "docs" / "runbook.md").read_text(encoding="utf-8").splitlines():
        heading = re.match(r"(#+)\s+(.*)", line)
        if heading:
            level, text = len(heading.group(1)), heading.group(2)
            anchor = re.sub(r"[^a-z0-9 -]", "", text.lower()).replace(" ", "-")
            lines.append(f'<h{level} id="{anchor}">{html.escape(text)}</h{level}>')
        else:
            lines.append(html.escape(line) + "<br>")
    return "<!doctype html><meta charset=utf-8><title>cdcwatch runbook</title>\n" + "\n".join(lines)


def _control_server(stack: DemoStack) -> http.server.ThreadingHTTPServer:
    """POST /inject/<scenario>, /check/<scenario> and /recover/<scenario>: what `scripts/demo --scenario` asks for."""
    from devstack.scenarios import SCENARIOS

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.split("#")[0] != "/runbook":
                self.send_response(404)
                self.end_headers()
                return
            body = runbook_html().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            parts = self.path.strip("/").split("/")
            scenario = (SCENARIOS.get(parts[1]) if len(parts) == 2 and parts[0] in ("inject", "recover", "check")
                        else None)
            if scenario is None or (parts[0] == "check" and scenario.check is None):
                self.send_response(404)
                self.end_headers()
                return
            try:
                if parts[0] == "check":  # what the user must see while the scenario runs (a scenario without an alert)
                    assert scenario.check is not None
                    answer: dict[str, Any] = {"at": time.time(), "check": scenario.check(stack)}
                else:
                    answer = {"at": (scenario.inject if parts[0] == "inject" else scenario.recover)(stack) or time.time()}
                stack.info["pids"] = stack.pids()
                _write_state(stack)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(json.dumps(answer).encode())
            except Exception as exc:  # the scenario client prints it
                if parts[0] == "inject":  # a half-injected fault must not outlive the request
                    try:
                        scenario.recover(stack)
                    except Exception as again:
                        exc = RuntimeError(f"{exc}; recovering failed too: {again}")
                self.send_response(500)
                self.end_headers()
                self.wfile.write(str(exc).encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, name="demo-control", daemon=True).start()
    return server


def _write_state(stack: DemoStack) -> None:
    (stack.base / STATE_FILE).write_text(json.dumps(stack.info, indent=2), encoding="utf-8")


def run_demo(state_dir: str, port: int, rows: int, headless: bool | None = None, sink: str = "spark") -> int:
    """Start the pipeline, show the live summary (or, headless, a status line every 30 s) until Ctrl-C."""
    from devstack.summary import Summary

    problems = prerequisites(port, sink)
    if problems:
        print("the demo cannot start:\n" + "\n".join(f"  - {p}" for p in problems), file=sys.stderr)
        return 2
    if headless is None:
        headless = not sys.stdout.isatty()
    base = Path(state_dir).resolve()
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    base.chmod(0o755)
    stack = DemoStack(base, port, rows, log=lambda line: print(line, flush=True), sink=sink)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    control = _control_server(stack)
    stack.info["control"] = f"http://127.0.0.1:{control.server_address[1]}"
    stack.runbook_url = stack.info["control"] + "/runbook"
    try:
        stack.start()
        _write_state(stack)
        print(_where(stack), flush=True)
        print("ready: the pipeline runs; Ctrl-C stops everything", flush=True)
        summary = Summary(stack.info)
        while not stopping.wait(30 if headless else 2):
            print(summary.line() if headless else summary.screen(), flush=True)
        return 0
    except StackError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 1
    finally:
        print("stopping ...", flush=True)
        control.shutdown()
        stack.stop()
        print("stopped.", flush=True)


def _where(stack: DemoStack) -> str:
    info = stack.info
    return "\n".join([
        "",
        f"  cdcwatch      {info['metrics']}   (config {info['config']})",
        (f"  Spark         {info['spark_metrics']}   (listener of query {QUERY})" if info["spark_metrics"] else
         f"  sink          {SINK_CONNECTOR} (Debezium JDBC sink in the Connect worker; dead letters: {DLQ_TOPIC})"),
        f"  Prometheus    {info['prometheus']}/alerts",
        f"  Alertmanager  {info['alertmanager']}",
        f"  Connect REST  {info['connect_rest']}/connectors?expand=status",
        f"  source        {info['source']}",
        f"  target        {info['target']}",
        f"  alerts log    {info['alerts_log']}",
        f"  runbook       {stack.runbook_url}   (every alert's runbook_url points here)",
        f"  logs          {stack.base}/  (connect/worker.log, {'apply/apply.log, ' if stack.apply else ''}cdcwatch.log, ...)",
        f"  break it      scripts/demo --scenario NAME --state-dir {stack.base}   (scripts/demo --list-scenarios)",
        ""])
