"""The Delta log reader on real tables written by delta-rs (the `deltalake` package) into tmp_path, each figure
checked against an independent reading: deltalake's own (version, history, add actions) or the data itself.
Spark's dialect of the log (string metrics, zoned timestamps, deletion vectors), multi-part and V2 checkpoints and
the refusals come from log files written here by hand, which deltalake reads too where it can."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake

from cdcwatch.delta import DEFAULT_SMALL_FILE_BYTES, DeltaLog, DeltaLogError, TableState

pytestmark = pytest.mark.delta  # deltalake and pyarrow: the test extra (the main suite runs them)

START = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


def rows(ids: range | list[int], shift: int = 0) -> pa.Table:
    """id, ts (a timestamp), ms (the same instant as epoch milliseconds) and a string, per id; ts grows with id."""
    ids = list(ids)
    moments = [START + timedelta(seconds=i + shift, microseconds=i * 7) for i in ids]
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array(moments, pa.timestamp("us", tz="UTC")),
                     "ms": pa.array([int(moment.timestamp() * 1000) for moment in moments], pa.int64()),
                     "v": [f"row {i}" for i in ids]})


def append(path: Path, ids: range | list[int], **options: Any) -> None:
    write_deltalake(str(path), rows(ids), mode="append", **options)


def adds(path: Path) -> pa.Table:
    return pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))


def true_max(path: Path, column: str) -> float:
    """The column's newest value in the data itself, in seconds, truncated to the milliseconds stats keep (a query:
    to_pyarrow_table reads nulls from a column-mapped table in deltalake 1.6)."""
    result = QueryBuilder().register("t", DeltaTable(str(path))).execute(f"SELECT max({column}) AS newest FROM t")
    newest = pa.table(result.read_all()).column("newest")[0].as_py()
    return int(newest.timestamp() * 1000) / 1000 if isinstance(newest, datetime) else newest / 1000


def assert_files_match(state: TableState, path: Path, small_file_bytes: int = DEFAULT_SMALL_FILE_BYTES) -> None:
    files = adds(path)
    sizes = files.column("size_bytes").to_pylist()
    dt = DeltaTable(str(path))
    assert state.version == dt.version()
    assert (state.files, state.bytes, state.small_files) == (len(sizes), sum(sizes),
                                                             sum(size < small_file_bytes for size in sizes))
    assert state.last_commit_timestamp == dt.history(1)[0]["timestamp"] / 1000


def log_dir(path: Path) -> Path:
    return path / "_delta_log"


def commit_name(version: int) -> str:
    return f"{version:020d}.json"


class Counting(pafs.FileSystemHandler):  # type: ignore[misc]
    """The local filesystem, recording every open (found or not) and listing the reader asks for."""

    def __init__(self) -> None:
        self.local = pafs.LocalFileSystem()
        self.opened: list[str] = []
        self.listings = 0

    def names(self) -> list[str]:
        names, self.opened = [os.path.basename(path) for path in self.opened], []
        return names

    def get_type_name(self) -> str:
        return "counting"

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return self.local.get_file_info(paths)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        self.listings += 1
        return self.local.get_file_info(selector)

    def open_input_stream(self, path: str) -> Any:
        self.opened.append(path)
        return self.local.open_input_stream(path)

    def open_input_file(self, path: str) -> Any:
        self.opened.append(path)
        return self.local.open_input_file(path)

    def create_dir(self, *args: Any) -> None:
        raise NotImplementedError

    delete_dir = delete_dir_contents = delete_root_dir_contents = delete_file = move = copy_file = create_dir
    open_output_stream = open_append_stream = create_dir


def counted(path: Path, column: str | None = None, **options: Any) -> tuple[DeltaLog, Counting]:
    handler = Counting()
    return DeltaLog(str(path), column, filesystem=pafs.PyFileSystem(handler), **options), handler


# -- logs written by hand (Spark's dialect, features delta-rs does not write)

def schema_string(fields: dict[str, str], mapping: dict[str, str] | None = None) -> str:
    return json.dumps({"type": "struct", "fields": [
        {"name": name, "type": kind, "nullable": True,
         "metadata": {"delta.columnMapping.physicalName": mapping[name], "delta.columnMapping.id": i}
         if mapping else {}}
        for i, (name, kind) in enumerate(fields.items(), 1)]})


def metadata(fields: dict[str, str], partition: tuple[str, ...] = (), **configuration: str) -> dict[str, Any]:
    return {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                         "schemaString": schema_string(fields), "partitionColumns": list(partition),
                         "configuration": {key.replace("_", "."): value for key, value in configuration.items()},
                         "createdTime": 1714979289000}}


def protocol(reader: int = 1, writer: int = 2, features: list[str] | None = None) -> dict[str, Any]:
    action: dict[str, Any] = {"minReaderVersion": reader, "minWriterVersion": writer}
    if features is not None:
        action |= {"readerFeatures": features, "writerFeatures": features}
    return {"protocol": action}


def add(path: str, size: int, stats: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    action = {"path": path, "partitionValues": {}, "size": size, "modificationTime": 1714979289000,
              "dataChange": True, **extra}
    if stats is not None:
        action["stats"] = json.dumps(stats)
    return {"add": action}


def remove(path: str, **extra: Any) -> dict[str, Any]:
    return {"remove": {"path": path, "deletionTimestamp": 1714979289000, "dataChange": True, **extra}}


def info(operation: str, timestamp_ms: int, **metrics: str) -> dict[str, Any]:
    return {"commitInfo": {"timestamp": timestamp_ms, "operation": operation, "operationParameters": {},
                           "operationMetrics": metrics, "engineInfo": "Apache-Spark/3.5.1 Delta-Lake/3.2.0"}}


def write_log(path: Path, *commits: list[dict[str, Any]], first: int = 0) -> None:
    log_dir(path).mkdir(parents=True, exist_ok=True)
    for version, actions in enumerate(commits, first):
        (log_dir(path) / commit_name(version)).write_text("".join(json.dumps(action) + "\n" for action in actions))


def ts_stats(newest: str | None, records: int = 1, **extra: Any) -> dict[str, Any]:
    return {"numRecords": records, "minValues": {}, "maxValues": {} if newest is None else {"ts": newest},
            "nullCount": {"ts": 0 if newest else records}, **extra}


# -- figures

def test_writes_merges_deletes_updates_and_compaction_match_deltalake(tmp_path: Path) -> None:
    for ids in (range(0, 3), range(3, 6), range(6, 9)):
        append(tmp_path, ids)
    dt = DeltaTable(str(tmp_path))
    source = rows([1, 2, 100], shift=1000)
    dt.merge(source, "t.id = s.id", source_alias="s", target_alias="t").when_matched_update_all() \
        .when_not_matched_insert_all().execute()
    DeltaTable(str(tmp_path)).delete("id = 3 or id = 4")
    DeltaTable(str(tmp_path)).update({"v": "'changed'"}, predicate="id = 5")
    DeltaTable(str(tmp_path)).optimize.compact()
    append(tmp_path, range(9, 11))

    history = DeltaTable(str(tmp_path)).history()
    sizes = adds(tmp_path).column("size_bytes").to_pylist()
    threshold = sorted(sizes)[len(sizes) // 2]  # about half the files small
    state = DeltaLog(str(tmp_path), "ts", small_file_bytes=threshold).read()

    assert_files_match(state, tmp_path, threshold)
    assert 0 < state.small_files < state.files
    assert state.commits == Counter(entry["operation"] for entry in history)
    assert state.commits == {"WRITE": 4, "MERGE": 1, "DELETE": 1, "UPDATE": 1, "OPTIMIZE": 1}
    copied = {entry["operation"]: entry["operationMetrics"].get("num_copied_rows",
                                                                entry["operationMetrics"].get("num_target_rows_copied"))
              for entry in history if entry["operation"] in ("MERGE", "DELETE", "UPDATE")}
    assert state.rows == {("WRITE", "inserted"): 11, ("MERGE", "inserted"): 1, ("MERGE", "updated"): 2,
                          ("MERGE", "deleted"): 0, ("MERGE", "copied"): copied["MERGE"],
                          ("DELETE", "deleted"): 2, ("DELETE", "copied"): copied["DELETE"],
                          ("UPDATE", "updated"): 1, ("UPDATE", "copied"): copied["UPDATE"]}
    optimize = next(entry for entry in history if entry["operation"] == "OPTIMIZE")
    assert state.last_compaction_timestamp == optimize["timestamp"] / 1000
    assert state.newest_commit_time == true_max(tmp_path, "ts")  # the merged row's ts, from source
    assert state.files_without_stats == 0


def test_epoch_millis_column_under_column_mapping(tmp_path: Path) -> None:
    """delta-rs keys the stats of a column-mapped table by physical names (col-<uuid>), which the schema maps."""
    write_deltalake(str(tmp_path), rows(range(3)), configuration={"delta.columnMapping.mode": "name"})
    append(tmp_path, range(3, 7))
    assert DeltaTable(str(tmp_path)).protocol().min_reader_version == 2
    state = DeltaLog(str(tmp_path), "ms").read()
    assert state.newest_commit_time == true_max(tmp_path, "ms") == rows([6]).column("ms")[0].as_py() / 1000
    assert_files_match(state, tmp_path)


def test_timestamp_ntz_column_reads_as_utc(tmp_path: Path) -> None:
    table = rows(range(4))
    table = table.set_column(1, "ts", table.column("ts").cast(pa.timestamp("us")))
    write_deltalake(str(tmp_path), table)
    state = DeltaLog(str(tmp_path), "ts").read()
    assert state.newest_commit_time == int((START + timedelta(seconds=3, microseconds=21)).timestamp() * 1000) / 1000


def test_an_all_null_column_has_no_newest_value_and_no_error(tmp_path: Path) -> None:
    table = rows(range(3))
    write_deltalake(str(tmp_path), table.set_column(2, "ms", pa.nulls(3, pa.int64())))
    state = DeltaLog(str(tmp_path), "ms").read()
    assert (state.newest_commit_time, state.files_without_stats, state.files) == (None, 0, 1)


def test_many_small_appends_pass_delta_rs_automatic_checkpoint(tmp_path: Path) -> None:
    """delta-rs checkpoints every 100 commits by itself: a reader started after that reads the checkpoint and
    the commits after it, and counts only those."""
    for i in range(105):
        append(tmp_path, [i])
    assert (log_dir(tmp_path) / "00000000000000000099.checkpoint.parquet").exists()
    reader, fs = counted(tmp_path, "ts")
    state = reader.read()
    assert_files_match(state, tmp_path)
    assert state.files == state.small_files == 105
    assert state.commits == {"WRITE": 5} and state.rows == {("WRITE", "inserted"): 5}
    assert state.newest_commit_time == true_max(tmp_path, "ts")
    assert state.last_compaction_timestamp is None
    # the hint, the checkpoint, 5 commits and the failed probe after them, 100 commits looked back on
    names = fs.names()
    assert names[:2] == ["_last_checkpoint", "00000000000000000099.checkpoint.parquet"]
    assert names[2:8] == [commit_name(version) for version in range(100, 106)]
    assert names[8:] == [commit_name(version) for version in range(99, -1, -1)]
    assert fs.listings == 0 and reader.log_files_read == 2 + 5 + 100
    assert DeltaLog(str(tmp_path), small_file_bytes=1).read().small_files == 0


# -- incremental reads

def test_a_read_opens_only_the_new_commits(tmp_path: Path) -> None:
    append(tmp_path, range(3))
    append(tmp_path, range(3, 5))
    reader, fs = counted(tmp_path, "ts")
    first = reader.read()
    assert fs.names() == ["_last_checkpoint", "00000000000000000000.json", "00000000000000000001.json",
                          "00000000000000000002.json"]  # no checkpoint: listed once, then read from version 0
    assert fs.listings == 1

    append(tmp_path, range(5, 9))
    second = reader.read()
    assert fs.names() == [commit_name(2), commit_name(3)] and fs.listings == 1
    assert_files_match(second, tmp_path)
    assert second.commits == {"WRITE": 3} and second.rows[("WRITE", "inserted")] == 9
    assert second.newest_commit_time == true_max(tmp_path, "ts") > (first.newest_commit_time or 0)

    idle = reader.read()  # nothing new: one failed open (and a status of the newest commit)
    assert fs.names() == [commit_name(3)] and idle == second


def test_a_checkpoint_between_reads_is_bridged_by_the_commits(tmp_path: Path) -> None:
    append(tmp_path, range(2))
    reader, fs = counted(tmp_path, "ms")
    reader.read()
    fs.names()
    append(tmp_path, range(2, 4))
    DeltaTable(str(tmp_path)).optimize.compact()
    DeltaTable(str(tmp_path)).create_checkpoint()
    append(tmp_path, range(4, 6))
    state = reader.read()
    assert fs.names() == [commit_name(version) for version in range(1, 5)]  # no checkpoint read
    assert_files_match(state, tmp_path)
    assert state.commits == {"WRITE": 3, "OPTIMIZE": 1}
    assert state.last_compaction_timestamp == DeltaTable(str(tmp_path)).history(2)[1]["timestamp"] / 1000
    assert state.newest_commit_time == true_max(tmp_path, "ms")


def test_the_first_read_starts_at_the_checkpoint_and_looks_back_for_a_compaction(tmp_path: Path) -> None:
    for i in range(4):
        append(tmp_path, [i])
    DeltaTable(str(tmp_path)).optimize.compact()  # version 4
    for i in range(4, 7):
        append(tmp_path, [i])  # 5, 6, 7
    DeltaTable(str(tmp_path)).create_checkpoint()  # at 7
    compaction = DeltaTable(str(tmp_path)).history()[3]
    assert compaction["operation"] == "OPTIMIZE"

    at_head = DeltaLog(str(tmp_path), "ts").read()  # nothing after the checkpoint: its commit gives the time
    assert_files_match(at_head, tmp_path)
    assert at_head.commits == {} and at_head.last_compaction_timestamp == compaction["timestamp"] / 1000

    append(tmp_path, [7])
    state = DeltaLog(str(tmp_path), "ts").read()
    assert_files_match(state, tmp_path)
    assert state.commits == {"WRITE": 1}  # counted from the commits after the checkpoint
    assert state.last_compaction_timestamp == compaction["timestamp"] / 1000
    assert state.newest_commit_time == true_max(tmp_path, "ts")
    reader, fs = counted(tmp_path, compaction_lookback=3)  # 7, 6, 5: the compaction at 4 is out of reach
    assert reader.read().last_compaction_timestamp is None
    assert fs.names()[-3:] == [commit_name(7), commit_name(6), commit_name(5)]


def test_a_reader_behind_a_cleaned_up_log_starts_over_at_the_checkpoint(tmp_path: Path) -> None:
    append(tmp_path, range(2))
    reader = DeltaLog(str(tmp_path), "ts")
    before = reader.read()
    for i in range(2, 6):
        append(tmp_path, [i])
    DeltaTable(str(tmp_path)).create_checkpoint()  # at 4
    append(tmp_path, [6])
    for version in range(0, 4):  # what log cleanup deletes: the commits before the checkpoint
        (log_dir(tmp_path) / commit_name(version)).unlink()
    state = reader.read()
    assert_files_match(state, tmp_path)
    assert state.commits == {"WRITE": before.commits["WRITE"] + 1}  # the gap is not counted; totals kept
    assert state.newest_commit_time == true_max(tmp_path, "ts")


def test_a_table_deleted_and_created_again_is_read_anew(tmp_path: Path) -> None:
    for i in range(4):
        append(tmp_path, [i])
    reader = DeltaLog(str(tmp_path), "ts")
    assert reader.read().version == 3
    shutil.rmtree(tmp_path)
    append(tmp_path, [10, 11])
    state = reader.read()
    assert (state.version, state.files) == (0, 1) and state.commits == {"WRITE": 5}
    assert state.newest_commit_time == true_max(tmp_path, "ts")
    shutil.rmtree(tmp_path)
    with pytest.raises(DeltaLogError, match="is not a Delta table: there is no .*_delta_log"):
        reader.read()


# -- checkpoints

def test_stats_only_as_struct_in_the_checkpoint(tmp_path: Path) -> None:
    """delta.checkpoint.writeStatsAsJson=false: the checkpoint has stats_parsed and no `stats` column."""
    write_deltalake(str(tmp_path), rows(range(3)), configuration={
        "delta.checkpoint.writeStatsAsJson": "false", "delta.checkpoint.writeStatsAsStruct": "true"})
    append(tmp_path, range(3, 5))
    DeltaTable(str(tmp_path)).create_checkpoint()
    add_type = pq.read_schema(log_dir(tmp_path) / "00000000000000000001.checkpoint.parquet").field("add").type
    assert "stats" not in [field.name for field in add_type] and "stats_parsed" in [field.name for field in add_type]
    for column in ("ts", "ms"):
        state = DeltaLog(str(tmp_path), column).read()
        assert state.newest_commit_time == true_max(tmp_path, column)
        assert_files_match(state, tmp_path)


_STRINGS = pa.map_(pa.string(), pa.string())
V2_TOP = pa.schema({
    "checkpointMetadata": pa.struct({"version": pa.int64()}),
    "protocol": pa.struct({"minReaderVersion": pa.int32(), "minWriterVersion": pa.int32(),
                           "readerFeatures": pa.list_(pa.string()), "writerFeatures": pa.list_(pa.string())}),
    "metaData": pa.struct({"id": pa.string(), "format": pa.struct({"provider": pa.string(), "options": _STRINGS}),
                           "schemaString": pa.string(), "partitionColumns": pa.list_(pa.string()),
                           "configuration": _STRINGS, "createdTime": pa.int64()}),
    "sidecar": pa.struct({"path": pa.string(), "sizeInBytes": pa.int64(), "modificationTime": pa.int64()}),
})
"""A V2 checkpoint's top-level file in Parquet: its non-file actions and the sidecars."""


