"""Each mapping row against the recorded real dumps and the seed attribute tables."""

from __future__ import annotations

import re

import pytest

from cdcwatch.debezium.mapping import RULES, SNAPSHOT_STATE_RULE, Conversion, convert, requested_attributes
from tests.fixtures import SEEDS, read_dump


def samples(attributes):
    return {(s.metric, s.labels): s.value for s in convert(attributes)}


def bean(dump, context):
    return next(b for b in read_dump(dump) if b.keys["context"] == context)


def test_postgres_streaming_after_dml():
    got = samples(bean("postgres-mbeans-after-dml.tsv", "streaming").attributes)
    assert got[("cdcwatch_debezium_events_seen_total", ())] == 37
    assert got[("cdcwatch_debezium_events_by_operation_total", (("operation", "create"),))] == 20
    assert got[("cdcwatch_debezium_events_by_operation_total", (("operation", "update"),))] == 10
    assert got[("cdcwatch_debezium_events_by_operation_total", (("operation", "delete"),))] == 7
    assert got[("cdcwatch_debezium_connected", ())] == 1
    assert got[("cdcwatch_debezium_lag_behind_source_seconds", ())] == pytest.approx(0.103)
    assert got[("cdcwatch_debezium_lag_behind_source_min_seconds", ())] == pytest.approx(0.081)
    assert got[("cdcwatch_debezium_lag_behind_source_max_seconds", ())] == pytest.approx(0.103)
    assert got[("cdcwatch_debezium_lag_behind_source_average_seconds", ())] == pytest.approx(0.09156756756756756)
    assert got[("cdcwatch_debezium_lag_behind_source_percentile_seconds", (("percentile", "99"),))] == pytest.approx(0.10398726693863553)
    assert got[("cdcwatch_debezium_seconds_since_last_event", ())] == pytest.approx(10.942)
    assert got[("cdcwatch_debezium_committed_transactions_total", ())] == 3
    assert got[("cdcwatch_debezium_source_position", (("key", "lsn"),))] == 26670016
    assert got[("cdcwatch_debezium_captured_tables", ())] == 2
    assert got[("cdcwatch_debezium_queue_capacity", ())] == 8192
    assert got[("cdcwatch_debezium_queue_remaining_capacity", ())] == 8192
    assert got[("cdcwatch_debezium_queue_size_bytes", ())] == 0
    # sentinels give no sample: -1 skipped-unchanged counter, MaxQueueSizeInBytes 0 (unlimited)
    assert not any(m == "cdcwatch_debezium_unchanged_events_skipped_total" for m, _ in got)
    assert not any(m == "cdcwatch_debezium_queue_max_size_bytes" for m, _ in got)
    # empty per-table maps give no sample; the streaming bean has no snapshot state
    assert not any(m in ("cdcwatch_debezium_table_events_total", "cdcwatch_debezium_snapshot_state") for m, _ in got)


def test_postgres_snapshot_after_dml():
    got = samples(bean("postgres-mbeans-after-dml.tsv", "snapshot").attributes)
    assert got[("cdcwatch_debezium_snapshot_rows_scanned_total", (("table", "public.customers"),))] == 1000
    assert got[("cdcwatch_debezium_snapshot_rows_scanned_total", (("table", "public.orders"),))] == 500
    states = {labels[0][1]: v for (m, labels), v in got.items() if m == "cdcwatch_debezium_snapshot_state"}
    assert states == {"aborted": 0, "paused": 0, "running": 0, "completed": 1, "skipped": 0, "not_started": 0}
    assert got[("cdcwatch_debezium_snapshot_tables", ())] == 2
    assert got[("cdcwatch_debezium_snapshot_remaining_tables", ())] == 0
    assert got[("cdcwatch_debezium_snapshot_duration_seconds", ())] == 1
    assert got[("cdcwatch_debezium_snapshot_paused_duration_seconds", ())] == 0
    assert got[("cdcwatch_debezium_incremental_snapshot_chunk_active", ())] == 0
    assert got[("cdcwatch_debezium_events_seen_total", ())] == 1500


def test_a_completed_snapshot_has_no_table_left_though_debezium_still_counts_its_signal_table():
    """Debezium 3.6 with a signal table captured: 3 tables, 1 "remaining" after completing (the signal table)."""
    attributes = {**bean("postgres-mbeans-after-dml.tsv", "snapshot").attributes, "TotalTableCount": 3,
                  "RemainingTableCount": 1}
    assert samples(attributes)[("cdcwatch_debezium_snapshot_remaining_tables", ())] == 0
    running = {**attributes, "SnapshotCompleted": False, "SnapshotRunning": True}
    assert samples(running)[("cdcwatch_debezium_snapshot_remaining_tables", ())] == 1


