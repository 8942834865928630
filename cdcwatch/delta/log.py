"""A Delta Lake table read from its transaction log alone (`<table>/_delta_log/`): no JVM, no Spark, no data file.

`DeltaLog.read()` gives the table's version, when it last committed, its commits and rows by operation, its live
files (count, bytes, small ones), its newest compaction and, from the files' statistics, the newest value of a
commit-time column. The reader keeps the live files between reads (path → size and the column's max) and reads
incrementally: once started it only opens the commits written since (`<version+1>.json`, ...), probing for the
next commit instead of listing `_delta_log/`, so a read costs the same on a log of ten or ten thousand commits.

Where a read starts: the checkpoint `_last_checkpoint` names (else the newest one a listing finds; else version 0),
then every commit after it. The commit and row totals therefore count from the commits after that checkpoint:
they are totals since the reader started, not since the table was created. A reader whose next commit is gone
while its own newest commit is gone too (the log was cleaned up past it, or the table deleted and created again)
starts over from the newest checkpoint, its totals kept: the commits in between are not counted.

What the log cannot say is not guessed: row counts come from each commit's operationMetrics (a writer that writes
none counts no rows), and the column's newest value is the largest per-file max of the statistics (truncated to
milliseconds by the writers; with deletion vectors, an upper bound: deleted rows still count in a file's stats).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = ["COMPACTION_LOOKBACK", "COMPACTION_OPERATIONS", "DEFAULT_SMALL_FILE_BYTES", "ROW_KINDS", "DeltaLog",
           "DeltaLogError", "TableState"]

DEFAULT_SMALL_FILE_BYTES = 32 * 1024 * 1024
"""A file under a quarter of the 128 MiB that Delta's auto compaction writes (`autoCompact.maxFileSize`) and a third
of delta-rs's 100 MB OPTIMIZE target: a file that any compaction would merge. Files that OPTIMIZE writes land near
their target (1 GiB for Spark's OPTIMIZE), so a compacted table counts only a few small files (a partition's last
bin); a count that keeps growing says compaction does not keep up with the writes."""

COMPACTION_LOOKBACK = 100
"""Commits at and before the starting checkpoint searched for the newest compaction on the first read: one default
checkpoint interval of delta-rs (Spark's is 10), about 100 small reads once per reader. None is reported if the
newest OPTIMIZE is older."""

COMPACTION_OPERATIONS = frozenset({"OPTIMIZE"})
"""commitInfo.operation of a compaction: Spark's OPTIMIZE (auto compaction included, with operationParameters
auto=true), delta-rs's optimize.compact and optimize.z_order."""

ROW_KINDS = ("inserted", "updated", "deleted", "copied")
"""Kinds of rows counted: `copied` rows were rewritten unchanged (the copy-on-write cost of MERGE, UPDATE and
DELETE); an overwrite counts its rows as inserted, what it replaced is not counted."""

# operationMetrics → kind of rows: Spark's names (string values), delta-rs's (numbers); the per-clause breakdowns
# (numTargetRowsMatchedUpdated, ...) are left out, they are parts of these
_ROW_METRICS = {
    "numTargetRowsInserted": "inserted", "num_target_rows_inserted": "inserted",
    "numTargetRowsUpdated": "updated", "num_target_rows_updated": "updated",
    "numTargetRowsDeleted": "deleted", "num_target_rows_deleted": "deleted",
    "numTargetRowsCopied": "copied", "num_target_rows_copied": "copied",
    "numUpdatedRows": "updated", "num_updated_rows": "updated",
    "numDeletedRows": "deleted", "num_deleted_rows": "deleted",
    "numCopiedRows": "copied", "num_copied_rows": "copied",
    "num_added_rows": "inserted",  # delta-rs WRITE
}
# the rows an operation wrote: inserted rows for a WRITE, CTAS or STREAMING UPDATE; a MERGE's also counts its
# updated and copied rows, so it is read only when none of the above is present
_OUTPUT_ROWS = ("numOutputRows", "num_output_rows")

# reader features whose tables this reader reads correctly; any other is refused
_READER_FEATURES = frozenset({
    "columnMapping",  # stats keyed by physical names, which the schema maps
    "deletionVectors",  # stats still describe the whole file: the max is an upper bound
    "timestampNtz",  # stats without a zone, read as UTC
    "v2Checkpoint",  # UUID-named checkpoints (JSON or Parquet) and their sidecars
    "vacuumProtocolCheck", "typeWidening", "typeWidening-preview",  # nothing in the log to read differently
    "variantType", "variantType-preview", "variantShredding-preview",  # data files only; delta-rs lists variantType
})
_MAX_READER_VERSION = 3

