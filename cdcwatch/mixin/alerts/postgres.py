"""PostgreSQL replication slots: a slot nobody reads, WAL piling up, WAL about to be lost, and how long the
slot's safe_wal_size lasts at the rate WAL is written (its runway)."""

# ruff: noqa: E501 (each rule's PromQL is one literal block, its lines as long as in the rule file)

from cdcwatch.mixin.alerts.examples import DBZ, SLOT, SOURCE
from cdcwatch.mixin.alerts.model import Alert, Case, Group, Recording, labels_of

__all__ = ["GROUP"]

_ACTIVE = f'{SLOT},slot_type="logical",plugin="pgoutput",database="shop"'
_POSITION = "cdcwatch_postgres_wal_position_bytes"
_SAFE = "cdcwatch_postgres_replication_slot_safe_wal_size_bytes"
_RETAINED = "cdcwatch_postgres_replication_slot_retained_wal_bytes"
_MB_A_SECOND = "0+60000000x40"
"""The WAL position of a source writing 1 MB of WAL a second (60 MB between two one-minute samples)."""

RECORDINGS = (
    # the position is a gauge (a failover can move it back): its slope, never below 0, is the WAL rate
    Recording("target:cdcwatch_postgres_wal_position_bytes:deriv5m",
              "clamp_min(deriv(cdcwatch_postgres_wal_position_bytes{%(cdcwatch)s}[5m]), 0)",
              Case("1 MB a second", {f"{_POSITION}{{{SOURCE}}}": _MB_A_SECOND}, labels=labels_of(SOURCE), value=1000000)),
    # seconds until the slot's safe_wal_size runs out if it stops advancing (+Inf while no WAL is written)
    Recording("slot:cdcwatch_postgres_replication_slot_safe_wal_runway_seconds:deriv5m", """
        last_over_time(cdcwatch_postgres_replication_slot_safe_wal_size_bytes{%(cdcwatch)s}[%(scrape_gap)s])
        / on (job, instance, target) group_left ()
          target:cdcwatch_postgres_wal_position_bytes:deriv5m
        """,
              Case("18.8 GB left at 1 MB a second", {f"{_POSITION}{{{SOURCE}}}": _MB_A_SECOND,
                                                     f"{_SAFE}{{{SLOT}}}": "20000000000-60000000x40"},
                   labels=labels_of(SLOT), value=18800)),
)


def _runway_series(safe: str, retained: str, position: str = _MB_A_SECOND) -> dict[str, str]:
    return {f"{_POSITION}{{{SOURCE}}}": position, f"{_SAFE}{{{SLOT}}}": safe, f"{_RETAINED}{{{SLOT}}}": retained}


_KEEPING_UP = Case("a slot that keeps up with a write burst: 1 GB budget, 1000 s of it, 16 MB held",
                   _runway_series("1000000000x40", "16000000x40"))

