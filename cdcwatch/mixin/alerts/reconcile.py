"""Reconciliation: the target no longer holds what the source holds.

`cdcwatch_reconcile_rows_diverged` counts only confirmed divergences (still differing after the pair's
`confirm_rechecks` re-checks, neither side's row changed), so the alert needs no `for` of its own beyond the instant
one: changes in flight never reach it."""

from cdcwatch.mixin.alerts.examples import EXPORTER
from cdcwatch.mixin.alerts.model import Alert, Case, Group, labels_of

__all__ = ["GROUP"]

PAIR = f'{EXPORTER},target="customers"'
_DIVERGED = "cdcwatch_reconcile_rows_diverged"


def _rows(missing: str, extra: str = "0x40", different: str = "0x40") -> dict[str, str]:
    return {f'{_DIVERGED}{{{PAIR},kind="missing"}}': missing, f'{_DIVERGED}{{{PAIR},kind="extra"}}': extra,
            f'{_DIVERGED}{{{PAIR},kind="different"}}': different}


ALERTS = (
    Alert(
        "CdcReconcileTargetDiverged",
        "sum by (job, instance, target) (cdcwatch_reconcile_rows_diverged{%(cdcwatch)s}) > 0",
        "critical", "instant",
        "The target of {{ $labels.target }} no longer holds what the source holds",
        "{{ $value | humanize }} rows of the table pair {{ $labels.target }} differ between source and target, confirmed by "
        "repeated re-checks with the source row unchanged: missing in the target, extra in the target or different "
        "(cdcwatch_reconcile_rows_diverged by kind). cdcwatch's log names their keys and key ranges.",
        fires=Case("one row missing, two different", _rows("1x40", different="2x40"),
                   labels=labels_of(PAIR), value=3),
        quiet=Case("source and target agree", _rows("0x40")),
        more=(Case("repaired at 10 minutes", _rows("1x10 0x30")),),
    ),
)

GROUP = Group("cdcwatch-reconcile", (), ALERTS)
