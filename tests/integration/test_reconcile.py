"""The reconcile collector on real servers: a real Debezium connector's events applied by the reference apply
target's own merge (`PostgresTarget`, position-guarded, as the Spark job applies them; Kafka and Spark are left out
here, the demo's `target-drift` scenario runs the whole pipeline), compared by a real `cdcwatch serve`.

- PostgreSQL → PostgreSQL (apply job's rows): under live traffic, with the connector killed -9 and restarted
  (a real re-delivery from its last flushed offset) and a batch applied twice, no divergence is ever reported;
  rows then written behind the pipeline's back, next to keys live traffic changes in the same second, are reported
  by kind and count exactly, and agree again after a repair.
- MariaDB → PostgreSQL (apply job's rows): every column type of the normalisation agrees across the engines, and
  injected divergences are counted exactly.
- The row budget, measured from PostgreSQL's own statistics (index tuples read on the source table), is held, no
  sequential scan is made, and a side that is down is `cdcwatch_up 0` with no divergence figure.
"""

from __future__ import annotations

import random
import threading
import time

import psycopg
import pytest

from devstack.configs import exporter_config, reconcile_pair, reconcile_side
from devstack.debezium import DebeziumProcess, mysql_connector_properties, postgres_connector_properties
from devstack.procs import StackError, free_port, wait_for
from tests.integration.applier import Applier
from tests.integration.conftest import promtool_check, value

pytestmark = pytest.mark.integration

KINDS = ("missing", "extra", "different")


def diverged(values, pair: str) -> dict[str, float | None]:
    return {kind: value(values, "cdcwatch_reconcile_rows_diverged", target=pair, kind=kind) for kind in KINDS}


def scrape_until(serve, holds, timeout: float, what: str, pair: str = "items") -> dict:
    """The first scrape for which `holds(values)`; on a timeout, what the pair reported last."""
    last: list[dict] = []

    def check() -> dict | None:
        values = serve.scrape()
        last[:] = [values]
        return values if holds(values) else None

    try:
        return wait_for(check, timeout, what, interval=0.3)
    except StackError as exc:
        shown = {name: value(last[0], name, target=pair) for name in (
            "cdcwatch_reconcile_rows_suspect", "cdcwatch_reconcile_freshness_gate_open",
            "cdcwatch_reconcile_freshness_readable", "cdcwatch_reconcile_rechecks_held_total")} if last else {}
        raise StackError(f"{exc}; last: diverged {diverged(last[0], pair) if last else None}, {shown}") from None


def passes_after(serve, pair: str, moment: float, count: int = 1, timeout: float = 90) -> dict:
    """A scrape taken once `count` full passes have ended after `moment` (wall clock)."""
    ends: set[float] = set()

    def ended() -> dict | None:
        values = serve.scrape()
        end = value(values, "cdcwatch_reconcile_last_pass_timestamp_seconds", target=pair)
        if end is not None and end > moment:
            ends.add(end)
        return values if len(ends) >= count else None

    return wait_for(ended, timeout, f"{count} passes of {pair}", interval=0.3)


PG_TABLE = ("CREATE TABLE rc_items (id int PRIMARY KEY, name text, qty int, price numeric(10, 2), seen timestamptz, "
            "born timestamp(3), flag boolean, day date, ratio double precision)")
PG_SEED = ("INSERT INTO rc_items SELECT g, 'name ' || g || ' ü', g % 7, g * 1.25, now() - g * interval '1 minute 0.123456 s',"
           " '2001-02-03 04:05:06.789'::timestamp + g * interval '1 day', g % 2 = 0, date '1999-12-31' + g, g / 3.0 "
           "FROM generate_series(1, 600) g")
INJECTED = {"missing": [10, 11], "different": [20], "extra": [100000]}
NEIGHBOURS = [9, 12, 19, 21, 599]
"""Keys live traffic keeps changing next to the injected ones."""


def traffic(dsn: str, stop: threading.Event, keys: list[int], errors: list[BaseException]) -> None:
    """Updates, deletes and re-inserts on `keys`, about 40 per second, until `stop`."""
    generator = random.Random(30)
    try:
        with psycopg.connect(dsn, autocommit=True) as connection:
            while not stop.wait(0.025):
                key = generator.choice(keys)
                action = generator.random()
                if action < 0.7:
                    connection.execute("UPDATE rc_items SET qty = qty + 1, name = md5(random()::text), seen = now() "
                                       "WHERE id = %s", (key,))
                elif action < 0.85:
                    connection.execute("DELETE FROM rc_items WHERE id = %s", (key,))
                else:
                    connection.execute("INSERT INTO rc_items VALUES (%s, 'back', 1, 2.50, now(), now(), true, "
                                       "current_date, 0.5) ON CONFLICT (id) DO UPDATE SET qty = 0", (key,))
    except BaseException as exc:  # reported by the test
        errors.append(exc)


