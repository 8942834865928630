"""A small client of the Prometheus HTTP API (query, query_range, label values): the one the dashboards preview
(`cdcwatch dashboards preview`) reads panels through, and the demo and the tests query with."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

__all__ = ["PrometheusApi"]


class PrometheusApi:
    """The few HTTP API calls the dashboards preview, the demo, the benchmarks and the tests make."""

    def __init__(self, url: str, timeout: float = 30) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def get(self, path: str, **params: Any) -> Any:
        query = urllib.parse.urlencode(params, doseq=True)
        try:
            with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=self.timeout) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:  # Prometheus says why in the body
            body = json.loads(exc.read() or b"{}")
        if body.get("status") != "success":
            raise RuntimeError(f"{path} {params}: {body.get('error', body)}")
        return body["data"]

    def label_values(self, selector: str, label: str) -> list[str]:
        return sorted(self.get(f"/api/v1/label/{label}/values", **{"match[]": selector}))

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.get("/api/v1/query_range", query=expr, start=start, end=end, step=step)["result"]
        return result

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.get("/api/v1/query", query=expr)["result"]
        return result

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts pending or firing now."""
        alerts: list[dict[str, Any]] = self.get("/api/v1/alerts")["alerts"]
        return alerts