def checkpointed(path: Path) -> tuple[Path, pa.Table]:
    """Four appends, a classic checkpoint at 3 (taken away) and one append; the commits before it deleted, so
    whatever reads the table reads the checkpoint."""
    for i in range(4):
        append(path, [i, i + 10])
    DeltaTable(str(path)).create_checkpoint()
    append(path, [99])
    log = log_dir(path)
    table = pq.read_table(log / "00000000000000000003.checkpoint.parquet")
    (log / "00000000000000000003.checkpoint.parquet").unlink()
    for version in range(3):
        (log / commit_name(version)).unlink()
    return log, table


def test_multi_part_checkpoint(tmp_path: Path) -> None:
    log, table = checkpointed(tmp_path)
    pq.write_table(table.slice(0, 3), log / "00000000000000000003.checkpoint.0000000001.0000000002.parquet")
    pq.write_table(table.slice(3), log / "00000000000000000003.checkpoint.0000000002.0000000002.parquet")
    (log / "_last_checkpoint").write_text(json.dumps({"version": 3, "size": table.num_rows, "parts": 2}))
    state = DeltaLog(str(tmp_path), "ms").read()
    assert_files_match(state, tmp_path)  # deltalake reads the parts too
    assert state.files == 5 and state.newest_commit_time == true_max(tmp_path, "ms")
    (log / "_last_checkpoint").unlink()  # found by listing
    assert DeltaLog(str(tmp_path), "ms").read() == state