def test_postgres_to_apply_target_no_false_alarm_under_replay_then_exact_counts(postgres, stack_dir, serve_factory) -> None:
    dsn = f"host=127.0.0.1 port={postgres.port} user=postgres dbname=postgres"
    postgres.sql(f"DROP TABLE IF EXISTS rc_items; DROP SCHEMA IF EXISTS rc_apply CASCADE; {PG_TABLE}; {PG_SEED}")
    state = stack_dir / "dbz-reconcile-pg"
    properties = postgres_connector_properties(state, postgres.port, "rcsrv", "public.rc_items", slot="rc_slot")
    properties |= {"decimal.handling.mode": "string", "heartbeat.interval.ms": "500"}
    connector = DebeziumProcess(state, free_port(), properties)
    connector.start()
    applier = Applier(dsn, "rc_apply", connector.events_file)
    stop_traffic, errors = threading.Event(), []
    try:
        wait_for(lambda: postgres.sql("SELECT count(*) FROM rc_apply.rows WHERE NOT deleted") == "600", 90, "the snapshot applied")
        source = reconcile_side("postgres", postgres.port, "postgres", table="public.rc_items", rows_per_second=20000)
        target = reconcile_side("postgres", postgres.port, "postgres", format="apply", apply_schema="rc_apply")
        serve = serve_factory(exporter_config(reconcile=[reconcile_pair(
            "items", source, target, chunk_rows=100, settle_seconds=1.5, confirm_rechecks=2, pass_interval_seconds=0,
            freshness_url=applier.freshness_url)]))
        # live traffic on every key but the ones injected later, the connector killed -9 in the middle
        live_keys = [k for k in range(1, 601) if k not in INJECTED["missing"] + INJECTED["different"]]
        runner = threading.Thread(target=traffic, args=(dsn, stop_traffic, live_keys, errors), daemon=True)
        runner.start()
        suspects_seen, started = 0.0, time.time()
        restarted: list[float] = []

        def restart() -> None:
            connector.start()  # re-delivers from its last flushed offset
            applier.step(replay=300)  # and the apply job re-runs a batch
            restarted.append(time.time())

        restarter = threading.Thread(target=restart, daemon=True)
        while not restarted or time.time() - restarted[0] < 8:  # scraped all along, the outage included
            values = serve.scrape()
            assert value(values, "cdcwatch_up", collector="reconcile", target="items") == 1
            assert diverged(values, "items") == dict.fromkeys(KINDS, 0.0), "a divergence reported under live traffic"
            assert not applier.errors, applier.errors
            suspects_seen = max(suspects_seen, value(values, "cdcwatch_reconcile_rows_suspect", target="items") or 0)
            elapsed = time.time() - started
            if elapsed > 6 and connector.alive() and not restarter.is_alive() and not restarted:
                connector.kill()
            elif elapsed > 12 and not restarter.is_alive() and not restarted:
                restarter.start()
            assert elapsed < 180, "the connector did not come back"
            time.sleep(0.3)
        assert suspects_seen > 0, "live traffic never made a chunk differ: the test proves nothing"
        # behind the pipeline's back, in the same second as traffic on the neighbouring keys
        stop_traffic.set()
        runner.join(10)
        neighbours_stop = threading.Event()
        runner = threading.Thread(target=traffic, args=(dsn, neighbours_stop, NEIGHBOURS, errors), daemon=True)
        runner.start()
        postgres.sql("DELETE FROM rc_apply.rows WHERE row_key IN ('[[\"id\",10]]', '[[\"id\",11]]');"
                     "UPDATE rc_apply.rows SET row = jsonb_set(row, '{name}', '\"tampered\"') WHERE row_key = '[[\"id\",20]]';"
                     "INSERT INTO rc_apply.rows (table_id, row_key, row, position, deleted) VALUES ('postgres.public.rc_items',"
                     " '[[\"id\",100000]]', '{\"id\": 100000, \"name\": \"stray\"}', '0', false)")
        expected = {kind: float(len(keys)) for kind, keys in INJECTED.items()}
        values = scrape_until(serve, lambda v: applier.running() and diverged(v, "items") == expected, 60,
                              "the injected divergences reported")
        assert value(values, "cdcwatch_reconcile_oldest_divergence_age_seconds", target="items") > 0
        values = passes_after(serve, "items", time.time(), count=2)
        assert diverged(values, "items") == expected  # and nothing more, with the neighbours still changing
        neighbours_stop.set()
        runner.join(10)
        assert not errors, errors
        assert not applier.errors, applier.errors
        log = serve.log.read_text(encoding="utf-8")
        assert "2 rows diverged (missing in the target), keys 10..11" in log
        assert "1 rows diverged (extra in the target), keys 100000..100000" in log
        promtool_check(serve.text())
        # repair: the extra row removed, the others re-sent by touching them at the source
        postgres.sql("DELETE FROM rc_apply.rows WHERE row_key = '[[\"id\",100000]]';"
                     "UPDATE rc_items SET qty = qty WHERE id IN (10, 11, 20)")
        values = scrape_until(serve, lambda v: applier.running() and diverged(v, "items") == dict.fromkeys(KINDS, 0.0), 60,
                              "the divergences resolved after the repair")
        assert value(values, "cdcwatch_reconcile_oldest_divergence_age_seconds", target="items") == 0
    finally:
        stop_traffic.set()
        applier.stop()
        connector.stop()
        postgres.drop_slot("rc_slot")