_COMMIT_NAME = re.compile(r"^(\d{20})\.json$")
_CLASSIC_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_MULTIPART_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_V2_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.[0-9a-fA-F-]{36}\.(?:json|parquet)$")

_NO_VALUE = -math.inf
"""A file whose stats say the column holds no value (all null, or no row): nothing to report, nothing missing."""

_STORAGE_SCHEMES = {"s3": "S3FileSystem", "s3a": "S3FileSystem", "gs": "GcsFileSystem", "gcs": "GcsFileSystem",
                    "abfs": "AzureFileSystem", "abfss": "AzureFileSystem"}


@dataclass(frozen=True)
class TableState:
    """One table as of its newest commit. Totals (`commits`, `rows`) only grow while the reader lives."""

    version: int
    last_commit_timestamp: float
    """Seconds: the newest commit's commitInfo (inCommitTimestamp, else timestamp), else its file's mtime."""
    commits: dict[str, int]
    """Commits read by commitInfo.operation (UNKNOWN without one)."""
    rows: dict[tuple[str, str], int]
    """Rows by (operation, kind), kind one of ROW_KINDS, from operationMetrics."""
    files: int
    bytes: int
    small_files: int
    """Live files under small_file_bytes."""
    last_compaction_timestamp: float | None
    """Seconds: the newest OPTIMIZE commit seen (None: none within the look-back of the first read)."""
    newest_commit_time: float | None
    """Seconds: the largest max of commit_time_column over the live files' stats (None without a column, files or
    values)."""
    files_without_stats: int
    """Live files whose stats do not cover commit_time_column (written before stats were collected for it): the
    newest value can hide in them."""


class DeltaLogError(Exception):
    """The table cannot be read as asked; the message names the path, what is wrong and the fix. `state` holds the
    figures read all the same when only the commit-time column failed."""

    def __init__(self, message: str, state: TableState | None = None) -> None:
        super().__init__(message)
        self.state = state


@dataclass(frozen=True)
class _Column:
    """The commit-time column as the files' stats name it."""

    name: str
    physical: str
    """The key in the stats: the column's physical name under column mapping, else its name."""
    millis: bool
    """A long of epoch milliseconds; else a timestamp."""