@pytest.mark.parametrize("top", ["json", "parquet"])
@pytest.mark.parametrize("hinted", [True, False])
def test_v2_checkpoint_with_a_sidecar(tmp_path: Path, top: str, hinted: bool) -> None:
    log, table = checkpointed(tmp_path)
    live = table.select(["add"]).filter(pc.is_valid(table.column("add")))
    (log / "_sidecars").mkdir()
    sidecar = f"{uuid.uuid4()}.parquet"
    pq.write_table(live, log / "_sidecars" / sidecar)
    meta = next(row["metaData"] for row in table.to_pylist() if row["metaData"])
    meta["configuration"], meta["format"]["options"] = dict(meta["configuration"]), dict(meta["format"]["options"])
    actions = [{"checkpointMetadata": {"version": 3}}, protocol(3, 7, ["v2Checkpoint"]), {"metaData": meta},
               {"sidecar": {"path": sidecar, "sizeInBytes": (log / "_sidecars" / sidecar).stat().st_size,
                            "modificationTime": 0}}]
    name = f"00000000000000000003.checkpoint.{uuid.uuid4()}.{top}"
    if top == "json":
        (log / name).write_text("".join(json.dumps(action) + "\n" for action in actions))
    else:
        pq.write_table(pa.Table.from_pylist([{"checkpointMetadata": None, "protocol": None, "metaData": None,
                                              "sidecar": None} | action for action in actions], V2_TOP), log / name)
    if hinted:
        (log / "_last_checkpoint").write_text(json.dumps({"version": 3, "size": 4, "v2Checkpoint": {"path": name}}))
    else:
        (log / "_last_checkpoint").unlink(missing_ok=True)
    reader, fs = counted(tmp_path, "ms")
    state = reader.read()
    assert name in fs.names() and fs.listings == (0 if hinted else 1)
    assert state.files == 5 and state.newest_commit_time == true_max(tmp_path, "ms")
    assert_files_match(state, tmp_path)


