"""The canary on real servers, without Spark: a real Debezium connector writes the canary at the source with its
`heartbeat.action.query` at each heartbeat; its changes are applied to the reference apply target (the apply job's
merge, as in test_reconcile) and, by a sink of the test's own, to a typed MariaDB table; a real `cdcwatch serve`
reads all three.

- Each reading equals an independent reading of the same row: the canary only moves forward, so a reading taken
  between two independent ones lies between them.
- A read is one aggregate on an index, no write, no sequential scan (PostgreSQL's own statistics), and its p50 is
  under the budget of 5 ms.
- When the sink stops, the target's age grows while the source's canary stays fresh; when the connector stops, the
  source's canary stops too (it writes it).
"""

from __future__ import annotations

import statistics
import threading
import time
from datetime import UTC, datetime

import pytest

from devstack.configs import canary, exporter_config, reconcile_side
from devstack.debezium import DebeziumProcess, postgres_connector_properties
from devstack.procs import free_port, wait_for
from tests.integration.applier import Applier
from tests.integration.conftest import promtool_check, value

pytestmark = pytest.mark.integration

INTERVAL = 1.0
"""The connector's heartbeat interval: it writes the canary this often."""
UPSERT = "INSERT INTO cn_canary (id, ts) VALUES (1, now()) ON CONFLICT (id) DO UPDATE SET ts = EXCLUDED.ts"


def source_reading(postgres) -> float:
    return float(postgres.sql("SELECT extract(epoch FROM ts) FROM cn_canary WHERE id = 1"))


def apply_reading(postgres) -> float:
    return float(postgres.sql("SELECT extract(epoch FROM (row->>'ts')::timestamptz) FROM cn_apply.rows "
                              "WHERE table_id = 'postgres.public.cn_canary' AND NOT deleted"))


class MariaSink:
    """A sink of the test's own: copies the canary the apply target holds into a typed MariaDB table, until stopped."""

    def __init__(self, postgres, mariadb) -> None:
        self.postgres, self.mariadb = postgres, mariadb
        self.stopping = threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while not self.stopping.wait(0.2):
                ts = self.postgres.sql("SELECT row->>'ts' FROM cn_apply.rows WHERE table_id = 'postgres.public.cn_canary'")
                if ts:  # Debezium's ZonedTimestamp: ISO 8601 in UTC
                    utc = datetime.fromisoformat(ts.replace("Z", "+00:00")).astimezone(UTC)
                    self.mariadb.root_sql(f"INSERT INTO cnsink.canary (id, ts) VALUES (1, '{utc:%Y-%m-%d %H:%M:%S.%f}') "
                                          "ON DUPLICATE KEY UPDATE ts = VALUES(ts)")
        except BaseException as exc:  # reported by the test
            self.errors.append(exc)

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)


def maria_reading(mariadb) -> float:
    """The row's DATETIME(6), as UTC."""
    at = mariadb.root_sql("SELECT DATE_FORMAT(ts, '%Y-%m-%d %H:%i:%s.%f') FROM cnsink.canary WHERE id = 1")
    return datetime.strptime(at, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=UTC).timestamp()


def scrape_when(serve, holds, what: str, timeout: float = 30):
    """The first scrape for which `holds(values)`."""
    return wait_for(lambda: next((v for v in [serve.scrape()] if holds(v)), None), timeout, what, interval=0.5)


def settled_stats(postgres, table: str, schema: str, quiet: float = 2.0) -> tuple[int, int, int]:
    """`table_stats` once they have not changed for `quiet` seconds."""
    seen: list[tuple[tuple[int, int, int], float]] = []

    def settled() -> tuple[int, int, int] | None:
        stats = table_stats(postgres, table, schema)
        if not seen or seen[-1][0] != stats:
            seen.append((stats, time.monotonic()))
        return stats if time.monotonic() - seen[-1][1] >= quiet else None

    return wait_for(settled, 30, f"the statistics of {schema}.{table} settled", interval=0.2)


