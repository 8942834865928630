"""The pipeline's measured freshness, read from a /metrics endpoint (the apply job's listener): how far behind the
source the target is, so a re-check counts only for changes the pipeline has had every chance to deliver."""

from __future__ import annotations

import logging
import time
import urllib.request
from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["FreshnessReader"]

log = logging.getLogger("cdcwatch.reconcile")


class FreshnessReader:
    """`applied_through()`: now minus the largest freshness among the matching series, or None when it cannot be
    read (then no re-check counts: not knowing how far behind the pipeline is never confirms a divergence)."""

    def __init__(self, name: str, url: str, metric: str, labels: Mapping[str, str], timeout: float = 5.0) -> None:
        self.name, self.url, self.metric, self.labels, self.timeout = name, url, metric, dict(labels), timeout
        self.failing = False

    def applied_through(self) -> float | None:
        try:
            with urllib.request.urlopen(self.url, timeout=self.timeout) as response:  # noqa: S310 (configured URL)
                text = response.read().decode("utf-8")
            values = [sample.value for family in text_string_to_metric_families(text) for sample in family.samples
                      if sample.name == self.metric and self.labels.items() <= sample.labels.items()]
        except (OSError, ValueError) as exc:
            self._failed(f"cannot read {self.url}: {exc}")
            return None
        if not values:
            self._failed(f"{self.url} has no {self.metric} series with labels {self.labels}")
            return None
        if self.failing:
            log.info("%s: the pipeline's freshness is read again", self.name)
            self.failing = False
        return time.time() - max(values)

    def _failed(self, message: str) -> None:
        if not self.failing:
            log.warning("%s: %s; no divergence is confirmed until it is", self.name, message)
            self.failing = True