# -- Spark's dialect, written by hand

def test_spark_commits_string_metrics_zoned_stats_and_deletion_vectors(tmp_path: Path) -> None:
    fields = {"id": "long", "ts": "timestamp"}
    dv = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 1, "sizeInBytes": 36,
          "cardinality": 2}
    write_log(
        tmp_path,
        [info("CREATE TABLE AS SELECT", 1714979289000, numOutputRows="10", numFiles="1"),
         protocol(3, 7, ["deletionVectors"]), metadata(fields, delta_enableDeletionVectors="true"),
         add("a.parquet", 1000, ts_stats("2024-05-06T10:08:09.123+02:00", 10))],
        [info("WRITE", 1714979290000, numOutputRows="5", numFiles="1"),
         add("b.parquet", 2000, ts_stats("2024-05-06T08:00:00Z", 5))],
        [info("MERGE", 1714979291000, numTargetRowsInserted="3", numTargetRowsUpdated="2", numTargetRowsDeleted="1",
              numTargetRowsCopied="0", numOutputRows="5", numTargetRowsMatchedUpdated="2"),
         # a new deletion vector on a: the add comes first, the remove names the old one
         add("a.parquet", 1000, ts_stats("2024-05-06T10:08:09.123+02:00", 10, tightBounds=False), deletionVector=dv),
         remove("a.parquet"),
         add("c.parquet", 300, ts_stats("2024-05-06T07:30:00.5Z", 5))],
        [info("DELETE", 1714979292000, numDeletedRows="4", numCopiedRows="0", numDeletionVectorsAdded="1"),
         remove("b.parquet"), add("b2.parquet", 1500, ts_stats("2024-05-06T08:00:00Z", 1))],
        [info("OPTIMIZE", 1714979293000, numAddedFiles="1", numRemovedFiles="2"),
         remove("c.parquet", dataChange=False), remove("b2.parquet", dataChange=False),
         add("d.parquet", 1800, ts_stats("2024-05-06T08:00:00Z", 6), dataChange=False)],
        [{"commitInfo": {"timestamp": 1714979294000, "inCommitTimestamp": 1714979294500, "operation": "UPDATE",
                         "operationMetrics": {"numUpdatedRows": "1", "numCopiedRows": "5"}}},
         remove("d.parquet"), add("e.parquet", 1800, ts_stats("2024-05-06T08:00:00Z", 6))],
    )
    state = DeltaLog(str(tmp_path), "ts").read()
    dt = DeltaTable(str(tmp_path))
    assert (state.version, state.files) == (dt.version(), len(adds(tmp_path))) == (5, 2)
    assert state.bytes == 2800
    assert state.commits == {"CREATE TABLE AS SELECT": 1, "WRITE": 1, "MERGE": 1, "DELETE": 1, "OPTIMIZE": 1,
                             "UPDATE": 1}
    assert state.rows == {("CREATE TABLE AS SELECT", "inserted"): 10, ("WRITE", "inserted"): 5,
                          ("MERGE", "inserted"): 3, ("MERGE", "updated"): 2, ("MERGE", "deleted"): 1,
                          ("MERGE", "copied"): 0, ("DELETE", "deleted"): 4, ("DELETE", "copied"): 0,
                          ("UPDATE", "updated"): 1, ("UPDATE", "copied"): 5}
    assert state.last_commit_timestamp == 1714979294.5  # inCommitTimestamp wins
    assert state.last_compaction_timestamp == 1714979293.0
    assert state.newest_commit_time == datetime(2024, 5, 6, 8, 8, 9, 123000, tzinfo=UTC).timestamp()  # a's, kept


