"""The reference apply target fed from a real connector's events file, for the tests that need a pipeline's target
without Kafka and Spark (reconciliation, the canary)."""

from __future__ import annotations

import http.server
import json
import threading
import time
from pathlib import Path

from cdcwatch.events import Kind, decode
from devstack.procs import StackError, free_port
from spark_listeners.target import STAGE_COLUMNS, PostgresTarget

__all__ = ["Applier"]


class Applier:
    """The reference apply target fed from a connector's events file, in order, every `interval` seconds; reports
    the pipeline's freshness as the apply job's listener does: the age of the newest applied change or heartbeat, and
    the source commit time of the newest applied change (what the reconciliation's freshness gate reads)."""

    def __init__(self, dsn: str, schema: str, events_file: Path, interval: float = 0.3) -> None:
        self.target = PostgresTarget(dsn, schema)
        self.target.create()
        self.events_file, self.interval = events_file, interval
        self.done = 0
        self.batch = 0
        self.newest = 0.0
        self.newest_change = 0.0
        self.errors: list[BaseException] = []
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.port = free_port()
        applier = self

        class Metrics(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = ((f"cdcwatch_spark_freshness_seconds{{query=\"it\"}} {max(time.time() - applier.newest, 0):.3f}\n"
                         if applier.newest else "")
                        + (f"cdcwatch_spark_newest_applied_change_timestamp_seconds{{query=\"it\"}} "
                           f"{applier.newest_change!r}\n" if applier.newest_change else "")).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Metrics)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.thread.start()

    def running(self) -> bool:
        """True while it applies; a failure of its own (a line it could not read) ends any wait at once."""
        if self.errors:
            raise StackError(f"the applier failed: {self.errors!r}")
        return True

    @property
    def freshness_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def _lines(self) -> list[str]:
        text = self.events_file.read_text(encoding="utf-8") if self.events_file.exists() else ""
        return text.split("\n")[:-1]  # a line being written has no newline yet

    def step(self, replay: int = 0) -> None:
        """Apply the lines not applied yet, and the `replay` lines before them again."""
        with self.lock:
            self._step(replay)

    def _step(self, replay: int) -> None:
        lines = self._lines()
        rows, newest, newest_change = [], self.newest, self.newest_change
        for offset, line in enumerate(lines[max(self.done - replay, 0):], max(self.done - replay, 0)):
            record = json.loads(line)  # (the engine cuts a line a kill -9 left unfinished before it writes again)
            event = decode(record["key"], record["value"], record["destination"])
            if event.kind is Kind.HEARTBEAT and event.emitted_time_ns:
                newest = max(newest, event.emitted_time_ns / 1e9)
            elif event.is_row_change and event.position is not None and event.key is not None:
                rows.append({"topic": record["destination"], "partition": 0, "offset": offset,
                             "table_id": str(event.table), "row_key": json.dumps(event.key, separators=(",", ":")),
                             "op": event.op.value if event.op else None, "position": event.position.sortable(),
                             "after": json.dumps(event.after, separators=(",", ":"), sort_keys=True)
                             if event.after is not None else None, "commit_time": event.commit_time,
                             **dict.fromkeys(STAGE_COLUMNS)})
                newest_change = max(newest_change, event.commit_time or 0.0)
        if rows:
            self.batch += 1
            self.target.stage(self.batch, rows)
            self.target.merge(self.batch)
        self.done, self.newest_change, self.newest = len(lines), newest_change, max(newest, newest_change)

    def _run(self) -> None:
        while not self.stopping.wait(self.interval):
            try:
                self.step()
            except Exception as exc:  # reported by the test
                self.errors.append(exc)
                return

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)
        self.http.shutdown()
