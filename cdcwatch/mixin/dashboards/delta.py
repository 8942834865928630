"""Delta Lake tables, one per source table: which table is fresh, idle, behind or stalled, how its writer commits,
and whether compaction keeps up with the micro-batches."""

# ruff: noqa: E501 (each panel's PromQL is one literal block, its lines as long as on the dashboard)

from cdcwatch.mixin.dashboards.model import DashboardSpec, Mapping, PanelSpec, Query, Variable

__all__ = ["DELTA", "TABLE_STATES"]

TABLE_STATES = (Mapping(1, "fresh", "green"), Mapping(2, "idle", "blue"), Mapping(3, "behind", "orange"),
                Mapping(4, "stalled", "red"))
"""The codes the board gives `target:cdcwatch_delta_freshness:state`'s states."""


_WATCHED = "the exporter watches Delta tables (`delta` entries)"
"""When the board's series exist at all."""
_STATE_CODE = """
    max by (target, topic) (
      target:cdcwatch_delta_freshness:state{%(scope)s, target=~"$table", state="fresh"} * 1
      or target:cdcwatch_delta_freshness:state{%(scope)s, target=~"$table", state="idle"} * 2
      or target:cdcwatch_delta_freshness:state{%(scope)s, target=~"$table", state="behind"} * 3
      or target:cdcwatch_delta_freshness:state{%(scope)s, target=~"$table", state="stalled"} * 4
    )
    """

DELTA = DashboardSpec(
    "cdcwatch-delta", "CDC: Delta tables",
    "Each Delta table the apply job merges into, read from its transaction log: whether it holds what its topic "
    "captured (fresh, idle, behind, stalled), how its writer commits and what the commits write, and its files.",
    "cdcwatch_delta_table_version{%(cdcwatch)s",
    (Variable("table", "label_values(cdcwatch_delta_table_version{%(cdcwatch_board)s}, target)"),),
    (
        ("Freshness by table", (
            PanelSpec("State by table", "fresh: the table holds the newest change its topic captured; idle: and that "
                      "is older than delta_table_stall_seconds (its source table did not change; never pages); "
                      "behind: its topic has newer changes and the table still commits; stalled: and it has not "
                      "committed for delta_table_stall_seconds (pages).", "none",
                      (Query(_STATE_CODE, "{{target}}", when=_WATCHED),), kind="timeline", mappings=TABLE_STATES,
                      alerts=("CdcDeltaTableStalled",)),
            PanelSpec("Tables", "Each table's state now, what it has not applied of its topic, and the age of its "
                      "newest commit.", "none",
                      (Query(_STATE_CODE, "", when=_WATCHED),
                       Query('max by (target, topic) (target:cdcwatch_delta_unapplied_seconds:max{%(scope)s, target=~"$table"})', "", when=_WATCHED),
                       Query('time() - max by (target) (cdcwatch_delta_last_commit_timestamp_seconds{%(cdcwatch_board)s, target=~"$table"})', "", when=_WATCHED)),
                      kind="table", alerts=("CdcDeltaTableStalled",)),
            PanelSpec("Not applied of the topic", "The newest source commit time captured in the table's topic less "
                      "the newest the table holds: how far the table is behind what was captured for it.", "s",
                      (Query('max by (target) (target:cdcwatch_delta_unapplied_seconds:max{%(scope)s, target=~"$table"})', "{{target}}", when=_WATCHED),)),
            PanelSpec("Since the last commit", "Age of each table's newest commit: a writer that stopped committing "
                      "shows here while its Spark query may still report progress; a table behind its topic and not committing for "
                      "delta_table_stall_seconds is stalled.", "s",
                      (Query('time() - max by (target) (cdcwatch_delta_last_commit_timestamp_seconds{%(cdcwatch_board)s, target=~"$table"})', "{{target}}", when=_WATCHED),),
                      alerts=("CdcDeltaTableStalled",)),
        )),
        ("Writes", (
            PanelSpec("Commits by operation", "Commits per second, by operation (MERGE, WRITE, OPTIMIZE, ...).", "ops",
                      (Query('sum by (target, operation) (rate(cdcwatch_delta_commits_total{%(cdcwatch_board)s, target=~"$table"}[$__rate_interval]))',
                             "{{target}} {{operation}}", when=_WATCHED),)),
            PanelSpec("Rows written by kind", "Rows the commits inserted, updated, deleted and copied (rewritten "
                      "unchanged) per second: a MERGE that commits but writes nothing shows as commits without rows.", "ops",
                      (Query('sum by (target, kind) (rate(cdcwatch_delta_rows_total{%(cdcwatch_board)s, target=~"$table"}[$__rate_interval]))',
                             "{{target}} {{kind}}", when=_WATCHED),)),
        )),
        ("Files and compaction", (
            PanelSpec("Live and small files", "Live data files, and those smaller than small_file_bytes: small files "
                      "that keep growing say compaction does not keep up with the micro-batches.", "short",
                      (Query('max by (target) (cdcwatch_delta_files{%(cdcwatch_board)s, target=~"$table"})', "{{target}} files", when=_WATCHED),
                       Query('max by (target) (cdcwatch_delta_small_files{%(cdcwatch_board)s, target=~"$table"})', "{{target}} small", when=_WATCHED))),
            PanelSpec("Since the last compaction", "Age of each table's newest OPTIMIZE (absent when none is within the "
                      "reader's look-back).", "s",
                      (Query('time() - max by (target) (cdcwatch_delta_last_compaction_timestamp_seconds{%(cdcwatch_board)s, target=~"$table"})',
                             "{{target}}", when=_WATCHED),)),
        )),
    ), stage="delta")