@pytest.mark.parametrize(("kind", "stat", "seconds"), [
    ("timestamp", "2024-05-06T07:08:09Z", datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC).timestamp()),
    ("timestamp", "2024-05-06T07:08:09.123456Z", datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC).timestamp()),
    ("timestamp", "2024-05-06T00:08:09.1-07:00", datetime(2024, 5, 6, 7, 8, 9, 100000, tzinfo=UTC).timestamp()),
    ("timestamp_ntz", "2024-05-06T07:08:09.123", datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC).timestamp()),
    ("timestamp_ntz", "2024-05-06 07:08:09", datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC).timestamp()),
    ("long", 1714979289123, 1714979289.123),
])
def test_stats_forms(tmp_path: Path, kind: str, stat: object, seconds: float) -> None:
    write_log(tmp_path, [info("WRITE", 1714979289000), protocol(), metadata({"id": "long", "ts": kind}),
                         add("a.parquet", 10, {"numRecords": 1, "maxValues": {"ts": stat}, "nullCount": {"ts": 0}}),
                         add("b.parquet", 10, {"numRecords": 1, "maxValues": {"ts": "1999-01-01T00:00:00Z"
                                                                                if kind != "long" else 0}})])
    assert DeltaLog(str(tmp_path), "ts").read().newest_commit_time == seconds