class DeltaLog:
    """Reads one table's log incrementally; not thread-safe (one reader per table and thread).

    `uri` is the table's root (the directory holding `_delta_log/`): a local path, file://, s3://, gs:// or
    abfs[s]://container@account.dfs.core.windows.net/path, opened with `pyarrow.fs.FileSystem.from_uri` (which
    also reads options from an s3:// URI's query: ?region=...&endpoint_override=...&scheme=http). With
    `storage_options`, the scheme's pyarrow filesystem is built with them as keyword arguments instead:
    S3FileSystem (access_key, secret_key, session_token, region, endpoint_override, scheme, role_arn, anonymous,
    ...), GcsFileSystem (access_token, credential_token_expiration, anonymous, endpoint_override, project_id, ...),
    AzureFileSystem (account_name, taken from the URI if absent, account_key, sas_token, client_id, ...).
    Without either, each library's default credential chain applies. `filesystem` takes a ready
    `pyarrow.fs.FileSystem` (an fsspec one through `PyFileSystem(FSSpecHandler(...))`), `uri` then being the path
    in it.
    """

    def __init__(self, uri: str, commit_time_column: str | None = None, *, small_file_bytes: int = DEFAULT_SMALL_FILE_BYTES,
                 storage_options: Mapping[str, Any] | None = None, filesystem: Any = None,
                 compaction_lookback: int = COMPACTION_LOOKBACK) -> None:
        self.uri = uri
        self.commit_time_column = commit_time_column
        self.small_file_bytes = small_file_bytes
        self.compaction_lookback = compaction_lookback
        if filesystem is None:
            self._fs, root = _filesystem(uri, storage_options)
        else:
            self._fs, root = filesystem, uri
        self._log = root.rstrip("/") + "/_delta_log"
        self.log_files_read = 0
        """Log files opened (commits, checkpoint parts, sidecars, hints): what the reads cost the storage."""
        self._version: int | None = None
        self._files: dict[str, tuple[int, float | None]] = {}
        self._bytes = self._small = self._unindexed = 0
        self._newest: float | None = None
        self._newest_stale = False
        self._commits: Counter[str] = Counter()
        self._rows: Counter[tuple[str, str]] = Counter()
        self._last_commit: float | None = None
        self._last_compaction: float | None = None
        self._configuration: dict[str, str] = {}
        self._schema: list[dict[str, Any]] = []
        self._partition_columns: list[str] = []
        self._column: _Column | None = None
        self._column_problem: str | None = None
        self._head_seen = False
        """The current version's commit file was seen: its disappearance means the log moved on without it."""

    def read(self) -> TableState:
        """The table as of its newest commit, reading only what was committed since the last read; raises
        DeltaLogError."""
        if self._version is None or self._behind():
            try:
                self._start()
            except BaseException:
                self._version = None  # the next read starts over
                raise
        assert self._version is not None
        state = TableState(
            version=self._version, last_commit_timestamp=self._last_commit or 0.0, commits=dict(self._commits),
            rows=dict(self._rows), files=len(self._files), bytes=self._bytes, small_files=self._small,
            last_compaction_timestamp=self._last_compaction, newest_commit_time=self._newest_value(),
            files_without_stats=self._unindexed if self.commit_time_column else 0)
        if self.commit_time_column is not None:
            if self._column_problem is not None:
                raise DeltaLogError(self._column_problem, state)
            if state.newest_commit_time is None and self._unindexed:
                raise DeltaLogError(self._no_stats_problem(), state)
        return state

    def _behind(self) -> bool:
        """Reads the new commits; whether the reader must start over: no new commit and its own newest commit is gone
        too (log cleanup only deletes the oldest commits, so the log moved on past a gap, or the table was deleted
        and created again). Costs one failed open and, with nothing new, one status."""
        assert self._version is not None
        return not self._forward() and self._head_seen and not self._exists(self._commit(self._version))

    # -- where a read starts

    def _start(self) -> None:
        """From the newest checkpoint (or version 0) on; the totals and the newest compaction carry on."""
        checkpoint = self._hinted_checkpoint()
        if checkpoint is not None:
            try:
                self._load_checkpoint(*checkpoint)
            except FileNotFoundError:  # a stale or wrong hint: the listing decides
                checkpoint = None
        if checkpoint is None:
            checkpoint = self._listed_checkpoint()
            if checkpoint is None:
                self._reset()
            else:
                try:
                    self._load_checkpoint(*checkpoint)
                except FileNotFoundError as exc:
                    raise DeltaLogError(f"{self._log}: checkpoint {checkpoint[1][0]} vanished while read ({exc}): the "
                                        "log is being cleaned up; the next read starts from a newer one") from exc
        started, compaction = self._version, self._last_compaction
        assert started is not None
        self._forward()
        if self._version is None or self._version < 0:
            raise DeltaLogError(f"{self.uri} is not a Delta table: {self._log} holds no commit (00000000000000000000.json"
                                ") and no checkpoint: give the table's root directory, the one holding _delta_log/")
        self._look_back(started, need_compaction=self._last_compaction == compaction)
        if self._last_commit is None and checkpoint is not None:
            self._last_commit = self._mtime(self._path(checkpoint[1][0]))

    def _reset(self) -> None:
        self._files.clear()
        self._bytes = self._small = self._unindexed = 0
        self._newest, self._newest_stale = None, False
        self._version, self._last_commit, self._head_seen = -1, None, False

    def _hinted_checkpoint(self) -> tuple[int, list[str]] | None:
        """The checkpoint `_last_checkpoint` names; a hint only (a writer may not have updated it), ignored when
        unreadable."""
        data = self._read_optional(self._path("_last_checkpoint"))
        try:
            hint = json.loads(data) if data else None
        except ValueError:
            return None
        if not isinstance(hint, dict) or not isinstance(hint.get("version"), int):
            return None
        version, v2, parts = hint["version"], hint.get("v2Checkpoint"), hint.get("parts")
        if isinstance(v2, dict) and isinstance(v2.get("path"), str):
            return version, [v2["path"].rsplit("/", 1)[-1]]
        if isinstance(parts, int) and parts > 0:
            return version, [f"{version:020d}.checkpoint.{part:010d}.{parts:010d}.parquet" for part in range(1, parts + 1)]
        return version, [f"{version:020d}.checkpoint.parquet"]

    def _listed_checkpoint(self) -> tuple[int, list[str]] | None:
        """The newest complete checkpoint in a listing of `_delta_log/`; None when the log starts at version 0."""
        from pyarrow import fs

        try:
            infos = self._fs.get_file_info(fs.FileSelector(self._log, allow_not_found=True))
        except OSError as exc:
            raise DeltaLogError(f"cannot list {self._log}: {exc}: check the path and the credentials "
                                "(storage_options)") from exc
        if not infos:
            raise DeltaLogError(f"{self.uri} is not a Delta table: there is no {self._log}: give the table's root "
                                "directory, the one holding _delta_log/")
        commits: list[int] = []
        found: dict[int, list[str]] = {}
        parts: dict[tuple[int, int], list[str]] = {}
        for info in infos:
            name = info.base_name
            if match := _COMMIT_NAME.match(name):
                commits.append(int(match.group(1)))
            elif (match := _CLASSIC_CHECKPOINT.match(name)) or (match := _V2_CHECKPOINT.match(name)):
                found.setdefault(int(match.group(1)), [name])
            elif match := _MULTIPART_CHECKPOINT.match(name):
                parts.setdefault((int(match.group(1)), int(match.group(3))), []).append(name)
        for (version, total), names in parts.items():
            if len(names) == total and version not in found:
                found[version] = sorted(names)
        if found:
            version = max(found)
            return version, found[version]
        if not commits:
            raise DeltaLogError(f"{self.uri} is not a Delta table: {self._log} holds no commit "
                                "(00000000000000000000.json) and no checkpoint: give the table's root directory")
        if min(commits) != 0:
            raise DeltaLogError(f"{self._log}: the log starts at version {min(commits)} without a checkpoint: the "
                                "commits before it are gone; write a checkpoint (Spark: a commit past "
                                "delta.checkpointInterval; delta-rs: DeltaTable.create_checkpoint()) to read it")
        return None

    def _look_back(self, started: int, need_compaction: bool) -> None:
        """The commit at the checkpoint and up to `compaction_lookback` before it, newest first, for the newest
        compaction (when the commits after the checkpoint hold none) and, with no commit after the checkpoint, the
        time of the last commit. Only the commitInfo line is read, the first of Spark's and delta-rs's commits."""
        need_time = self._last_commit is None
        searched = 0
        version = started
        while version >= 0 and (need_time or need_compaction and searched < self.compaction_lookback):
            path = self._commit(version)
            found, info = self._commit_info(path)
            if not found:
                break  # cleaned up: nothing older is left
            searched += 1
            if need_time:
                self._last_commit = _commit_time(info) or self._mtime(path)
                self._head_seen, need_time = True, False
            if need_compaction and info is not None and info.get("operation") in COMPACTION_OPERATIONS:
                self._last_compaction = max(self._last_compaction or 0.0, _commit_time(info) or self._mtime(path))
                need_compaction = False
            version -= 1

    # -- commits

    def _forward(self) -> int:
        """Reads every commit after the current version, in order; how many."""
        assert self._version is not None
        read = 0
        while (data := self._read_optional(path := self._commit(self._version + 1))) is not None:
            self._apply(self._version + 1, path, data)
            read += 1
        return read

    def _apply(self, version: int, path: str, data: bytes) -> None:
        """One commit, applied only once all of it is read: a failing commit is read again at the next read."""
        info: dict[str, Any] | None = None
        adds: list[dict[str, Any]] = []
        removes: list[dict[str, Any]] = []
        for action in _json_actions(path, data):
            if "add" in action:
                adds.append(action["add"])
            elif "remove" in action:
                removes.append(action["remove"])
            elif "commitInfo" in action:
                info = action["commitInfo"]
            elif "protocol" in action:
                self._check_protocol(action["protocol"], path)
            elif "metaData" in action:
                self._use_metadata(action["metaData"], path)
        try:
            kept = [(str(add["path"]), int(add["size"]), self._file_max(add.get("stats"))) for add in adds]
            gone = [str(remove["path"]) for remove in removes]
        except (KeyError, TypeError, ValueError) as exc:
            raise _corrupt(path, f"a file action is malformed ({exc!r})") from exc
        if not isinstance(info, dict):
            info = None
        for removed in gone:  # before the adds: a file re-added with a new deletion vector is removed first
            self._drop(removed)
        for key, size, top in kept:
            self._keep(key, size, top)
        self._version, self._head_seen = version, True
        operation = str(info.get("operation") or "UNKNOWN") if info else "UNKNOWN"
        self._commits[operation] += 1
        for kind, count in _row_counts(info.get("operationMetrics") if info else None).items():
            self._rows[operation, kind] += count
        when = _commit_time(info) or self._mtime(path)
        self._last_commit = when
        if operation in COMPACTION_OPERATIONS:
            self._last_compaction = max(self._last_compaction or 0.0, when)

    def _commit_info(self, path: str) -> tuple[bool, dict[str, Any] | None]:
        """(whether the commit exists, its commitInfo), reading only the first line when that is the commitInfo."""
        try:
            stream = self._fs.open_input_stream(path)
        except FileNotFoundError:
            return False, None
        except OSError as exc:
            raise _unreadable(path, exc) from exc
        self.log_files_read += 1
        with stream:
            head = b""
            while b"\n" not in head and (chunk := stream.read(65536)):
                head += chunk
            first, _, rest = head.partition(b"\n")
            for action in _json_actions(path, first):
                if isinstance(action.get("commitInfo"), dict):
                    return True, action["commitInfo"]
            for action in _json_actions(path, rest + stream.read()):
                if isinstance(action.get("commitInfo"), dict):
                    return True, action["commitInfo"]
        return True, None

    # -- checkpoints

    def _load_checkpoint(self, version: int, names: list[str]) -> None:
        """A classic, multi-part or V2 checkpoint: protocol and metadata first (the column's physical name is in
        the schema), then the live files of every part and sidecar."""
        import pyarrow as pa

        self._reset()
        with ExitStack() as files:
            parts: list[tuple[str, Any]] = []
            actions: list[dict[str, Any]] = []  # a JSON V2 checkpoint's
            for name in names:
                path = self._path(name)
                if name.endswith(".json"):
                    data = self._read_optional(path)
                    if data is None:
                        raise FileNotFoundError(path)
                    actions += _json_actions(path, data)
                else:
                    parts.append((path, self._open_parquet(path, files)))
            for action in actions:
                if "protocol" in action:
                    self._check_protocol(action["protocol"], self._path(names[0]))
                if "metaData" in action:
                    self._use_metadata(action["metaData"], self._path(names[0]))
            for path, part in parts:
                for kind, value in _parquet_actions(path, part, ("protocol", "metaData")):
                    if kind == "protocol":
                        self._check_protocol(value, path)
                    else:
                        self._use_metadata(value, path)
            sidecars = [action["sidecar"].get("path") for action in actions if isinstance(action.get("sidecar"), dict)]
            try:
                inline = [(str(add["path"]), int(add["size"]), self._file_max(add.get("stats")))
                          for action in actions if isinstance(add := action.get("add"), dict)]
            except (KeyError, TypeError, ValueError) as exc:
                raise _corrupt(self._path(names[0]), f"an add action is malformed ({exc!r})") from exc
            for key, size, top in inline:
                self._keep(key, size, top)
            for path, part in parts:
                self._keep_parquet_adds(path, part)
                sidecars += [sidecar.get("path") for _, sidecar in _parquet_actions(path, part, ("sidecar",))]
            for sidecar in sidecars:
                if not isinstance(sidecar, str) or "://" in sidecar or sidecar.startswith("/"):
                    raise DeltaLogError(f"{self._path(names[0])}: sidecar {sidecar} is not a file of "
                                        "_delta_log/_sidecars/, the only place cdcwatch reads sidecars from: write "
                                        "checkpoints with relative sidecar paths")
                path = self._path(f"_sidecars/{sidecar}")
                try:
                    self._keep_parquet_adds(path, self._open_parquet(path, files))
                except FileNotFoundError as exc:
                    raise _corrupt(self._path(names[0]), f"its sidecar {path} is missing") from exc
        self._version = version
        pa.default_memory_pool().release_unused()  # the Parquet buffers: kept, they would cost ~5 MiB a table

    def _open_parquet(self, path: str, files: ExitStack) -> Any:
        """A checkpoint part or sidecar, closed with `files`; FileNotFoundError passes through."""
        from pyarrow import parquet

        try:
            stream = files.enter_context(self._fs.open_input_file(path))
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise _unreadable(path, exc) from exc
        self.log_files_read += 1
        try:
            return parquet.ParquetFile(stream)
        except (OSError, ValueError) as exc:  # ArrowInvalid: not Parquet
            raise _corrupt(path, f"not a Parquet checkpoint ({exc})") from exc

    def _keep_parquet_adds(self, path: str, part: Any) -> None:
        """The add actions of a checkpoint part or sidecar, reading only path, size and the column's stats:
        `stats_parsed` when the checkpoint has the column there (delta.checkpoint.writeStatsAsStruct), else the
        `stats` JSON."""
        import pyarrow as pa
        import pyarrow.compute as pc

        available = _leaf_paths(part.schema_arrow)
        if "add.path" not in available:
            return  # a V2 checkpoint whose files are all in sidecars
        columns = ["add.path", "add.size"]
        column = self._column
        parsed = column is not None and "." not in column.physical \
            and f"add.stats_parsed.maxValues.{column.physical}" in available
        if parsed:
            assert column is not None
            columns += [name for name in (f"add.stats_parsed.maxValues.{column.physical}",
                                          f"add.stats_parsed.nullCount.{column.physical}",
                                          "add.stats_parsed.numRecords") if name in available]
        elif column is not None and "add.stats" in available:
            columns.append("add.stats")
        try:
            table = part.read(columns=columns, use_threads=False)
        except (OSError, ValueError) as exc:
            raise _corrupt(path, f"cannot be read as Parquet ({exc})") from exc
        adds = table.column("add").combine_chunks()
        adds = adds.filter(adds.is_valid())
        paths = pc.struct_field(adds, "path").to_pylist()
        sizes = pc.struct_field(adds, "size").to_pylist()
        maxima: list[float | None]
        if parsed:
            assert column is not None
            stats = pc.struct_field(adds, "stats_parsed")
            top = pc.struct_field(stats, ["maxValues", column.physical])
            if column.millis and pa.types.is_integer(top.type):
                values = [None if value is None else value / 1000 for value in top.to_pylist()]
            elif not column.millis and pa.types.is_timestamp(top.type):
                scale = {"s": 1, "ms": 1e3, "us": 1e6, "ns": 1e9}[top.type.unit]
                values = [None if value is None else value / scale for value in pc.cast(top, pa.int64()).to_pylist()]
            else:
                raise _corrupt(path, f"stats_parsed of {column.name} is {top.type}, not what the schema's type "
                                     "gives")
            nulls = _struct_values(stats, ["nullCount", column.physical])
            records = _struct_values(stats, ["numRecords"])
            maxima = [value if value is not None else _NO_VALUE if nulls[row] is not None or records[row] == 0
                      else None for row, value in enumerate(values)]
        elif "add.stats" in columns:
            try:
                maxima = [self._file_max(stats) for stats in pc.struct_field(adds, "stats").to_pylist()]
            except (TypeError, ValueError) as exc:
                raise _corrupt(path, f"an add's stats are malformed ({exc!r})") from exc
        else:
            maxima = [None] * len(paths)
        for key, size, top_value in zip(paths, sizes, maxima, strict=True):
            self._keep(key, size, top_value)

    # -- protocol and metadata

    def _check_protocol(self, protocol: Mapping[str, Any], path: str) -> None:
        version = protocol.get("minReaderVersion", 1)
        if not isinstance(version, int) or version > _MAX_READER_VERSION:
            raise DeltaLogError(f"{path}: the table needs Delta reader version {version}; cdcwatch reads up to "
                                f"{_MAX_READER_VERSION}: watch this table once cdcwatch supports it")
        features = (protocol.get("readerFeatures") or []) if version == 3 else []
        unsupported = sorted(set(features) - _READER_FEATURES)
        if unsupported:
            raise DeltaLogError(f"{path}: the table uses reader feature(s) {', '.join(unsupported)}, which cdcwatch's "
                                "Delta log reader does not support (it reads "
                                f"{', '.join(sorted(_READER_FEATURES))}): drop the feature where Delta allows it "
                                "(ALTER TABLE ... DROP FEATURE) or leave this table out")

    def _use_metadata(self, metadata: Mapping[str, Any], path: str) -> None:
        try:
            self._schema = list(json.loads(metadata["schemaString"])["fields"])
        except (KeyError, TypeError, ValueError) as exc:
            raise _corrupt(path, f"its metaData has no readable schemaString ({exc!r})") from exc
        self._configuration = dict(metadata.get("configuration") or {})
        self._partition_columns = list(metadata.get("partitionColumns") or [])
        self._column, self._column_problem = self._resolve_column(path)

    def _resolve_column(self, path: str) -> tuple[_Column | None, str | None]:
        name = self.commit_time_column
        if name is None:
            return None, None
        fields = {field.get("name"): field for field in self._schema if isinstance(field, dict)}
        field = fields.get(name)
        if field is None:
            columns = ", ".join(str(key) for key in fields)
            return None, (f"{self.uri}: commit_time_column {name!r} is not a column of the table (schema in {path}: "
                          f"{columns}): name a top-level timestamp column or a long of epoch milliseconds")
        if name in self._partition_columns:
            return None, (f"{self.uri}: commit_time_column {name!r} is a partition column, which has no min/max "
                          "statistics in the log: name a data column")
        kind = field.get("type")
        if kind not in ("timestamp", "timestamp_ntz", "long"):
            return None, (f"{self.uri}: commit_time_column {name!r} is of type {json.dumps(kind)}: it must be a "
                          "timestamp (or timestamp_ntz) column or a long of epoch milliseconds")
        metadata = field.get("metadata") or {}
        mode = self._configuration.get("delta.columnMapping.mode", "none")
        physical = metadata.get("delta.columnMapping.physicalName", name) if mode != "none" else name
        return _Column(name, str(physical), kind == "long"), None

    def _no_stats_problem(self) -> str:
        """Why no live file has stats for the column, and the table property that fixes it."""
        name = self.commit_time_column
        listed = self._configuration.get("delta.dataSkippingStatsColumns")
        later = ("; files written before the change keep no stats for it until they are rewritten (OPTIMIZE, or "
                 "Spark's ANALYZE TABLE ... COMPUTE DELTA STATISTICS)")
        if listed is not None:
            return (f"{self.uri}: no live file has statistics for commit_time_column {name!r}: the table collects "
                    f"them only for delta.dataSkippingStatsColumns={listed!r}: add {name!r} to it{later}")
        indexed = int(self._configuration.get("delta.dataSkippingNumIndexedCols", "32"))
        position = _leaf_position(self._schema, str(name), self._partition_columns)
        if indexed >= 0 and position is not None and position >= indexed:
            return (f"{self.uri}: no live file has statistics for commit_time_column {name!r}: it is column "
                    f"{position + 1} and the table collects them for its first {indexed} "
                    f"(delta.dataSkippingNumIndexedCols): set delta.dataSkippingNumIndexedCols to at least "
                    f"{position + 1}, or list {name!r} in delta.dataSkippingStatsColumns{later}")
        return (f"{self.uri}: no live file has statistics for commit_time_column {name!r}: the writer wrote none, or "
                "the checkpoint dropped them (delta.checkpoint.writeStatsAsJson=false without "
                "delta.checkpoint.writeStatsAsStruct=true): set delta.checkpoint.writeStatsAsJson=true and have the "
                f"writer collect statistics{later}")

    # -- live files

    def _file_max(self, stats: str | None) -> float | None:
        """The column's max in an add's stats JSON, in seconds; _NO_VALUE when the stats say it holds none; None
        without stats for it."""
        column = self._column
        if column is None or stats is None:
            return None
        parsed = json.loads(stats)
        if not isinstance(parsed, dict):
            raise ValueError(f"stats are not a JSON object: {stats[:80]!r}")
        maxima, nulls = parsed.get("maxValues"), parsed.get("nullCount")
        value = maxima.get(column.physical) if isinstance(maxima, dict) else None
        if value is not None:
            if column.millis:
                return float(value) / 1000
            moment = datetime.fromisoformat(value)
            return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
        if isinstance(nulls, dict) and column.physical in nulls or parsed.get("numRecords") == 0:
            return _NO_VALUE
        return None

    def _keep(self, key: str, size: int, top: float | None) -> None:
        if key in self._files:  # re-added (new stats or deletion vector)
            self._drop(key)
        self._files[key] = (size, top)
        self._bytes += size
        self._small += size < self.small_file_bytes
        if top is None:
            self._unindexed += 1
        elif not self._newest_stale and (self._newest is None or top > self._newest):
            self._newest = top

    def _drop(self, key: str) -> None:
        entry = self._files.pop(key, None)
        if entry is None:
            return  # removed before the checkpoint the reader started from
        size, top = entry
        self._bytes -= size
        self._small -= size < self.small_file_bytes
        if top is None:
            self._unindexed -= 1
        elif self._newest is not None and top >= self._newest:
            self._newest_stale = True

    def _newest_value(self) -> float | None:
        if self._newest_stale:
            self._newest = max((top for _, top in self._files.values() if top is not None), default=None)
            self._newest_stale = False
        return None if self._newest is None or self._newest == _NO_VALUE else self._newest

    # -- storage

    def _path(self, name: str) -> str:
        return f"{self._log}/{name}"

    def _commit(self, version: int) -> str:
        return f"{self._log}/{version:020d}.json"

    def _read_optional(self, path: str) -> bytes | None:
        try:
            with self._fs.open_input_stream(path) as stream:
                data: bytes = stream.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _unreadable(path, exc) from exc
        self.log_files_read += 1
        return data

    def _exists(self, path: str) -> bool:
        from pyarrow import fs

        try:
            return bool(self._fs.get_file_info(path).type != fs.FileType.NotFound)
        except OSError as exc:
            raise _unreadable(path, exc) from exc

    def _mtime(self, path: str) -> float:
        try:
            mtime = self._fs.get_file_info(path).mtime_ns
        except OSError as exc:
            raise _unreadable(path, exc) from exc
        return mtime / 1e9 if mtime is not None else 0.0


