"""Debezium PostgreSQL change events (JSON converter, no schema envelope) with the timestamps a test chooses."""

from __future__ import annotations

import json

__all__ = ["change_event"]


def change_event(server: str, table: str, row_id: int, commit_ms: int, emitted_ms: int, lsn: int) -> tuple[bytes, bytes]:
    """Key and value of an insert of row `row_id` committed at `commit_ms` (source.ts_ms) and processed by the
    connector at `emitted_ms` (payload.ts_ms), both ms since the epoch."""
    source = {"version": "3.6.1.Final", "connector": "postgresql", "name": server, "ts_ms": commit_ms, "snapshot": "false",
              "db": "shop", "sequence": f'[null,"{lsn}"]', "schema": "public", "table": table, "txId": lsn, "lsn": lsn,
              "xmin": None}
    payload = {"before": None, "after": {"id": row_id, "name": f"row {row_id}"}, "source": source, "op": "c",
               "ts_ms": emitted_ms, "transaction": None}
    return json.dumps({"id": row_id}).encode(), json.dumps(payload).encode()
