"""Continuous source-to-target reconciliation: does the target hold what the source holds?"""

from cdcwatch.reconcile.collector import RECONCILE_METRICS, ReconcileCollector

__all__ = ["RECONCILE_METRICS", "ReconcileCollector"]
