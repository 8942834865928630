"""Reconciliation: does the target hold what the source holds, and how often and at what cost is it checked."""

# ruff: noqa: E501 (each panel's PromQL is one literal block, its lines as long as on the dashboard)

from cdcwatch.mixin.dashboards.model import DashboardSpec, PanelSpec, Query, Variable

__all__ = ["RECONCILE"]


RECONCILE = DashboardSpec(
    "cdcwatch-reconcile", "CDC: Reconciliation",
    "Rows that differ between each table pair's source and target, by kind; how long a full comparison takes and when "
    "the last one ended; what it reads on each side against its budget.",
    "cdcwatch_reconcile_chunks_checked_total{%(cdcwatch)s",
    (Variable("pair", "label_values(cdcwatch_reconcile_chunks_checked_total{%(cdcwatch_board)s}, target)"),),
    (
        ("Divergence", (
            PanelSpec("Rows diverged", "Confirmed divergences by kind: missing in the target, extra in the target, "
                      "different (still differing after the re-checks, the source row unchanged).", "short",
                      (Query('sum by (target, kind) (cdcwatch_reconcile_rows_diverged{%(cdcwatch_board)s, target=~"$pair"})',
                             "{{target}} {{kind}}"),), alerts=("CdcReconcileTargetDiverged",)),
            PanelSpec("Rows in flight", "Rows found differing but not confirmed: changes the pipeline has not applied "
                      "yet, waiting for their re-checks.", "short",
                      (Query('sum by (target) (cdcwatch_reconcile_rows_suspect{%(cdcwatch_board)s, target=~"$pair"})', "{{target}}"),)),
            PanelSpec("Oldest divergence", "Age of the oldest confirmed divergence still unresolved.", "s",
                      (Query('max by (target) (cdcwatch_reconcile_oldest_divergence_age_seconds{%(cdcwatch_board)s, target=~"$pair"})',
                             "{{target}}"),)),
        )),
        ("Passes and cost", (
            PanelSpec("Full pass duration", "How long the last full comparison of each pair took: with the re-checks, "
                      "how long a divergence can go unreported.", "s",
                      (Query('max by (target) (cdcwatch_reconcile_pass_duration_seconds{%(cdcwatch_board)s, target=~"$pair"})', "{{target}}"),)),
            PanelSpec("Since the last full pass", "Time since each pair's last full pass ended.", "s",
                      (Query('time() - max by (target) (cdcwatch_reconcile_last_pass_timestamp_seconds{%(cdcwatch_board)s, target=~"$pair"})',
                             "{{target}}"),)),
            PanelSpec("Rows read per second", "Rows the comparison reads on each side, and each side's budget.", "ops",
                      (Query('sum by (target, side) (rate(cdcwatch_reconcile_rows_read_total{%(cdcwatch_board)s, target=~"$pair"}[$__rate_interval]))',
                             "{{target}} {{side}}"),
                       Query('max by (target, side) (cdcwatch_reconcile_rows_per_second_budget{%(cdcwatch_board)s, target=~"$pair"})',
                             "{{target}} {{side}} budget"))),
            PanelSpec("Chunks checked", "Chunks compared per second.", "ops",
                      (Query('sum by (target) (rate(cdcwatch_reconcile_chunks_checked_total{%(cdcwatch_board)s, target=~"$pair"}[$__rate_interval]))',
                             "{{target}}"),)),
        )),
    ), stage="reconcile")