ALERTS = (
    Alert(
        "CdcPostgresSourceUnreachable",
        # the servers its slots fed in the last `durations.memory` (the slots' series go with the database), while
        # cdcwatch cannot reach it and no connector of theirs streams: the source is down, not cdcwatch's access to it
        """
        max by (job, instance, target, server) (last_over_time(cdcwatch_postgres_replication_slot_active{%(cdcwatch)s, server!=""}[%(memory)s])) * 0 + 1
        and on (job, instance, target) cdcwatch_up{%(cdcwatch)s, collector="postgres"} == 0
        unless on (server) cdcwatch_debezium_connected{%(cdcwatch)s, context="streaming"} == 1
        """,
        "critical", "critical",
        "The PostgreSQL source of {{ $labels.server }} is unreachable",
        "Neither cdcwatch nor the connector of {{ $labels.server }} has reached the PostgreSQL source "
        "{{ $labels.target }} for %(for)s: nothing of it is captured. cdcwatch's log and cdcwatch_target_failure_info "
        "say why (refused, timeout, authentication); the connector retries and resumes from its slot once the "
        "database answers.",
        fires=Case("the database stopped at 5 minutes, its connector's beans gone with the task's restart",
                   {f"cdcwatch_postgres_replication_slot_active{{{_ACTIVE}}}": "1x4 stale",
                    f'cdcwatch_up{{{SOURCE},collector="postgres"}}': "1x4 0x36",
                    f'cdcwatch_debezium_connected{{{DBZ},context="streaming"}}': "1x4 stale"},
                   labels={**labels_of(SOURCE), "server": "inventory"}, value=1),
        quiet=Case("the database answers", {f"cdcwatch_postgres_replication_slot_active{{{_ACTIVE}}}": "1x40",
                                            f'cdcwatch_up{{{SOURCE},collector="postgres"}}': "1x40",
                                            f'cdcwatch_debezium_connected{{{DBZ},context="streaming"}}': "1x40"}),
        since="5m",
        more=(Case("cdcwatch cannot reach it while its connector streams: cdcwatch's access (CdcwatchTargetDown warns)",
                   {f"cdcwatch_postgres_replication_slot_active{{{_ACTIVE}}}": "1x4 stale",
                    f'cdcwatch_up{{{SOURCE},collector="postgres"}}': "1x4 0x36",
                    f'cdcwatch_debezium_connected{{{DBZ},context="streaming"}}': "1x40"}),),
        through_recovery=True,
    ),
    Alert(
        "CdcPostgresSlotInactive",
        "last_over_time(cdcwatch_postgres_replication_slot_active{%(cdcwatch)s}[%(scrape_gap)s]) == 0",
        "warning", "warning",
        "Replication slot {{ $labels.slot }} has no consumer",
        "Nobody has read slot {{ $labels.slot }} (server {{ $labels.server }}) for %(for)s; it keeps WAL on the "
        "database's disk until its connector comes back.",
        fires=Case("inactive", {f"cdcwatch_postgres_replication_slot_active{{{_ACTIVE}}}": "0x40"}, labels=labels_of(_ACTIVE)),
        quiet=Case("active", {f"cdcwatch_postgres_replication_slot_active{{{_ACTIVE}}}": "1x40"}),
    ),
    Alert(
        "CdcPostgresSlotRetainedWalHigh",
        "max by (job, instance, target, slot, server) (last_over_time(cdcwatch_postgres_replication_slot_retained_wal_bytes{%(cdcwatch)s}[%(scrape_gap)s])) > %(slot_retained_wal_bytes)s",
        "warning", "warning",
        "Replication slot {{ $labels.slot }} holds back too much WAL",
        "Slot {{ $labels.slot }} keeps {{ $value | humanize1024 }}B of WAL (threshold %(slot_retained_wal_bytes)s "
        "bytes); the database disk fills while its connector lags, or while a caught-up connector on quiet tables "
        "confirms no newer position (no heartbeat.action.query: see the runbook).",
        fires=Case("20 GB", {f"cdcwatch_postgres_replication_slot_retained_wal_bytes{{{SLOT}}}": "20000000000x40"},
                   labels=labels_of(SLOT), value=20000000000),
        quiet=Case("1 MB", {f"cdcwatch_postgres_replication_slot_retained_wal_bytes{{{SLOT}}}": "1000000x40"}),
    ),
    Alert(
        "CdcPostgresSlotWalAtRisk",
        'last_over_time(cdcwatch_postgres_replication_slot_wal_status{%(cdcwatch)s, wal_status=~"unreserved|lost"}[%(scrape_gap)s]) == 1',
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
        "predict_linear(cdcwatch_postgres_replication_slot_safe_wal_size_bytes{%(cdcwatch)s}[1h], %(slot_safe_wal_horizon_seconds)s) < 0",
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
    # the runway alerts are gated on a slot holding more WAL than it has left (a slot that keeps up holds little);
    # the slot alerts read a slot's last values through failed scrapes (scrape_gap): a source too busy to answer is
    # the source whose WAL piles up, and one timed-out scrape must not restart their `for`
    Alert(
        "CdcPostgresSlotRunwayShort",
        """
        slot:cdcwatch_postgres_replication_slot_safe_wal_runway_seconds:deriv5m < %(slot_wal_runway_warning_seconds)s
        and
          last_over_time(cdcwatch_postgres_replication_slot_retained_wal_bytes{%(cdcwatch)s}[%(scrape_gap)s])
          > last_over_time(cdcwatch_postgres_replication_slot_safe_wal_size_bytes{%(cdcwatch)s}[%(scrape_gap)s])
        """,
        "warning", "warning",
        "Replication slot {{ $labels.slot }} runs out of safe WAL soon",
        "At the current WAL rate slot {{ $labels.slot }} (server {{ $labels.server }}) uses up its safe_wal_size in "
        "{{ $value | humanizeDuration }} (threshold %(slot_wal_runway_warning_seconds)ss), and it already holds more "
        "WAL than it has left; then WAL its connector needs becomes removable.",
        fires=Case("1 MB a second, 18.8 GB left, 22.2 GB held", _runway_series("20000000000-60000000x40",
                                                                            "21000000000+60000000x40"),
                   labels=labels_of(SLOT), value=18800),
        quiet=_KEEPING_UP,
        since="1m", boundary_value=(20000000000 - 60000000 * 11) / 1000000,
        more=(Case("an idle source writes no WAL", _runway_series("2000000000x40", "21000000000x40", "5000000000x40")),),
    ),
    Alert(
        "CdcPostgresSlotRunwayCritical",
        """
        slot:cdcwatch_postgres_replication_slot_safe_wal_runway_seconds:deriv5m < %(slot_wal_runway_critical_seconds)s
        and
          last_over_time(cdcwatch_postgres_replication_slot_retained_wal_bytes{%(cdcwatch)s}[%(scrape_gap)s])
          > last_over_time(cdcwatch_postgres_replication_slot_safe_wal_size_bytes{%(cdcwatch)s}[%(scrape_gap)s])
        """,
        "critical", "critical",
        "Replication slot {{ $labels.slot }} is about to lose WAL",
        "At the current WAL rate slot {{ $labels.slot }} (server {{ $labels.server }}) uses up its safe_wal_size in "
        "{{ $value | humanizeDuration }} (threshold %(slot_wal_runway_critical_seconds)ss) and holds more WAL than "
        "it has left; once it is used up the connector must snapshot again.",
        fires=Case("1 MB a second, 2.3 GB left, 5.2 GB held", _runway_series("3500000000-60000000x40",
                                                                          "4000000000+60000000x40"),
                   labels=labels_of(SLOT), value=2300),
        quiet=_KEEPING_UP,
        since="1m", boundary_value=(3500000000 - 60000000 * 3) / 1000000,
        more=(Case("the source too busy to answer the scrape a minute before: the `for` goes on",
                   _runway_series("3500000000-60000000x18 stale 2300000000-60000000x20",
                                  "4000000000+60000000x18 stale 5200000000+60000000x20",
                                  "0+60000000x18 stale 1200000000+60000000x20"),
                   labels=labels_of(SLOT), value=2300),
              Case("a failover to a server with less WAL: its position goes back, not a burst of WAL",
                   _runway_series("5000000000x40", "6000000000x40", "50000000000+60000000x20 40000000000+60000000x19"),
                   at="24m"),),
    ),
)

GROUP = Group("cdcwatch-postgres", RECORDINGS, ALERTS, stage="postgres")