def table_stats(postgres, table: str, schema: str = "public") -> tuple[int, int, int]:
    """Index scans, sequential scans and rows written on `table`, from PostgreSQL's cumulative statistics."""
    row = postgres.sql("SELECT pg_stat_clear_snapshot(); SELECT coalesce(idx_scan, 0), seq_scan, "
                       "n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables "
                       f"WHERE schemaname = '{schema}' AND relname = '{table}'").splitlines()[-1]
    return tuple(int(n) for n in row.split("|"))  # type: ignore[return-value]


def test_the_canary_read_where_it_lands_equals_the_row_and_tells_the_sink_from_the_source(
        postgres, mariadb, stack_dir, serve_factory) -> None:
    dsn = f"host=127.0.0.1 port={postgres.port} user=postgres dbname=postgres"
    postgres.sql("DROP TABLE IF EXISTS cn_canary, cn_items; DROP SCHEMA IF EXISTS cn_apply CASCADE;"
                 "CREATE TABLE cn_canary (id int PRIMARY KEY, ts timestamptz NOT NULL);"
                 # rows beside the canary in the apply job's ledger, as in any target: its read must use the index
                 "CREATE TABLE cn_items (id int PRIMARY KEY, name text);"
                 "INSERT INTO cn_items SELECT g, 'item ' || g FROM generate_series(1, 3000) g")
    mariadb.root_sql("CREATE DATABASE IF NOT EXISTS cnsink; DROP TABLE IF EXISTS cnsink.canary;"
                     "CREATE TABLE cnsink.canary (id INT PRIMARY KEY, ts DATETIME(6) NOT NULL) ENGINE=InnoDB;"
                     f"GRANT SELECT ON cnsink.* TO '{mariadb.user}'@'%'")
    state = stack_dir / "dbz-canary"
    properties = postgres_connector_properties(state, postgres.port, "cnsrv", "public.cn_canary,public.cn_items",
                                               slot="cn_slot")
    properties |= {"heartbeat.interval.ms": str(int(INTERVAL * 1000)), "heartbeat.action.query": UPSERT}
    connector = DebeziumProcess(state, free_port(), properties)
    connector.start()
    applier = Applier(dsn, "cn_apply", connector.events_file)
    sink = MariaSink(postgres, mariadb)
    source_table = reconcile_side("postgres", postgres.port, "postgres", table="public.cn_canary")
    canaries = [
        canary("ledger", "cnsrv", INTERVAL, reconcile_side("postgres", postgres.port, "postgres", format="apply",
                                                          apply_schema="cn_apply"), source_table),
        canary("maria", "cnsrv-maria", INTERVAL, reconcile_side("mysql", mariadb.port, mariadb.user,
                                                               password=mariadb.password, table="cnsink.canary"),
               source_table),
    ]
    try:
        wait_for(lambda: applier.running() and postgres.sql(
            "SELECT count(*) FROM cn_apply.rows WHERE table_id = 'postgres.public.cn_canary'") == "1", 90,
            "the first canary applied")
        wait_for(lambda: mariadb.root_sql("SELECT count(*) FROM cnsink.canary") == "1", 30, "the first canary in MariaDB")
        serve = serve_factory(exporter_config(canary=canaries))
        for _ in range(3):  # each reading between two independent readings of the same row
            before = (source_reading(postgres), apply_reading(postgres), maria_reading(mariadb))
            scraped_at = time.time()
            values = serve.scrape()
            after = (source_reading(postgres), apply_reading(postgres), maria_reading(mariadb))
            for name in ("ledger", "maria"):
                assert value(values, "cdcwatch_up", collector="canary", target=name) == 1
                assert value(values, "cdcwatch_canary_readable", target=name, side="target") == 1
                assert before[0] <= value(values, "cdcwatch_canary_source_timestamp_seconds", target=name) <= after[0]
            ledger = value(values, "cdcwatch_canary_target_timestamp_seconds", target="ledger")
            maria = value(values, "cdcwatch_canary_target_timestamp_seconds", target="maria")
            assert before[1] <= ledger <= after[1]
            assert before[2] - 1e-6 <= maria <= after[2] + 1e-6  # DATETIME(6): microseconds, as the row holds them
            age = value(values, "cdcwatch_canary_target_age_seconds", target="ledger")
            assert scraped_at - ledger <= age <= time.time() - ledger
            assert value(values, "cdcwatch_canary_interval_seconds", target="ledger") == INTERVAL
        assert value(values, "cdcwatch_canary_target_age_seconds", target="ledger", server="cnsrv",
                     topic="cnsrv.public.cn_canary") is not None
        promtool_check(serve.text())

        # the cost: one indexed aggregate per read, nothing written, no sequential scan (its time is a speed figure,
        # printed, not a bound); counted on a fresh exporter, once every earlier reader's statistics are in (a kept
        # connection reports them late)
        applier.stop()
        sink.stop()
        serve.stop()
        postgres.sql("ANALYZE cn_apply.rows")
        idx, seq, written = settled_stats(postgres, "rows", "cn_apply")
        serve = serve_factory(exporter_config(canary=canaries[:1]))
        durations = []
        for _ in range(40):
            durations.append(value(serve.scrape(), "cdcwatch_canary_read_duration_seconds", target="ledger", side="target"))
        idx_after, seq_after, written_after = wait_for(
            lambda: next((s for s in [table_stats(postgres, "rows", "cn_apply")] if s[0] - idx >= 40), None), 30,
            "the statistics flushed")
        assert (idx_after - idx, seq_after - seq, written_after - written) == (40, 0, 0)
        print(f"\ncanary read p50 {statistics.median(durations) * 1000:.1f} ms")

        # the sink stopped: the target ages while the source's canary stays fresh
        values = scrape_when(serve, lambda v: value(v, "cdcwatch_canary_target_age_seconds", target="ledger") > 5 * INTERVAL,
                             "the target's canary aging")
        assert time.time() - value(values, "cdcwatch_canary_source_timestamp_seconds", target="ledger") < 3 * INTERVAL
        # the connector stopped: it wrote the canary, so the source's canary ages too
        connector.stop()
        values = scrape_when(serve, lambda v: time.time() - value(
            v, "cdcwatch_canary_source_timestamp_seconds", target="ledger") > 5 * INTERVAL, "the source's canary aging")
        assert value(values, "cdcwatch_canary_readable", target="ledger", side="source") == 1
        assert not applier.errors and not sink.errors, (applier.errors, sink.errors)
    finally:
        sink.stop()
        applier.stop()
        connector.stop()
        postgres.drop_slot("cn_slot")


