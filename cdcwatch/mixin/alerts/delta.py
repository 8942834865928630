"""Delta Lake tables, one per source table: which table is behind its topic, and which stopped committing.

A table's series (the `delta` collector) carry the static labels `topic` and `server` of the Kafka topic its
changes come from (Debezium's `<server>.<schema>.<table>`). The Kafka collector's newest source commit time of that
topic is what was captured for the table; the table's newest `commit_time_column` value is what it holds. A table
holding everything its topic has is fresh, or idle once that is older than `delta_table_stall_seconds`: its source
table did not change, and it never pages. One behind its topic is behind while it commits, stalled once it has not
committed for `delta_table_stall_seconds`: that pages, naming the table.
"""

# ruff: noqa: E501 (each rule's PromQL is one literal block, its lines as long as in the rule file)

from cdcwatch.mixin.alerts.examples import EXPORTER
from cdcwatch.mixin.alerts.model import Alert, Case, Group, Recording

__all__ = ["GROUP"]

_TABLE = f'{EXPORTER},target="customers",server="inventory",topic="inventory.public.customers"'
_PARTITION = f'{EXPORTER},target="main",topic="inventory.public.customers",server="inventory",partition="0"'
_CAPTURED = "cdcwatch_kafka_newest_source_commit_timestamp_seconds"
_APPLIED = "cdcwatch_delta_newest_applied_change_timestamp_seconds"
_COMMITTED = "cdcwatch_delta_last_commit_timestamp_seconds"
_MOVING = "0+60x40"
"""A timestamp a minute newer a minute: a change (or a commit) every minute, up to now."""
_IDLE = "0x40"
"""A timestamp standing at the start: nothing since."""
_UNAPPLIED = "target:cdcwatch_delta_unapplied_seconds:max"


def _table(captured: str, applied: str, committed: str) -> dict[str, str]:
    """The newest change captured in the table's topic, the newest the table holds, and its newest commit."""
    return {f"{_CAPTURED}{{{_PARTITION}}}": captured, f"{_APPLIED}{{{_TABLE}}}": applied,
            f"{_COMMITTED}{{{_TABLE}}}": committed}


_STALLED = _table(_MOVING, _IDLE, _IDLE)
_LABELS = {"job": "cdcwatch", "instance": "exporter:10121", "target": "customers", "server": "inventory",
           "topic": "inventory.public.customers"}


def _state(state: str) -> dict[str, str]:
    return {**_LABELS, "state": state}


RECORDINGS = (
    # the newest change captured in the table's topic less the newest the table holds
    Recording(_UNAPPLIED, """
        max by (topic) (cdcwatch_kafka_newest_source_commit_timestamp_seconds{%(cdcwatch)s})
        - on (topic) group_right ()
          max by (job, instance, target, server, topic) (cdcwatch_delta_newest_applied_change_timestamp_seconds{%(cdcwatch)s})
        """,
              Case("the table has held nothing new for 20 minutes while its topic got a change a minute", _STALLED,
                   labels=_LABELS, value=1200),
              more=(Case("a table without a topic label: no reading", {
                  f"{_CAPTURED}{{{_PARTITION}}}": _MOVING,
                  f'{_APPLIED}{{{EXPORTER},target="customers"}}': _IDLE}),)),
    # one state per table: stalled, behind, idle or fresh (a second's slack: the log's statistics keep milliseconds)
    Recording("target:cdcwatch_delta_freshness:state", """
        label_replace(0 * (
          target:cdcwatch_delta_unapplied_seconds:max > 1
          and on (job, instance, target)
            time() - max by (job, instance, target) (cdcwatch_delta_last_commit_timestamp_seconds{%(cdcwatch)s}) > %(delta_table_stall_seconds)s
        ) + 1, "state", "stalled", "", "")
        or
        label_replace(0 * (
          target:cdcwatch_delta_unapplied_seconds:max > 1
          unless on (job, instance, target)
            time() - max by (job, instance, target) (cdcwatch_delta_last_commit_timestamp_seconds{%(cdcwatch)s}) > %(delta_table_stall_seconds)s
        ) + 1, "state", "behind", "", "")
        or
        label_replace(0 * (
          target:cdcwatch_delta_unapplied_seconds:max <= 1
          and on (job, instance, target)
            time() - max by (job, instance, target) (cdcwatch_delta_newest_applied_change_timestamp_seconds{%(cdcwatch)s}) > %(delta_table_stall_seconds)s
        ) + 1, "state", "idle", "", "")
        or
        label_replace(0 * (
          target:cdcwatch_delta_unapplied_seconds:max <= 1
          unless on (job, instance, target)
            time() - max by (job, instance, target) (cdcwatch_delta_newest_applied_change_timestamp_seconds{%(cdcwatch)s}) > %(delta_table_stall_seconds)s
        ) + 1, "state", "fresh", "", "")
        """,
              Case("its topic moves, the table neither holds it nor commits", _STALLED, labels=_state("stalled"), value=1),
              match=("target",),
              more=(Case("its topic moves twice as fast as the table, which commits every minute",
                         _table(_MOVING, "0+30x40", _MOVING), labels=_state("behind"), value=1),
                    Case("its topic's newest change is 20 minutes old and the table holds it", _table(_IDLE, _IDLE, _IDLE),
                         labels=_state("idle"), value=1),
                    Case("the table holds its topic's newest change, a minute a minute", _table(_MOVING, _MOVING, _MOVING),
                         labels=_state("fresh"), value=1))),
)

ALERTS = (
    Alert(
        "CdcDeltaTableStalled",
        """
        max by (job, instance, target, server, topic) (target:cdcwatch_delta_freshness:state{state="stalled"}) == 1
        """,
        "critical", "critical",
        "Delta table {{ $labels.target }} stopped applying {{ $labels.topic }}",
        "The Delta table {{ $labels.target }} has not committed for over %(delta_table_stall_seconds)ss while its topic "
        "{{ $labels.topic }} holds changes newer than any it holds: its writer stopped (a MERGE failing on every batch "
        "and retried, a job that no longer writes this table) while the source table changes. Tables whose source "
        "did not change are idle and never page.",
        fires=Case("the table holds nothing new and commits nothing for 20 minutes, its topic a change a minute", _STALLED,
                   labels=_LABELS, value=1),
        quiet=Case("an idle table: its topic has nothing newer for 20 minutes", _table(_IDLE, _IDLE, _IDLE)),
        since="11m",
        more=(Case("a table behind its topic that still commits", _table(_MOVING, "0+30x40", _MOVING)),),
    ),
)

GROUP = Group("cdcwatch-delta", RECORDINGS, ALERTS, stage="delta")
