"""The demo's names and timings, shared by the demo, its scenarios and its tests."""

from __future__ import annotations

SERVER = "demo"
CHANGES_TOPIC = f"{SERVER}.public.customers"
SLOT = "demo_slot"
PUBLICATION = f"{SLOT}_pub"
"""The connector's publication (publication.autocreate.mode filtered): cdcwatch's row estimates come from its tables."""
SIGNAL_TABLE = "public.debezium_signal"
"""Debezium's signal table (signal.data.collection): an `execute-snapshot` row starts an incremental snapshot."""
SNAPSHOT_TABLE = "public.orders"
"""A captured table no traffic writes: the `snapshot` scenario snapshots it again and counts its rows."""
SNAPSHOT_TABLE_ROWS = 15000
SNAPSHOT_CHUNK_ROWS = 500
"""incremental.snapshot.chunk.size: 30 chunks of the orders table, so its incremental snapshot lasts several scrapes."""
SLOT_KEEP_MB = 128
"""The source's max_slot_wal_keep_size: the slot's safe_wal_size, and so its runway, is reported."""
QUERY = "demo_apply"
COMMIT_GROUP = "demo-apply"
CONNECTOR = "demo-connector"
STATE_FILE = "demo.json"
APPLY_RATE = 2000
"""Records per micro-batch (about per second): a burst larger than this builds real apply lag."""
APPLY_LAG_THRESHOLD_SECONDS = 15
DEMO_MIXIN = {"durations": {"critical": "10s", "warning": "15s", "instant": "2s", "stalled": "60s",
                            "freshness_window": "15s"},
              "thresholds": {"spark_apply_lag_seconds": APPLY_LAG_THRESHOLD_SECONDS, "spark_freshness_seconds": 30,
                             "kafka_lag_seconds": 30, "debezium_lag_seconds": 30, "freshness_idle_proof_seconds": 10}}
"""The demo's alert timings: seconds instead of minutes, so a scenario shows its alert quickly."""
STATUS_WINDOW_SAMPLES = 5
"""cdcwatch's consumer-status window in the demo: a frozen consumer reads STOP after this many scrapes."""
SCRAPE_INTERVAL = "3s"
"""Prometheus scrape and evaluation interval (and scrape timeout); every collector's deadline stays below it."""
RECONCILE_PAIR = "customers"
"""The demo's reconciled table pair (cdcwatch's `reconcile` collector on public.customers)."""
RECONCILE_SETTLE_SECONDS = 10
RECONCILE_CONFIRM_RECHECKS = 2
"""A differing row counts as diverged after 2 re-checks 10 s apart: longer than the demo pipeline takes to apply a
change (3-6 s), so its freshness gate stays open while the pipeline flows."""
QUIET_EVALUATIONS = 5
"""Rule evaluations in a row without a pending or firing alert before the demo says it is ready."""
CATCH_UP_SECONDS = 300
"""How long the demo waits for that at most (it then says which alerts are still active, and runs on)."""