MARIA_TABLE = ("CREATE DATABASE IF NOT EXISTS rcshop; DROP TABLE IF EXISTS rcshop.items;"
               "CREATE TABLE rcshop.items (id INT PRIMARY KEY, name VARCHAR(40), qty INT, price DECIMAL(10, 2), "
               "seen TIMESTAMP(6) NULL, born DATETIME(3), flag TINYINT(1), day DATE, ratio DOUBLE) ENGINE=InnoDB;"
               "INSERT INTO rcshop.items SELECT seq, CONCAT('name ', seq, ' ü'), seq % 7, seq * 1.25,"
               " TIMESTAMP'2024-05-06 07:08:09.123456' - INTERVAL seq MINUTE, TIMESTAMP'2001-02-03 04:05:06.789' + "
               "INTERVAL seq DAY, seq % 2, DATE'1999-12-31' + INTERVAL seq DAY, IF(seq % 5 = 0, NULL, seq / 3) "
               "FROM rcshop.seq_1_to_300;")


def test_mariadb_to_apply_target_types_agree_and_divergences_counted(mariadb, postgres, stack_dir, serve_factory) -> None:
    dsn = f"host=127.0.0.1 port={postgres.port} user=postgres dbname=postgres"
    mariadb.root_sql(MARIA_TABLE)
    postgres.sql("DROP SCHEMA IF EXISTS rcm_apply CASCADE")
    state = stack_dir / "dbz-reconcile-maria"
    properties = mysql_connector_properties(state, mariadb.port, mariadb.user, mariadb.password, "rcmsrv", "rcshop")
    properties |= {"database.server.id": "5431", "decimal.handling.mode": "string"}
    connector = DebeziumProcess(state, free_port(), properties)
    connector.start()
    applier = Applier(dsn, "rcm_apply", connector.events_file)
    try:
        wait_for(lambda: postgres.sql("SELECT count(*) FROM rcm_apply.rows WHERE NOT deleted") == "300", 90,
                 "the snapshot applied")
        source = reconcile_side("mysql", mariadb.port, mariadb.user, password=mariadb.password, table="rcshop.items",
                                rows_per_second=20000)
        target = reconcile_side("postgres", postgres.port, "postgres", format="apply", apply_schema="rcm_apply")
        serve = serve_factory(exporter_config(reconcile=[reconcile_pair(
            "maria", source, target, chunk_rows=50, settle_seconds=1, confirm_rechecks=2, pass_interval_seconds=0)]))
        values = passes_after(serve, "maria", time.time(), count=2)
        assert value(values, "cdcwatch_up", collector="reconcile", target="maria") == 1
        assert diverged(values, "maria") == dict.fromkeys(KINDS, 0.0)
        assert value(values, "cdcwatch_reconcile_rows_suspect", target="maria") == 0, "a type normalises differently"
        postgres.sql("DELETE FROM rcm_apply.rows WHERE row_key = '[[\"id\",7]]';"
                     "UPDATE rcm_apply.rows SET row = jsonb_set(row, '{price}', '\"9.99\"') WHERE row_key IN "
                     "('[[\"id\",8]]', '[[\"id\",250]]');"
                     "INSERT INTO rcm_apply.rows (table_id, row_key, row, position, deleted) VALUES ('rcshop.items', "
                     "'[[\"id\",5000]]', '{\"id\": 5000}', '0', false)")
        expected = {"missing": 1.0, "extra": 1.0, "different": 2.0}
        wait_for(lambda: diverged(serve.scrape(), "maria") == expected, 60, "the injected divergences reported")
        values = passes_after(serve, "maria", time.time())
        assert diverged(values, "maria") == expected
    finally:
        applier.stop()
        connector.stop()