def test_a_commit_without_commit_info_takes_its_file_time(tmp_path: Path) -> None:
    write_log(tmp_path, [protocol(), metadata({"id": "long"}), add("a.parquet", 10)], [add("b.parquet", 20)])
    os.utime(log_dir(tmp_path) / commit_name(1), (1714979289.5, 1714979289.5))
    state = DeltaLog(str(tmp_path)).read()
    assert state.commits == {"UNKNOWN": 2} and state.last_commit_timestamp == 1714979289.5 and state.rows == {}


def test_files_written_before_stats_covered_the_column_are_counted(tmp_path: Path) -> None:
    fields = {"id": "long", "ts": "timestamp"}
    write_log(tmp_path, [info("WRITE", 1714979289000), protocol(), metadata(fields),
                         add("old.parquet", 10), add("new.parquet", 10, ts_stats("2024-05-06T07:08:09Z"))])
    state = DeltaLog(str(tmp_path), "ts").read()
    assert state.files_without_stats == 1 and state.newest_commit_time == START.replace(microsecond=0).timestamp()


# -- refusals

def assert_refused(path: Path | str, column: str | None, *fragments: str, **options: Any) -> DeltaLogError:
    with pytest.raises(DeltaLogError) as raised:
        DeltaLog(str(path), column, **options).read()
    message = str(raised.value)
    for fragment in fragments:
        assert fragment in message, message
    return raised.value