def test_a_target_down_and_a_missing_table_are_named_and_the_source_still_reported(postgres, serve_factory) -> None:
    postgres.sql("DROP TABLE IF EXISTS cn_lone; CREATE TABLE cn_lone (id int PRIMARY KEY, ts timestamptz);"
                 "INSERT INTO cn_lone VALUES (1, now())")
    source = reconcile_side("postgres", postgres.port, "postgres", table="public.cn_lone")
    serve = serve_factory(exporter_config(canary=[
        canary("down", "a", 10, reconcile_side("mysql", free_port(), "nobody", table="sink.canary",
                                               statement_timeout_seconds=1), source),
        canary("no-table", "b", 10, reconcile_side("postgres", postgres.port, "postgres", table="public.cn_nowhere"))]))
    values = serve.scrape()
    assert value(values, "cdcwatch_up", collector="canary", target="down") == 1  # the source still answers
    assert value(values, "cdcwatch_canary_readable", target="down", side="target") == 0
    assert value(values, "cdcwatch_canary_readable", target="down", side="source") == 1
    assert value(values, "cdcwatch_canary_target_age_seconds", target="down") is None
    assert value(values, "cdcwatch_up", collector="canary", target="no-table") == 0
    assert "table public.cn_nowhere not found" in serve.log.read_text(encoding="utf-8")