def test_postgres_after_restart_snapshot_skipped_and_no_sentinels():
    snapshot = samples(bean("postgres-mbeans-after-restart.tsv", "snapshot").attributes)
    assert snapshot[("cdcwatch_debezium_snapshot_state", (("state", "skipped"),))] == 1
    assert snapshot[("cdcwatch_debezium_snapshot_state", (("state", "completed"),))] == 0
    assert ("cdcwatch_debezium_seconds_since_last_event", ()) not in snapshot  # -1
    streaming = samples(bean("postgres-mbeans-after-restart.tsv", "streaming").attributes)
    assert streaming[("cdcwatch_debezium_lag_behind_source_seconds", ())] == pytest.approx(0.307)
    assert streaming[("cdcwatch_debezium_source_position", (("key", "lsn"),))] == 26984760


def test_mysql_schema_history_and_binlog():
    history = samples(bean("mysql-mbeans-with-schema-history.tsv", "schema-history").attributes)
    assert history[("cdcwatch_debezium_schema_history_state", (("state", "running"),))] == 1
    assert history[("cdcwatch_debezium_schema_history_state", (("state", "recovering"),))] == 0
    assert history[("cdcwatch_debezium_schema_history_changes_applied_total", ())] == 8
    assert history[("cdcwatch_debezium_schema_history_changes_recovered_total", ())] == 0
    assert history[("cdcwatch_debezium_schema_history_seconds_since_last_applied_change", ())] == pytest.approx(6.451)
    assert ("cdcwatch_debezium_schema_history_recovery_start_timestamp_seconds", ()) not in history  # -1
    assert ("cdcwatch_debezium_schema_history_seconds_since_last_recovered_change", ()) not in history  # -1
    streaming = samples(bean("mysql-mbeans-with-schema-history.tsv", "streaming").attributes)
    assert streaming[("cdcwatch_debezium_binlog_file_number", ())] == 4
    assert streaming[("cdcwatch_debezium_binlog_position_bytes", ())] == 1853
    assert streaming[("cdcwatch_debezium_binlog_gtid_mode_enabled", ())] == 0
    assert streaming[("cdcwatch_debezium_binlog_disconnects_total", ())] == 0
    assert streaming[("cdcwatch_debezium_rolled_back_transactions_total", ())] == 0
    assert streaming[("cdcwatch_debezium_source_position", (("key", "position"),))] == 1853
    assert ("cdcwatch_debezium_source_position", (("key", "filename"),)) not in streaming  # text, not a number
    snapshot = samples(bean("mysql-mbeans-with-schema-history.tsv", "snapshot").attributes)
    assert snapshot[("cdcwatch_debezium_snapshot_holding_global_lock", ())] == 0
    assert snapshot[("cdcwatch_debezium_snapshot_rows_scanned_total", (("table", "shop.products"),))] == 300


def test_every_recorded_attribute_has_a_rule():
    mapped = {r.attribute for r in RULES} | {a for _, a in SNAPSHOT_STATE_RULE.sources}
    for dump in ("postgres-mbeans-after-dml.tsv", "postgres-mbeans-after-restart.tsv", "mysql-mbeans-with-schema-history.tsv"):
        for b in read_dump(dump):
            assert set(b.attributes) <= mapped, (dump, set(b.attributes) - mapped)


def test_free_text_is_never_exported_nor_requested():
    attributes = {"LastEvent": 'position: {lsn: 1}, key: {"id" : "5"}', "LastAppliedChange": "CREATE TABLE x", "GtidSet": "a:1-5"}
    assert list(convert(attributes)) == []
    assert not {"LastEvent", "LastAppliedChange", "LastRecoveredChange", "ChunkFrom"} & set(requested_attributes())


def _seed_table_attributes() -> dict[str, str]:
    """Attribute → documented type from the YugabyteDB seed's snapshot/streaming tables."""
    text = next(SEEDS.glob("000_*.txt")).read_text(encoding="utf-8")
    section = text[text.index("### Snapshot metrics"): text.index("## Behavior when things go wrong")]
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^\| `(\w+)` \| ([^|]+) \|", section, re.M)}


# The SQL Server seed's tables lost their attribute names; the seeds README lists the standard
# names they use (common, incremental snapshot, schema history), checked here with their types.
SQLSERVER_EXTRA = {"ChunkId": "string", "ChunkFrom": "string", "ChunkTo": "string", "TableFrom": "string", "TableTo": "string",
                   "Status": "string", "RecoveryStartTime": "long", "ChangesRecovered": "long", "ChangesApplied": "long",
                   "MilliSecondsSinceLastRecoveredChange": "long", "MilliSecondsSinceLastAppliedChange": "long",
                   "LastRecoveredChange": "string", "LastAppliedChange": "string"}

