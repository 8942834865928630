"""Reconciliation: the target no longer holds what the source holds, or the comparison cannot tell.

`cdcwatch_reconcile_rows_diverged` counts only confirmed divergences (still differing after the pair's
`confirm_rechecks` re-checks, neither side's row changed), so the alert needs no `for` of its own beyond the instant
one: changes in flight never reach it. Confirmation waits for the freshness gate (`freshness_url`): while it stays
closed with rows differing, a divergence would go unreported, which its own warning says."""

from cdcwatch.mixin.alerts.examples import EXPORTER
from cdcwatch.mixin.alerts.model import Alert, Case, Group, labels_of

__all__ = ["GROUP"]

PAIR = f'{EXPORTER},target="customers"'
_DIVERGED = "cdcwatch_reconcile_rows_diverged"
_SUSPECT = "cdcwatch_reconcile_rows_suspect"
_GATE = "cdcwatch_reconcile_freshness_gate_open"


def _rows(missing: str, extra: str = "0x40", different: str = "0x40") -> dict[str, str]:
    return {f'{_DIVERGED}{{{PAIR},kind="missing"}}': missing, f'{_DIVERGED}{{{PAIR},kind="extra"}}': extra,
            f'{_DIVERGED}{{{PAIR},kind="different"}}': different}


def _held(suspects: str, gate: str) -> dict[str, str]:
    return {f"{_SUSPECT}{{{PAIR}}}": suspects, f"{_GATE}{{{PAIR}}}": gate}


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
    Alert(
        "CdcReconcileCannotConfirm",
        """
        max by (job, instance, target) (cdcwatch_reconcile_rows_suspect{%(cdcwatch)s}) > 0
        and on (job, instance, target)
        max by (job, instance, target) (cdcwatch_reconcile_freshness_gate_open{%(cdcwatch)s}) == 0
        """,
        "warning", "stalled",  # as long as a pipeline may take to come back
        "Reconciliation of {{ $labels.target }} cannot confirm anything",
        "{{ $value | humanize }} rows of the table pair {{ $labels.target }} differ between source and target and "
        "none can be confirmed: for %(for)s the target has not been known to hold the source's changes of "
        "settle_seconds ago (cdcwatch_reconcile_freshness_gate_open 0). The pipeline's freshness cannot be read "
        "(cdcwatch_reconcile_freshness_readable 0: the apply job's listener at freshness_url is down, too slow or "
        "without the series), or nothing committed lately has been applied (a stalled or lagging pipeline, or a "
        "source without changes). Meanwhile a divergence of this pair goes unreported.",
        fires=Case("three rows differing, the gate closed", _held("3x40", "0x40"), labels=labels_of(PAIR), value=3),
        quiet=Case("rows in flight, the gate open", _held("3x40", "1x40")),
        more=(Case("the gate closed, no row differing", _held("0x40", "0x40")),
              Case("the gate open again at 15 minutes", _held("3x40", "0x15 1x25")),
              Case("the gate closed for 5 minutes only", _held("3x40", "1x15 0x25"))),
    ),
)

GROUP = Group("cdcwatch-reconcile", (), ALERTS)
