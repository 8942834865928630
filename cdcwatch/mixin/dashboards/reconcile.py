"""Reconciliation: does the target hold what the source holds, whether it can be confirmed, and how often and at what
cost is it checked."""

# ruff: noqa: E501 (each panel's PromQL is one literal block, its lines as long as on the dashboard)

from cdcwatch.mixin.dashboards.model import DashboardSpec, Mapping, PanelSpec, Query, Threshold, Variable

__all__ = ["GATE", "READ", "RECONCILE"]

GATE = (Mapping(0, "closed", "orange"), Mapping(1, "open", "green"))
"""The codes of `cdcwatch_reconcile_freshness_gate_open`."""
READ = (Mapping(0, "unreadable", "red"), Mapping(1, "read", "green"))
"""The codes of `cdcwatch_reconcile_freshness_readable`."""


RECONCILE = DashboardSpec(
    "cdcwatch-reconcile", "CDC: Reconciliation",
    "Rows that differ between each table pair's source and target, by kind; whether re-checks can confirm them (the "
    "freshness gate); how long a full comparison takes and when the last one ended; what it reads on each side "
    "against its budget.",
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
        ("Confirmation", (
            PanelSpec("Freshness gate", "Whether a re-check falling due counts: open while the target is known "
                      "(freshness_url, freshness_canary) to hold every change committed at the source up to "
                      "settle_seconds ago, or without either; closed, differing rows stay in flight and none is confirmed.", "none",
                      (Query('min by (target) (cdcwatch_reconcile_freshness_gate_open{%(cdcwatch_board)s, target=~"$pair"})', "{{target}}"),),
                      kind="state", mappings=GATE, alerts=("CdcReconcileCannotConfirm",)),
            PanelSpec("Freshness read", "Whether the last read of freshness_url gave the source commit time the target "
                      "is applied through (no value without freshness_url).", "none",
                      (Query('min by (target) (cdcwatch_reconcile_freshness_readable{%(cdcwatch_board)s, target=~"$pair"})', "{{target}}"),),
                      kind="state", mappings=READ),
            PanelSpec("Re-checks held back", "Re-checks per second of rows still differing, unchanged, that did not "
                      "count: the pipeline was not known to have applied the source's row yet.", "ops",
                      (Query('sum by (target) (rate(cdcwatch_reconcile_rechecks_held_total{%(cdcwatch_board)s, target=~"$pair"}[$__rate_interval]))',
                             "{{target}}"),)),
            PanelSpec("Target known applied through", "Age of the source commit time up to which the target is known to "
                      "hold every change (freshness_url): a re-check counts once it is younger than the time since "
                      "the row was found.", "s",
                      (Query('time() - min by (target) (cdcwatch_reconcile_applied_through_timestamp_seconds{%(cdcwatch_board)s, target=~"$pair"})',
                             "{{target}}"),)),
        )),
        ("Schema drift", (
            PanelSpec("Columns not shared", "Columns the source and target tables do not share, by kind: source_only "
                      "(their values never reach the target), target_only, type_differs (compared across types). No "
                      "value with a target of format apply.", "none",
                      (Query('max by (target, kind) (cdcwatch_reconcile_schema_drift_columns{%(cdcwatch_board)s, target=~"$pair"})',
                             "{{target}} {{kind}}", when="a target table with a catalog (not format apply)"),)),
            PanelSpec("Source column missing for", "How long the longest-missing source column has been missing in the "
                      "target: a sink that evolves its table adds it with the first change that carries it.", "s",
                      (Query('max by (target) (cdcwatch_reconcile_oldest_missing_column_age_seconds{%(cdcwatch_board)s, target=~"$pair"})',
                             "{{target}}", when="a target table with a catalog (not format apply)"),),
                      threshold=Threshold("schema_drift_seconds"), alerts=("CdcReconcileSchemaDrift",)),
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