_SAMPLE_OF_TYPE = {"long": 1234, "int": 7, "boolean": True, "string[]": ["a.b", "a.c"], "Map<String, Long>": {"a.b": 5},
                   "Map<String, String>": {"lsn": "99"}}


@pytest.mark.parametrize("attribute, documented", sorted({**_seed_table_attributes(), **SQLSERVER_EXTRA}.items()))
def test_seed_table_attribute_is_mapped_by_its_type(attribute, documented):
    rule = next((r for r in RULES if r.attribute == attribute), None)
    derived = attribute in {a for _, a in SNAPSHOT_STATE_RULE.sources}
    assert rule is not None or derived, f"{attribute} has no mapping row"
    if derived:
        assert documented == "boolean"
        return
    if rule.conversion is Conversion.FREE_TEXT:
        assert documented == "string"
        return
    value = {"Status": "RUNNING", "ChunkId": "chunk-1"}.get(attribute, _SAMPLE_OF_TYPE.get(documented))
    produced = list(convert({attribute: value}))
    assert produced, f"{attribute} ({documented}) produced no sample"
    for sample in produced:
        assert sample.metric.startswith("cdcwatch_debezium_")
        assert sample.metric.endswith("_total") == (sample.spec.type == "counter")
        if "MilliSeconds" in attribute and documented == "long":
            assert sample.value == pytest.approx(1.234) and "seconds" in sample.metric


def test_seed_yugabyte_tables_were_read():
    attributes = _seed_table_attributes()
    assert {"RowsScanned", "Connected", "MilliSecondsBehindSource", "SourceEventPosition"} <= set(attributes)


def test_oracle_scn_beyond_2_63_and_file_index():
    got = samples({"CurrentScn": "18446744073709551617", "BinlogFilename": "mysql-bin.000123", "Connected": False})
    assert got[("cdcwatch_debezium_logminer_current_scn", ())] == float(18446744073709551617)
    assert got[("cdcwatch_debezium_binlog_file_number", ())] == 123
    assert got[("cdcwatch_debezium_connected", ())] == 0


ODD_ATTRIBUTES = ("MilliSecondsBehindSource", "RowsScanned", "Connected", "Status", "CapturedTables", "CurrentScn")


@pytest.mark.parametrize("value, expected", [
    (None, {}),
    ("garbage", {("cdcwatch_debezium_schema_history_state", (("state", s),)): 0 for s in ("stopped", "recovering", "running")}),
    ([1, 2], {("cdcwatch_debezium_captured_tables", ()): 2}),
    ({"x": "y"}, {}),
    (-5, {}),
    (float("nan"), {}),
    (float("inf"), {}),
    (True, {("cdcwatch_debezium_connected", ()): 1}),
    ({"": 3}, {}),
])
def test_unexpected_values_give_no_false_samples(value, expected):
    """Odd values never raise; numbers are only taken from numbers, and only from real ones."""
    assert samples(dict.fromkeys(ODD_ATTRIBUTES, value)) == expected


DUMPS = ("postgres-mbeans-after-dml.tsv", "postgres-mbeans-after-restart.tsv", "mysql-mbeans-with-schema-history.tsv")


@pytest.mark.parametrize("dump", DUMPS)
def test_recorded_numbers_are_exported_as_recorded_and_sentinels_not_at_all(dump):
    """Every plain number of a recorded bean: -1 (and MaxQueueSizeInBytes 0) gives no sample, any other
    value one sample of the recorded value, milliseconds in seconds; nothing exported is negative or NaN."""
    checked = 0
    for b in read_dump(dump):
        for attribute, recorded in b.attributes.items():
            got = [s.value for s in convert({attribute: recorded})]
            assert all(v >= 0 for v in got), (b.name, attribute, got)  # NaN fails this too
            if recorded is None:
                assert got in ([], [0.0]), (b.name, attribute, got)  # ChunkId: no chunk in progress
            if isinstance(recorded, bool) or not isinstance(recorded, (int, float)):
                continue
            checked += 1
            if recorded == -1 or (attribute == "MaxQueueSizeInBytes" and recorded == 0):
                assert got == [], (b.name, attribute, got)
            else:
                in_ms = "millisecond" in attribute.lower()
                assert got == [pytest.approx(recorded / 1000 if in_ms else recorded)], (b.name, attribute)
    assert checked, f"no numbers read from {dump}"


def test_names_follow_prometheus_conventions():
    for rule in RULES:
        if rule.spec is None:
            assert rule.conversion is Conversion.FREE_TEXT and rule.why, rule.attribute
            continue
        name = rule.spec.name
        assert re.fullmatch(r"cdcwatch_debezium_[a-z0-9_]+", name), name
        assert name.endswith("_total") == (rule.spec.type == "counter"), name
        if rule.scale == 0.001:
            assert "seconds" in name, name
        assert "milli" not in name