def index_reads(postgres, table: str) -> tuple[int, int]:
    """Index tuples read and sequential scans on `table`, from PostgreSQL's cumulative statistics."""
    row = postgres.sql("SELECT pg_stat_clear_snapshot(); SELECT coalesce(sum(i.idx_tup_read), 0), "
                       f"max(t.seq_scan) FROM pg_stat_user_indexes i JOIN pg_stat_user_tables t USING (relid) "
                       f"WHERE t.relname = '{table}'").splitlines()[-1]
    reads, scans = row.split("|")
    return int(reads), int(scans)


def test_budget_held_on_the_source_by_its_own_statistics(postgres, serve_factory) -> None:
    budget, rows = 2000, 8000
    postgres.sql("DROP TABLE IF EXISTS rc_budget, rc_budget_copy;"
                 "CREATE TABLE rc_budget (id bigint PRIMARY KEY, body text);"
                 f"INSERT INTO rc_budget SELECT g, repeat('x', 50) || g FROM generate_series(1, {rows}) g;"
                 "CREATE TABLE rc_budget_copy AS SELECT * FROM rc_budget; ALTER TABLE rc_budget_copy ADD PRIMARY KEY (id)")
    postgres.sql("VACUUM ANALYZE rc_budget, rc_budget_copy")
    before, scans_before = index_reads(postgres, "rc_budget")

    def side(table: str) -> dict[str, object]:
        return reconcile_side("postgres", postgres.port, "postgres", rows_per_second=budget, table=f"public.{table}")

    serve = serve_factory(exporter_config(reconcile=[
        reconcile_pair("budget", side("rc_budget"), side("rc_budget_copy"), chunk_rows=200, pass_interval_seconds=600)]))
    samples: list[tuple[float, int]] = []

    def pass_done() -> dict | None:
        if not samples:  # the comparison starts at the first scrape
            samples.append((time.monotonic(), 0))
        values = serve.scrape()
        samples.append((time.monotonic(), index_reads(postgres, "rc_budget")[0] - before))
        return values if value(values, "cdcwatch_reconcile_last_pass_timestamp_seconds", target="budget") else None

    values = wait_for(pass_done, 120, "a full pass", interval=0.5)
    assert diverged(values, "budget") == dict.fromkeys(KINDS, 0.0)
    flushed: list[tuple[float, int]] = [(time.monotonic(), samples[-1][1])]

    def unchanged_for_a_while() -> int | None:
        reads = index_reads(postgres, "rc_budget")[0] - before
        if reads != flushed[-1][1]:
            flushed.append((time.monotonic(), reads))
        return reads if time.monotonic() - flushed[-1][0] > 2 else None

    read = wait_for(unchanged_for_a_while, 30, "the statistics flushed")
    scans = index_reads(postgres, "rc_budget")[1] - scans_before
    assert read >= 2 * rows, f"only {read} index reads: the pass did not read the table"
    rate = read / (samples[-1][0] - samples[0][0])  # from the first scrape to the scrape that saw the pass end
    assert rate <= budget * 1.1, f"{rate:.0f} rows/s read on the source, budget {budget}"
    assert scans == 0, f"{scans} sequential scans of the source table"


def test_a_pair_whose_side_is_down_is_up_0_with_no_divergence_figure(postgres, serve_factory) -> None:
    postgres.sql("DROP TABLE IF EXISTS rc_down; CREATE TABLE rc_down (id int PRIMARY KEY); INSERT INTO rc_down VALUES (1)")
    serve = serve_factory(exporter_config(reconcile=[reconcile_pair(
        "gone", reconcile_side("postgres", postgres.port, "postgres", table="public.rc_down"),
        reconcile_side("mysql", free_port(), "nobody", table="shop.items", statement_timeout_seconds=1))]))
    # down from the very first scrape: it waits (within its deadline) for the pair's first try of both sides
    values = serve.scrape()
    assert value(values, "cdcwatch_up", collector="reconcile", target="gone") == 0
    assert value(values, "cdcwatch_reconcile_rows_diverged", target="gone", kind="missing") is None
    assert value(values, "cdcwatch_target_failure_info", collector="reconcile", target="gone", failure="refused") == 1
