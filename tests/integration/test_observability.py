"""Rules and dashboards proven on live data: a real Prometheus scrapes cdcwatch and the Spark listener
on a running pipeline (PostgreSQL → Debezium in Kafka Connect → Apache Kafka 4 → Spark apply → PostgreSQL, its
canary written by the connector's heartbeat action, plus a MySQL connector on MariaDB for schema history),
evaluates the generated rules and sends alerts to a real Alertmanager, which posts them to a webhook.

- every panel query of every dashboard, variables resolved through the Prometheus API, returns series;
- every rule evaluates without error;
- the preview renders one PNG per dashboard from that Prometheus;
- kill the MySQL connector's JVM: the alert notification arrives; start it again: the resolved one arrives.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from cdcwatch.mixin import MixinConfig
from cdcwatch.mixin.dashboards import build_dashboards, conditional_exprs
from cdcwatch.mixin.generate import rules_yaml
from cdcwatch.mixin.preview import render_preview, resolve_variables, substitute
from cdcwatch.promapi import PrometheusApi
from devstack.configs import (
    canary,
    connect_worker,
    exporter_config,
    jmx_target,
    kafka_cluster,
    postgres_source,
    reconcile_pair,
    reconcile_side,
)
from devstack.connect import ConnectWorker
from devstack.debezium import DebeziumProcess, mysql_connector_properties, postgres_connector_properties
from devstack.procs import free_port, wait_for
from devstack.prometheus import AlertmanagerServer, PrometheusServer, WebhookReceiver
from devstack.spark import ApplyJob
from tests.integration.conftest import Serve

pytestmark = pytest.mark.integration

SCRAPE = "3s"
CANARY_INTERVAL = 1.0
"""The connector's heartbeat interval, which writes the canary."""
FAST = MixinConfig.model_validate({"durations": {"critical": "5s", "warning": "5s", "instant": "1s"}})