def _filesystem(uri: str, storage_options: Mapping[str, Any] | None) -> tuple[Any, str]:
    """The pyarrow filesystem and the path in it of a table URI."""
    from pyarrow import fs

    scheme, separator, rest = uri.partition("://")
    if not separator:
        scheme, rest = "", uri
    scheme = scheme.lower()
    if not storage_options:
        try:
            filesystem, path = fs.FileSystem.from_uri("s3://" + rest if scheme == "s3a" else uri)
            return filesystem, str(path)
        except (OSError, ValueError) as exc:
            raise DeltaLogError(f"{uri}: pyarrow cannot open this location ({exc}): use a local path, file://, s3://, "
                                "gs:// or abfs[s]:// URI") from exc
    if scheme not in _STORAGE_SCHEMES:
        raise DeltaLogError(f"{uri}: storage_options apply to s3://, gs:// and abfs[s]:// tables only: leave them out "
                            "for a local path")
    options = dict(storage_options)
    path = rest.split("?", 1)[0]
    if scheme in ("abfs", "abfss"):  # container@account.dfs.core.windows.net/path → container/path
        authority, _, inner = path.partition("/")
        container, at, host = authority.partition("@")
        if at:
            options.setdefault("account_name", host.split(".", 1)[0])
        path = f"{container}/{inner}"
    kind = _STORAGE_SCHEMES[scheme]
    try:
        return getattr(fs, kind)(**options), path.rstrip("/")
    except (TypeError, ValueError, OSError) as exc:
        raise DeltaLogError(f"{uri}: pyarrow.fs.{kind} refused storage_options {sorted(options)} ({exc}): give "
                            f"keyword arguments of pyarrow.fs.{kind}") from exc


