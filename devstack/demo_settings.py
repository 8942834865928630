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
DEMO_DURATIONS = {"critical": "10s", "warning": "15s", "instant": "2s", "stalled": "60s", "freshness_window": "15s",
                  "recovery": "20s", "catch_up": "5s"}
SPARK_FRESHNESS_SECONDS = 30
DEMO_THRESHOLDS = {"spark_apply_lag_seconds": APPLY_LAG_THRESHOLD_SECONDS, "spark_freshness_seconds": SPARK_FRESHNESS_SECONDS,
                   "kafka_lag_seconds": 30, "debezium_lag_seconds": 30, "freshness_idle_proof_seconds": 10}
DEMO_MIXIN = {"durations": DEMO_DURATIONS, "thresholds": DEMO_THRESHOLDS}
"""The demo's alert timings: seconds instead of minutes, so a scenario shows its alert quickly."""
SINKS = ("spark", "jdbc")
"""What applies the changes to the target: the Spark apply job with the listener, or the Debezium JDBC sink connector
in the same Kafka Connect worker (no Spark: freshness from the canary)."""
SINK_CONNECTOR = "demo-sink"
CANARY_TABLE = "public.cdc_canary"
"""The canary: the connector's heartbeat.action.query writes its one row each heartbeat (the JDBC-sink shape)."""
CANARY_INTERVAL_SECONDS = 1.0
DLQ_TOPIC = "demo-sink-dlq"
CANARY_AGE_SECONDS = 30
SCHEMA_DRIFT_SECONDS = 20
JDBC_MIXIN = {"stages": {"spark": False}, "durations": {**DEMO_DURATIONS, "loss_window": "30s"},
              "thresholds": {**DEMO_THRESHOLDS, "schema_drift_seconds": SCHEMA_DRIFT_SECONDS,
                             "canary_age_seconds": CANARY_AGE_SECONDS}}
"""The JDBC-sink shape's rules: no Spark stage, records lost or dead-lettered alerted for 30 s after the last one, a
column missing in the target alerted after 20 s."""
MIXINS = {"spark": DEMO_MIXIN, "jdbc": JDBC_MIXIN}
"""The mixin configuration of each shape (`SINKS`)."""
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
