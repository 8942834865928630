"""The canary where it lands in a Delta table (the apply job's `--target delta:ROOT`): its newest time is the canary
column's largest value over the live files' statistics, read from the transaction log as the `delta` collector reads
a table's commit-time column. No data file is read, and a scrape reads only the commits since the last one."""

from __future__ import annotations

from cdcwatch.delta.log import DeltaLog, DeltaLogError

__all__ = ["DeltaCanaryReader"]


class DeltaCanaryReader:
    """The `newest_time` of a canary side (`cdcwatch.canary`) for a Delta table at `uri`."""

    def __init__(self, side: str, uri: str) -> None:
        self.side = side
        self.uri = uri
        self._log: DeltaLog | None = None

    def newest_time(self, column: str) -> float | None:
        """Seconds since 1970 of the newest canary the table holds; None before a file holds one."""
        if self._log is None or self._log.commit_time_column != column:
            self._log = DeltaLog(self.uri, column)
        try:
            return self._log.read().newest_commit_time
        except DeltaLogError as exc:
            raise RuntimeError(f"{self.side}: {exc}") from exc

    def close(self) -> None:
        """Forget what was read: the next read starts from the newest checkpoint."""
        self._log = None
