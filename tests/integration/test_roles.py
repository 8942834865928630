"""The roles docs/troubleshooting.md creates are enough: its PostgreSQL and MariaDB statements, run as shown on real
servers, give users that the postgres, mysql and reconcile collectors read with, every target up. (Its MySQL 8
statements cannot run here: no MySQL server; MariaDB's differ only in BINLOG MONITOR.)"""

from __future__ import annotations

import pytest

from devstack.configs import exporter_config, mysql_source, postgres_source, reconcile_pair, reconcile_side
from tests.integration.conftest import value
from tests.unit.test_docs import ROOT, blocks

pytestmark = pytest.mark.integration

PAGE = ROOT / "docs" / "troubleshooting.md"


TABLES = {"public.customers": "public.roles_customers", "public.cdc_canary": "public.roles_canary",
          "shop.customers": "roleshop.customers"}
"""The page's tables, under names no other test module's connector captures on the shared servers."""


def _own_tables(sql: str) -> str:
    for shown, own in TABLES.items():
        sql = sql.replace(shown, own)
    return sql


def test_the_documented_roles_are_enough(postgres, mariadb, serve_factory) -> None:
    postgres_sql, _mysql8_sql, mariadb_sql = (_own_tables(sql) for sql in blocks(PAGE, "sql"))
    postgres.sql("CREATE TABLE IF NOT EXISTS public.roles_customers (id int PRIMARY KEY, name text);"
                 "CREATE TABLE IF NOT EXISTS public.roles_canary (id int PRIMARY KEY, ts timestamptz);"
                 "INSERT INTO public.roles_customers VALUES (1, 'one') ON CONFLICT DO NOTHING")
    postgres.sql("DROP OWNED BY cdcwatch; DROP ROLE cdcwatch" if postgres.sql(
        "SELECT count(*) FROM pg_roles WHERE rolname = 'cdcwatch'") == "1" else "SELECT 1")
    postgres.sql(postgres_sql)
    mariadb.root_sql("CREATE DATABASE IF NOT EXISTS roleshop; CREATE TABLE IF NOT EXISTS roleshop.customers "
                     "(id int PRIMARY KEY, name varchar(20)); INSERT IGNORE INTO roleshop.customers VALUES (1, 'one');"
                     "DROP USER IF EXISTS 'cdcwatch'@'%'")
    mariadb.root_sql(mariadb_sql)
    serve = serve_factory(exporter_config(
        postgres=[postgres_source("roles-pg", postgres.port, user="cdcwatch", password="change-me")],
        mysql=[mysql_source("roles-my", mariadb.port, "cdcwatch", password="change-me")],
        reconcile=[reconcile_pair(
            "roles", reconcile_side("postgres", postgres.port, "cdcwatch", password="change-me", table="public.roles_customers"),
            reconcile_side("mysql", mariadb.port, "cdcwatch", password="change-me", table="roleshop.customers"))]))
    values = serve.scrape()
    assert value(values, "cdcwatch_up", collector="postgres", target="roles-pg") == 1
    assert value(values, "cdcwatch_postgres_wal_directory_bytes", target="roles-pg") is not None  # pg_ls_waldir()
    assert value(values, "cdcwatch_up", collector="mysql", target="roles-my") == 1
    assert value(values, "cdcwatch_mysql_binlog_files", target="roles-my") >= 1  # SHOW BINARY LOGS
    assert value(values, "cdcwatch_up", collector="reconcile", target="roles") == 1