def _json_actions(path: str, data: bytes) -> list[dict[str, Any]]:
    actions = []
    for number, line in enumerate(data.splitlines(), 1):
        if line.strip():
            try:
                action = json.loads(line)
            except ValueError as exc:
                raise _corrupt(path, f"line {number} is not JSON ({exc})") from exc
            if isinstance(action, dict):
                actions.append(action)
    return actions


def _parquet_actions(path: str, part: Any, kinds: tuple[str, ...]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The non-null rows of the given top-level action columns of a checkpoint part."""
    present = [kind for kind in kinds if kind in part.schema_arrow.names]
    if not present:
        return
    try:
        table = part.read(columns=present, use_threads=False)
    except (OSError, ValueError) as exc:
        raise _corrupt(path, f"cannot be read as Parquet ({exc})") from exc
    for kind in present:
        column = table.column(kind)
        for value in column.filter(column.is_valid()).to_pylist():
            if kind == "metaData" and isinstance(value.get("configuration"), list):  # a Parquet map: key/value pairs
                value["configuration"] = dict(value["configuration"])
            yield kind, value


def _leaf_paths(schema: Any) -> set[str]:
    """Every dotted field path of an Arrow schema (structs walked), to select only columns a checkpoint has."""
    import pyarrow as pa

    paths: set[str] = set()

    def walk(prefix: str, field: Any) -> None:
        name = f"{prefix}{field.name}"
        paths.add(name)
        if pa.types.is_struct(field.type):
            for child in field.type:
                walk(name + ".", child)

    for field in schema:
        walk("", field)
    return paths


def _struct_values(array: Any, names: list[str]) -> list[Any]:
    import pyarrow.compute as pc

    try:
        return list(pc.struct_field(array, names).to_pylist())
    except (KeyError, ValueError, IndexError):  # the checkpoint does not have that field
        return [None] * len(array)


def _leaf_position(schema: list[dict[str, Any]], name: str, partition_columns: list[str]) -> int | None:
    """The column's position among the leaf columns stats are collected for (data columns in schema order, nested
    fields each counting): what delta.dataSkippingNumIndexedCols is compared with."""
    position = 0
    for field in schema:
        if field.get("name") in partition_columns:
            continue
        if field.get("name") == name:
            return position
        position += _leaves(field.get("type"))
    return None


def _leaves(kind: Any) -> int:
    if isinstance(kind, dict) and kind.get("type") == "struct":
        return sum(_leaves(field.get("type")) for field in kind.get("fields", []))
    return 1


def _commit_time(info: Mapping[str, Any] | None) -> float | None:
    """A commit's time in seconds: inCommitTimestamp (the authoritative one where the table has in-commit
    timestamps), else timestamp (the writer's clock)."""
    if not info:
        return None
    value = info.get("inCommitTimestamp", info.get("timestamp"))
    return value / 1000 if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _row_counts(metrics: object) -> dict[str, int]:
    """Rows by kind from a commit's operationMetrics; a metric that is present counts even at 0, so the series
    exist from the first such commit."""
    if not isinstance(metrics, dict):
        return {}
    counts: Counter[str] = Counter()
    named = [name for name in metrics if name in _ROW_METRICS]
    for name in named or [name for name in _OUTPUT_ROWS if name in metrics]:
        count = _count(metrics[name])
        if count is not None:
            counts[_ROW_METRICS.get(name, "inserted")] += count
    return dict(counts)


def _count(value: object) -> int | None:
    """A metric's value: Spark writes strings, delta-rs numbers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def _corrupt(path: str, what: str) -> DeltaLogError:
    return DeltaLogError(f"{path}: {what}: the log file is corrupt or not written by a Delta writer; restore it (object "
                         "versioning, a backup); until then the table cannot be read past it")


def _unreadable(path: str, exc: OSError) -> DeltaLogError:
    return DeltaLogError(f"cannot read {path}: {exc}: check that it is readable with the credentials given "
                         "(storage_options, the environment)")
