"""The `delta` kind end to end in the exporter: tables written by delta-rs (the `deltalake` package) into tmp_path,
configured as `delta:` targets, collected through the registry and scraped as Prometheus reads them; each table is a
target of its own, so a bad one is `up 0` with the table, the cause and the fix named while the others are served.
The reader's figures themselves are proven against independent readings in test_delta_log.py."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from wsgiref.util import setup_testing_defaults

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from cdcwatch.exporter import Exporter, build_collectors
from cdcwatch.server import build_app
from cdcwatch.validation import parse_config
from devstack.samples import parse, value

pytestmark = pytest.mark.delta  # deltalake and pyarrow: the test extra (the main suite runs them)

COMMITTED = datetime(2026, 12, 1, 10, 0, 0, 250000, tzinfo=UTC)


def changes(ids: range, shift: int = 0) -> pa.Table:
    """Rows as an apply job writes them: the key, a value, and the source commit time of each row's last change."""
    return pa.table({"id": pa.array(list(ids), pa.int64()), "qty": pa.array([i % 7 for i in ids], pa.int32()),
                     "__source_ts": pa.array([COMMITTED + timedelta(seconds=i + shift) for i in ids],
                                             pa.timestamp("us", tz="UTC"))})


def config(tables: dict[str, Path], column: str = "__source_ts") -> str:
    entries = "".join(f"  - name: {name}\n    uri: {path}\n    commit_time_column: {column}\n"
                      for name, path in tables.items())
    return f"delta:\n{entries}"


def scrape(text: str) -> dict:
    """One scrape of /metrics, as Prometheus asks for it, from an exporter of the configuration `text`."""
    exporter = Exporter(build_collectors(parse_config(text)))
    environ = {"PATH_INFO": "/metrics"}
    setup_testing_defaults(environ)
    try:
        return parse(b"".join(build_app(exporter)(environ, lambda status, headers: None)).decode())
    finally:
        exporter.close()


def test_each_table_is_a_target_with_its_figures_and_a_bad_one_hides_no_other(tmp_path: Path) -> None:
    items, orders = tmp_path / "items", tmp_path / "orders"
    write_deltalake(str(items), changes(range(10)))
    DeltaTable(str(items)).merge(changes(range(5, 15), shift=100), "t.id = s.id", source_alias="s",
                                 target_alias="t").when_matched_update_all().when_not_matched_insert_all().execute()
    write_deltalake(str(orders), changes(range(3)))
    values = scrape(config({"items": items, "orders": orders, "missing": tmp_path / "nothing"}))
    assert value(values, "cdcwatch_up", collector="delta", target="items") == 1
    assert value(values, "cdcwatch_up", collector="delta", target="orders") == 1
    assert value(values, "cdcwatch_up", collector="delta", target="missing") == 0
    assert value(values, "cdcwatch_delta_table_version", target="items") == DeltaTable(str(items)).version() == 1
    assert value(values, "cdcwatch_delta_rows_total", target="items", operation="MERGE", kind="updated") == 5
    assert value(values, "cdcwatch_delta_rows_total", target="items", operation="MERGE", kind="inserted") == 5
    assert value(values, "cdcwatch_delta_commits_total", target="items", operation="MERGE") == 1
    live = pa.table(DeltaTable(str(items)).get_add_actions(flatten=True)).column("size_bytes").to_pylist()
    assert value(values, "cdcwatch_delta_files", target="items") == len(live)
    assert value(values, "cdcwatch_delta_size_bytes", target="items") == sum(live)
    # the newest source commit time the table holds: the merged row 14, shifted by 100 s
    newest = (COMMITTED + timedelta(seconds=114)).timestamp()
    assert value(values, "cdcwatch_delta_newest_applied_change_timestamp_seconds", target="items") == newest
    assert value(values, "cdcwatch_delta_newest_applied_change_timestamp_seconds", target="orders") == \
        (COMMITTED + timedelta(seconds=2)).timestamp()


def test_check_names_the_table_the_cause_and_the_fix(tmp_path: Path) -> None:
    table = tmp_path / "items"
    write_deltalake(str(table), changes(range(3)))
    file = tmp_path / "cdcwatch.yml"
    file.write_text(config({"items": table, "plain": tmp_path}, column="__source_ts") +
                    f"  - name: typo\n    uri: {table}\n    commit_time_column: source_ts\n")
    done = subprocess.run([sys.executable, "-m", "cdcwatch.cli", "check", "--config.file", str(file)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr  # a target down, not a bad configuration
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.split()[:1] in (["items"], ["plain"],
                                                                                                  ["typo"])}
    assert [lines[name].split()[2] for name in ("items", "plain", "typo")] == ["yes", "NO", "NO"], lines
    assert "_delta_log" in lines["plain"] and str(tmp_path) in lines["plain"], lines
    assert "source_ts" in lines["typo"] and "__source_ts" in lines["typo"], lines  # the column and those it has
    assert "Traceback" not in done.stderr


def test_a_canary_in_a_delta_table_is_read_from_its_log(tmp_path: Path) -> None:
    """The apply job's Delta copy of the canary table as a canary's target: its newest time is the canary column's
    largest value, read from the log's statistics, and follows each new commit; a table not written yet is an
    unreadable canary (the collection itself fails, naming the side), never a crash."""
    canary = tmp_path / "postgres.public.cdc_canary"
    text = ("canary:\n  - name: lake\n    server: inventory\n    interval_seconds: 10\n    column: __source_ts\n"
            f"    target: {{engine: delta, uri: {canary}}}\n")
    values = scrape(text)
    assert value(values, "cdcwatch_up", collector="canary", target="lake") == 0
    write_deltalake(str(canary), changes(range(1)))
    values = scrape(text)
    assert value(values, "cdcwatch_canary_readable", target="lake", side="target") == 1
    assert value(values, "cdcwatch_canary_target_timestamp_seconds", target="lake") == COMMITTED.timestamp()
    DeltaTable(str(canary)).merge(changes(range(1), shift=30), "t.id = s.id", source_alias="s",
                                  target_alias="t").when_matched_update_all().execute()
    assert value(scrape(text), "cdcwatch_canary_target_timestamp_seconds", target="lake") == \
        (COMMITTED + timedelta(seconds=30)).timestamp()