def test_not_a_delta_table(tmp_path: Path) -> None:
    assert_refused(tmp_path, None, f"{tmp_path} is not a Delta table", "there is no", "_delta_log",
                   "give the table's root directory")
    log_dir(tmp_path).mkdir()
    (log_dir(tmp_path) / "readme.txt").write_text("not a commit")
    assert_refused(tmp_path, None, "is not a Delta table", "holds no commit (00000000000000000000.json)")


def test_a_log_without_its_start(tmp_path: Path) -> None:
    write_log(tmp_path, [info("WRITE", 1), protocol(), metadata({"id": "long"})], first=5)
    assert_refused(tmp_path, None, "starts at version 5 without a checkpoint", "create_checkpoint")


def test_column_problems_keep_the_other_figures(tmp_path: Path) -> None:
    write_deltalake(str(tmp_path), rows(range(3)), partition_by=["v"])
    missing = assert_refused(tmp_path, "updated_at", "'updated_at' is not a column of the table", "id, ts, ms, v",
                             "name a top-level timestamp column or a long of epoch milliseconds")
    assert missing.state is not None and missing.state.version == 0 and missing.state.files == 3
    assert_refused(tmp_path, "v", "'v' is a partition column", "name a data column")
    shutil.rmtree(tmp_path)
    write_deltalake(str(tmp_path), rows(range(3)))
    assert_refused(tmp_path, "v", "'v' is of type \"string\"", "must be a timestamp (or timestamp_ntz) column")