@pytest.fixture(scope="module")
def observed(postgres, kafka, mariadb, stack_dir):
    postgres.sql("DROP DATABASE IF EXISTS obs_target")
    postgres.sql("CREATE DATABASE obs_target")
    postgres.sql("DROP TABLE IF EXISTS obs_orders, obs_canary; CREATE TABLE obs_orders (id int PRIMARY KEY, amount int);"
                 "INSERT INTO obs_orders SELECT g, g FROM generate_series(1, 300) g;"
                 "CREATE TABLE obs_canary (id int PRIMARY KEY, ts timestamptz NOT NULL)")
    mariadb.root_sql("CREATE DATABASE IF NOT EXISTS obsshop; CREATE TABLE IF NOT EXISTS obsshop.items (id INT PRIMARY KEY);")
    started: list = []
    properties = postgres_connector_properties(stack_dir, postgres.port, "obs", "public.obs_orders,public.obs_canary",
                                               slot="obs_slot")
    for engine_only in ("name", "offset.storage", "offset.storage.file.filename", "offset.flush.interval.ms"):
        properties.pop(engine_only)
    properties["heartbeat.interval.ms"] = str(int(CANARY_INTERVAL * 1000))
    # the canary, written by the connector at each heartbeat and applied by the Spark job like any change
    properties["heartbeat.action.query"] = ("INSERT INTO obs_canary (id, ts) VALUES (1, now()) "
                                            "ON CONFLICT (id) DO UPDATE SET ts = EXCLUDED.ts")
    worker = ConnectWorker(stack_dir / "obs-connect", kafka.bootstrap, {"obs": properties})
    mysql_state = stack_dir / "obs-mysql"
    maria = DebeziumProcess(mysql_state, free_port(), mysql_connector_properties(
        mysql_state, mariadb.port, mariadb.user, mariadb.password, "obsmaria", "obsshop"))
    job = ApplyJob(stack_dir / "obs-apply", kafka.bootstrap, r"obs\..*|__debezium-heartbeat\.obs",
                   f"host=127.0.0.1 port={postgres.port} user=postgres dbname=obs_target", query_name="obs_apply",
                   extra_args=["--commit-group", "obs-apply"])
    webhook = WebhookReceiver()
    alertmanager = AlertmanagerServer(stack_dir / "obs-alertmanager", webhook.url)
    stop_traffic = threading.Event()
    try:
        for component in (worker, maria, job, alertmanager):
            component.start()
            started.append(component)
        # every collector's deadline stays below Prometheus' scrape timeout (SCRAPE): a dead target must read
        # up 0 in a scrape that succeeds, not make the whole scrape time out
        serve = Serve(exporter_config(
            debezium=[jmx_target("worker-jvm", worker.jmx_port, timeout_seconds=2),
                      jmx_target("maria", maria.jmx_port, timeout_seconds=2)],
            kafka=[kafka_cluster("broker", kafka.bootstrap, timeout_seconds=2)],
            connect=[connect_worker("worker", worker.url, jmx_port=worker.jmx_port, timeout_seconds=2)],
            postgres=[postgres_source("pg", postgres.port, timeout_seconds=2, slot_servers={"obs_slot": "obs"})],
            reconcile=[reconcile_pair(
                "obs-orders", reconcile_side("postgres", postgres.port, "postgres", table="public.obs_orders"),
                reconcile_side("postgres", postgres.port, "postgres", dbname="obs_target", format="apply"),
                freshness_url=f"http://127.0.0.1:{job.metrics_port}/metrics", freshness_labels={"server": "obs"})],
            canary=[canary("obs-canary", "obs", CANARY_INTERVAL,
                           reconcile_side("postgres", postgres.port, "postgres", dbname="obs_target", format="apply"),
                           reconcile_side("postgres", postgres.port, "postgres", table="public.obs_canary"))]),
            stack_dir)
        started.append(serve)
        rules = stack_dir / "obs-rules.yml"
        rules.write_text(rules_yaml(FAST), encoding="utf-8")
        prometheus = PrometheusServer(stack_dir / "obs-prometheus",
                                      {"cdcwatch": [f"127.0.0.1:{serve.port}"], "cdcwatch-spark": [f"127.0.0.1:{job.metrics_port}"]},
                                      [rules], f"127.0.0.1:{alertmanager.port}", interval=SCRAPE)
        prometheus.start()
        started.append(prometheus)

        def traffic() -> None:
            next_id = 1000
            while not stop_traffic.wait(0.5):
                postgres.sql(f"INSERT INTO obs_orders VALUES ({next_id}, 1); UPDATE obs_orders SET amount = amount + 1 "
                             f"WHERE id = {next_id % 300 + 1}")
                next_id += 1

        threading.Thread(target=traffic, daemon=True).start()
        yield {"prometheus": prometheus, "webhook": webhook, "maria": maria, "api": PrometheusApi(prometheus.url)}
    finally:
        stop_traffic.set()
        for component in reversed(started):
            component.stop()
        webhook.close()
        postgres.drop_slot("obs_slot")


def missing_panels(api: PrometheusApi) -> list[str]:
    """Panels (dashboard: title: expr) whose query returns no series over the last 5 minutes (but those that
    have series only when something fails or a component this stack lacks is there)."""
    missing = []
    end = time.time()
    conditional = conditional_exprs(MixinConfig())
    for name, model in build_dashboards(MixinConfig()).items():
        values = resolve_variables(api, model)
        for panel in model["panels"]:
            for target in panel.get("targets", []):
                if target["expr"] not in conditional and not api.query_range(substitute(target["expr"], values), end - 300, end, 5):
                    missing.append(f"{name}: {panel['title']}: {target['expr']}")
    return missing


def test_every_dashboard_panel_returns_series_from_the_live_pipeline(observed) -> None:
    api = observed["api"]
    try:
        wait_for(lambda: not missing_panels(api), 240, "every panel to have data", interval=3)
    except Exception:
        pytest.fail("panels without data:\n" + "\n".join(missing_panels(api)))


