"""Reconciliation: the target no longer holds what the source holds, or the comparison cannot tell.

`cdcwatch_reconcile_rows_diverged` counts only confirmed divergences (still differing after the pair's
`confirm_rechecks` re-checks, neither side's row changed), so the alert needs no `for` of its own beyond the instant
one: changes in flight never reach it. Confirmation waits for the freshness gate (`freshness_url`): while it stays
closed with rows differing, a divergence would go unreported, which its own warning says."""

# ruff: noqa: E501 (each rule's PromQL is one literal block, its lines as long as in the rule file)

from cdcwatch.mixin.alerts.examples import EXPORTER
from cdcwatch.mixin.alerts.model import Alert, Case, Group, labels_of

__all__ = ["GROUP"]

PAIR = f'{EXPORTER},target="customers",server="inventory"'
_DIVERGED = "cdcwatch_reconcile_rows_diverged"
_SUSPECT = "cdcwatch_reconcile_rows_suspect"
_GATE = "cdcwatch_reconcile_freshness_gate_open"
_MISSING_AGE = "cdcwatch_reconcile_oldest_missing_column_age_seconds"
_LAST_PASS = "cdcwatch_reconcile_last_pass_timestamp_seconds"


def _rows(missing: str, extra: str = "0x40", different: str = "0x40") -> dict[str, str]:
    return {f'{_DIVERGED}{{{PAIR},kind="missing"}}': missing, f'{_DIVERGED}{{{PAIR},kind="extra"}}': extra,
            f'{_DIVERGED}{{{PAIR},kind="different"}}': different}


def _held(suspects: str, gate: str) -> dict[str, str]:
    return {f"{_SUSPECT}{{{PAIR}}}": suspects, f"{_GATE}{{{PAIR}}}": gate}


ALERTS = (
    Alert(
        "CdcReconcileTargetDiverged",
        "sum by (job, instance, target, server) (cdcwatch_reconcile_rows_diverged{%(cdcwatch)s}) > 0",
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
        max by (job, instance, target, server) (cdcwatch_reconcile_rows_suspect{%(cdcwatch)s}) > 0
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
    Alert(
        "CdcReconcileSchemaDrift",
        "max by (job, instance, target, server) (cdcwatch_reconcile_oldest_missing_column_age_seconds{%(cdcwatch)s}) > %(schema_drift_seconds)s",
        "warning", "instant",
        "A source column of {{ $labels.target }} never reached the target",
        "A column of the source table of {{ $labels.target }} has been missing in the target for {{ $value | "
        "humanizeDuration }}: the sink does not evolve the target table, so its values are lost, and reconciliation "
        "compares only the columns both tables have (cdcwatch_reconcile_schema_drift_columns by kind; cdcwatch's log "
        "names the columns). Add the column to the target (and backfill it), or let the sink evolve the table.",
        fires=Case("a column missing for 20 minutes", {f"{_MISSING_AGE}{{{PAIR}}}": "0+60x40"}, labels=labels_of(PAIR),
                   value=1200),
        quiet=Case("every source column in the target", {f"{_MISSING_AGE}{{{PAIR}}}": "0x40"}),
        since="11m",
        boundary_value=720,
        more=(Case("the sink added the column after 5 minutes", {f"{_MISSING_AGE}{{{PAIR}}}": "0+60x5 0x35"}),),
    ),
    Alert(
        "CdcReconcilePassOverdue",
        "time() - max by (job, instance, target, server) (cdcwatch_reconcile_last_pass_timestamp_seconds{%(cdcwatch)s}) > %(reconcile_pass_overdue_seconds)s",
        "warning", "instant",
        "Reconciliation of {{ $labels.target }} has not finished a pass for {{ $value | humanizeDuration }}",
        "The last full pass over the table pair {{ $labels.target }} ended {{ $value | humanizeDuration }} ago "
        "(cdcwatch_reconcile_last_pass_timestamp_seconds): a pass now takes longer than expected (a grown table, "
        "a side slow to answer, a budget too small for the table), or the comparison is stuck. Until the next pass "
        "ends, a divergence of this pair goes unreported.",
        fires=Case("the last pass ended 8 hours ago", {f"{_LAST_PASS}{{{PAIR}}}": "-27600x40"}, labels=labels_of(PAIR),
                   value=28800),
        boundary_value=27660,
        quiet=Case("a pass ends every minute", {f"{_LAST_PASS}{{{PAIR}}}": "0+60x40"}),
        more=(Case("a pass ended 5 hours and 40 minutes ago", {f"{_LAST_PASS}{{{PAIR}}}": "-19200x40"}),),
    ),
)

GROUP = Group("cdcwatch-reconcile", (), ALERTS)