@pytest.mark.parametrize(("configuration", "fragments"), [
    ({"delta.dataSkippingNumIndexedCols": "2"},
     ("it is column 3 and the table collects them for its first 2", "set delta.dataSkippingNumIndexedCols to at "
      "least 3, or list 'ms' in delta.dataSkippingStatsColumns")),
    ({"delta.dataSkippingStatsColumns": "id,ts"}, ("delta.dataSkippingStatsColumns='id,ts'", "add 'ms' to it")),
])
def test_a_column_without_stats(tmp_path: Path, configuration: dict[str, str], fragments: tuple[str, ...]) -> None:
    write_deltalake(str(tmp_path), rows(range(3)), configuration=configuration)
    error = assert_refused(tmp_path, "ms", f"{tmp_path}: no live file has statistics for commit_time_column 'ms'",
                           *fragments, "files written before the change keep no stats")
    assert error.state is not None and error.state.files_without_stats == 1
    assert DeltaLog(str(tmp_path), "ts").read().newest_commit_time == true_max(tmp_path, "ts")


def test_files_without_any_stats(tmp_path: Path) -> None:
    write_log(tmp_path, [info("WRITE", 1), protocol(), metadata({"id": "long", "ts": "timestamp"}),
                         add("a.parquet", 10)])
    assert_refused(tmp_path, "ts", "the writer wrote none", "set delta.checkpoint.writeStatsAsJson=true")


def test_a_corrupt_commit_is_named_and_read_again(tmp_path: Path) -> None:
    append(tmp_path, range(2))
    reader = DeltaLog(str(tmp_path), "ts")
    reader.read()
    append(tmp_path, range(2, 4))
    commit = log_dir(tmp_path) / commit_name(1)
    good = commit.read_bytes()
    commit.write_bytes(good[: len(good) // 2])
    for _ in range(2):  # not skipped: every read fails on it
        with pytest.raises(DeltaLogError, match=f"{commit}: line 2 is not JSON .*corrupt.*restore it"):
            reader.read()
    commit.write_bytes(good)
    assert_files_match(reader.read(), tmp_path)


def test_a_corrupt_checkpoint(tmp_path: Path) -> None:
    append(tmp_path, range(2))
    DeltaTable(str(tmp_path)).create_checkpoint()
    (log_dir(tmp_path) / "00000000000000000000.checkpoint.parquet").write_bytes(b"PAR1 not really")
    assert_refused(tmp_path, None, "00000000000000000000.checkpoint.parquet: not a Parquet checkpoint", "restore it")


@pytest.mark.parametrize(("action", "fragment"), [
    (protocol(3, 7, ["catalogManaged"]), "reader feature(s) catalogManaged"),
    (protocol(3, 7, ["deletionVectors", "someFutureFeature"]), "reader feature(s) someFutureFeature"),
    (protocol(4, 7), "needs Delta reader version 4"),
])
def test_unsupported_protocol(tmp_path: Path, action: dict[str, Any], fragment: str) -> None:
    write_log(tmp_path, [info("WRITE", 1), action, metadata({"id": "long"})])
    assert_refused(tmp_path, None, f"{log_dir(tmp_path) / commit_name(0)}: ", fragment)


def test_a_protocol_upgrade_stops_the_reader_at_that_commit(tmp_path: Path) -> None:
    append(tmp_path, range(2))
    reader = DeltaLog(str(tmp_path))
    reader.read()
    write_log(tmp_path, [info("SET TBLPROPERTIES", 2), protocol(3, 7, ["catalogManaged"])], first=1)
    for _ in range(2):
        with pytest.raises(DeltaLogError, match="catalogManaged"):
            reader.read()


def test_storage_options(tmp_path: Path) -> None:
    assert_refused(tmp_path, None, "storage_options apply to s3://, gs:// and abfs[s]:// tables only",
                   storage_options={"region": "eu-west-1"})
    assert_refused("s3://bucket/table", None, "pyarrow.fs.S3FileSystem refused storage_options ['regoin']",
                   storage_options={"regoin": "eu-west-1"})


@pytest.mark.parametrize("stats", ["{\"numRecords\": 1, \"maxValues\": {\"ts\": \"yesterday\"}}", "[1]", "{not json"])
def test_malformed_stats(tmp_path: Path, stats: str) -> None:
    write_log(tmp_path, [info("WRITE", 1), protocol(), metadata({"id": "long", "ts": "timestamp"}),
                         {"add": add("a.parquet", 10)["add"] | {"stats": stats}}])
    assert_refused(tmp_path, "ts", f"{log_dir(tmp_path) / commit_name(0)}: a file action is malformed", "corrupt")
    assert DeltaLog(str(tmp_path)).read().files == 1  # without a column, stats are not read