def test_the_canary_and_the_listener_agree_within_the_canarys_interval(observed) -> None:
    """On a Spark pipeline both tell how far the target is: the newest canary it holds and the listener's newest
    applied change (the canary's own changes, written every second, among them) lie within one canary interval of
    each other, give or take what one batch moves them by. Prometheus reads the two up to a scrape interval apart,
    and a batch may finish in between, moving the one read later by up to its own length; and the listener reports a
    batch once it has finished, while its rows (the canary among them) are in the target from the batch's merge on.
    So either may be ahead by the scrape interval plus the longest batch of the window (the upper bound of its
    duration histogram's bucket); the listener by one canary interval more."""
    api = observed["api"]
    gap = ('max(cdcwatch_spark_newest_applied_change_timestamp_seconds{server="obs"}) - '
           'max(cdcwatch_canary_target_timestamp_seconds{server="obs"})')
    scrape = float(SCRAPE.rstrip("s"))

    def window() -> tuple[list, float] | None:
        end = time.time()
        points = api.query_range(gap, end - 30, end, scrape)
        return (points, end) if points and len(points[0]["values"]) >= 10 else None

    points, end = wait_for(window, 120, "30 s of both readings")
    longest = api.query("histogram_quantile(1, sum by (le) (increase(cdcwatch_spark_batch_duration_seconds_bucket"
                        f"[{30 + 2 * scrape:g}s] @ {end:.3f})))")
    batch = float(longest[0]["value"][1])
    gaps = [float(value) for _, value in points[0]["values"]]
    assert all(-(scrape + batch) <= g <= CANARY_INTERVAL + scrape + batch for g in gaps), (gaps, batch)


def test_every_rule_evaluates_without_error(observed) -> None:
    api = observed["api"]

    def evaluated() -> list[dict]:
        rules = [r for g in api.get("/api/v1/rules")["groups"] for r in g["rules"]]
        return rules if rules and all(r.get("lastEvaluation", "").startswith("20") for r in rules) else []

    rules = wait_for(evaluated, 60, "every rule to be evaluated")
    assert len(rules) == len(rules_yaml(FAST).split("- alert:")) - 1 + rules_yaml(FAST).count("- record:")
    broken = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert not broken, broken


def test_preview_renders_a_png_per_dashboard(observed, tmp_path: Path) -> None:
    index = render_preview(observed["prometheus"].url, MixinConfig(), tmp_path, "10m")
    images = sorted(tmp_path.glob("*.png"))
    assert [p.stem for p in images] == sorted(m.removesuffix(".json") for m in build_dashboards(MixinConfig()))
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 20_000 for p in images)
    assert all(p.name in index.read_text() for p in images)


def test_killed_connector_jvm_alerts_and_resolves_through_alertmanager(observed) -> None:
    webhook, maria = observed["webhook"], observed["maria"]
    api = observed["api"]
    wait_for(lambda: api.query('cdcwatch_up{target="maria"} == 1'), 60, "the MySQL connector target up in Prometheus")
    killed = time.time()
    maria.kill()
    firing = wait_for(lambda: webhook.find("firing", alertname="CdcwatchTargetDown", target="maria"), 90,
                      "the CdcwatchTargetDown notification")
    assert firing.labels["severity"] == "warning" and firing.labels["collector"] == "debezium"
    assert "maria" in firing.annotations["summary"] and firing.annotations["runbook_url"].endswith("#cdcwatchtargetdown")
    print(f"\nfiring notification {firing.received - killed:.1f}s after kill -9")
    maria.start()
    restarted = time.time()
    resolved = wait_for(lambda: webhook.find("resolved", alertname="CdcwatchTargetDown", target="maria"), 120,
                        "the resolved notification")
    print(f"resolved notification {resolved.received - restarted:.1f}s after the restart")
