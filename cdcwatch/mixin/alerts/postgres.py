"""PostgreSQL replication slots: a slot nobody reads, WAL piling up, WAL about to be lost."""

from cdcwatch.mixin.alerts.examples import SLOT
from cdcwatch.mixin.alerts.model import Alert, Case, Group, labels_of

__all__ = ["GROUP"]

_ACTIVE = f'{SLOT},slot_type="logical",plugin="pgoutput",database="shop"'
_KEY = "job, instance, target, slot, server"

ALERTS = (
    Alert(
        "CdcPostgresSlotInactive",
        "cdcwatch_postgres_replication_slot_active{%(cdcwatch)s} == 0",
        "warning", "warning",
        "Replication slot {{ $labels.slot }} has no consumer",
        "Nobody has read slot {{ $labels.slot }} (server {{ $labels.server }}) for %(for)s; it keeps WAL on the "
        "database's disk until its connector comes back.",
        fires=Case("inactive", {f"cdcwatch_postgres_replication_slot_active{{{_ACTIVE}}}": "0x40"}, labels=labels_of(_ACTIVE)),
        quiet=Case("active", {f"cdcwatch_postgres_replication_slot_active{{{_ACTIVE}}}": "1x40"}),
    ),
    Alert(
        "CdcPostgresSlotRetainedWalHigh",
        f"max by ({_KEY}) (cdcwatch_postgres_replication_slot_retained_wal_bytes{{%(cdcwatch)s}}) > %(slot_retained_wal_bytes)s",
        "warning", "warning",
        "Replication slot {{ $labels.slot }} holds back too much WAL",
        "Slot {{ $labels.slot }} keeps {{ $value | humanize1024 }}B of WAL (threshold %(slot_retained_wal_bytes)s "
        "bytes); the database disk fills while its connector lags.",
        fires=Case("20 GB", {f"cdcwatch_postgres_replication_slot_retained_wal_bytes{{{SLOT}}}": "20000000000x40"},
                   labels=labels_of(SLOT), value=20000000000),
        quiet=Case("1 MB", {f"cdcwatch_postgres_replication_slot_retained_wal_bytes{{{SLOT}}}": "1000000x40"}),
    ),
    Alert(
        "CdcPostgresSlotWalAtRisk",
        'cdcwatch_postgres_replication_slot_wal_status{%(cdcwatch)s, wal_status=~"unreserved|lost"} == 1',
        "critical", "instant",
        "Replication slot {{ $labels.slot }} is losing WAL",
        "Slot {{ $labels.slot }} is {{ $labels.wal_status }}: WAL its connector still needs is past "
        "max_slot_wal_keep_size; once lost, the connector must snapshot again.",
        fires=Case("unreserved", {f'cdcwatch_postgres_replication_slot_wal_status{{{SLOT},wal_status="unreserved"}}': "1x40"},
                   labels=labels_of(SLOT, 'wal_status="unreserved"'), value=1),
        quiet=Case("reserved", {f'cdcwatch_postgres_replication_slot_wal_status{{{SLOT},wal_status="unreserved"}}': "0x40"}),
    ),
    Alert(
        "CdcPostgresSlotSafeWalRunningOut",
        "predict_linear(cdcwatch_postgres_replication_slot_safe_wal_size_bytes{%(cdcwatch)s}[1h], "
        "%(slot_safe_wal_horizon_seconds)s) < 0",
        "warning", "warning",
        "Replication slot {{ $labels.slot }} will start losing WAL",
        "At the rate of the last hour, slot {{ $labels.slot }} (server {{ $labels.server }}) uses up its "
        "safe_wal_size within %(slot_safe_wal_horizon_seconds)ss; then WAL its connector needs becomes removable.",
        fires=Case("shrinking 50 MB a minute from 10 GB", {
            f"cdcwatch_postgres_replication_slot_safe_wal_size_bytes{{{SLOT}}}": "10000000000-50000000x40"},
            labels=labels_of(SLOT), value=10000000000 - 50000000 * 20 - 50000000 / 60 * 21600),
        quiet=Case("steady", {f"cdcwatch_postgres_replication_slot_safe_wal_size_bytes{{{SLOT}}}": "10000000000x40"}),
        since="1m", boundary_value=10000000000 - 50000000 * 11 - 50000000 / 60 * 21600,
    ),
)

GROUP = Group("cdcwatch-postgres", (), ALERTS)
