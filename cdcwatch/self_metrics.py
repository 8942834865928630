"""cdcwatch's own metrics, declared once: what the exporter reports on each target's collection, on its
configuration's reloads and on its `/metrics` answers (`cdcwatch.exporter`, `cdcwatch.server`), and what the
metrics reference documents (`cdcwatch.reference`). Specs only: nothing here runs a collection."""

from __future__ import annotations

from cdcwatch.failures import FailureKind
from cdcwatch.specs import MetricSpec, metric_specs

__all__ = ["BUILD_INFO", "CONFIG_LAST_RELOAD_SUCCESSFUL", "CONFIG_LAST_RELOAD_SUCCESS_TIMESTAMP_SECONDS",
           "CONFIG_RELOAD_FAILURES_TOTAL", "METRICS_RESPONSES_TOTAL", "METRICS_RESPONSE_SECONDS_TOTAL",
           "SCRAPE_DURATION_SECONDS", "SCRAPE_ERRORS_TOTAL", "SELF_METRICS", "SERIES_DROPPED_TOTAL",
           "TARGET_FAILURE_INFO", "UP"]

_TARGET = ("collector", "target")
UP = MetricSpec("cdcwatch_up", "gauge", "1 if the last collection from the target succeeded, else 0.", _TARGET)
TARGET_FAILURE_INFO = MetricSpec("cdcwatch_target_failure_info", "gauge", (
    "1 while the last collection from the target failed; `failure` is what failed: " +
    ", ".join(kind.label for kind in FailureKind) + "."), (*_TARGET, "failure"))
SCRAPE_DURATION_SECONDS = MetricSpec("cdcwatch_scrape_duration_seconds", "gauge", "Time the last collection from the target took.", _TARGET)
SCRAPE_ERRORS_TOTAL = MetricSpec(
    "cdcwatch_scrape_errors_total", "counter", "Failed collections from the target since cdcwatch started.", _TARGET)
SERIES_DROPPED_TOTAL = MetricSpec("cdcwatch_series_dropped_total", "counter",
                                  "Series not exported because the target exceeded limits.max_series_per_target.", _TARGET)
BUILD_INFO = MetricSpec("cdcwatch_build_info", "gauge", "Always 1; the labels tell the cdcwatch build.", ("version", "python_version"))
CONFIG_LAST_RELOAD_SUCCESSFUL = MetricSpec(
    "cdcwatch_config_last_reload_successful", "gauge", "1 if the last configuration (re)load succeeded, else 0.")
CONFIG_LAST_RELOAD_SUCCESS_TIMESTAMP_SECONDS = MetricSpec(
    "cdcwatch_config_last_reload_success_timestamp_seconds", "gauge", "When the configuration in use was loaded.")
CONFIG_RELOAD_FAILURES_TOTAL = MetricSpec("cdcwatch_config_reload_failures_total", "counter",
                                          "Reloads (SIGHUP or file change) rejected; the last good configuration stays in use.")
METRICS_RESPONSES_TOTAL = MetricSpec("cdcwatch_metrics_responses_total", "counter",
                                     "/metrics answers written, by the format negotiated from the Accept header.", ("format",))
METRICS_RESPONSE_SECONDS_TOTAL = MetricSpec(
    "cdcwatch_metrics_response_seconds_total", "counter",
    "Time spent on /metrics answers, by format and part: collect (waiting for the collections and their families), "
    "render, compress (gzip), send (writing the answer to the client).", ("format", "part"))
SELF_METRICS = metric_specs(
    UP,
    TARGET_FAILURE_INFO,
    SCRAPE_DURATION_SECONDS,
    SCRAPE_ERRORS_TOTAL,
    SERIES_DROPPED_TOTAL,
    BUILD_INFO,
    CONFIG_LAST_RELOAD_SUCCESSFUL,
    CONFIG_LAST_RELOAD_SUCCESS_TIMESTAMP_SECONDS,
    CONFIG_RELOAD_FAILURES_TOTAL,
    METRICS_RESPONSES_TOTAL,
    METRICS_RESPONSE_SECONDS_TOTAL,
)
"""Every metric of cdcwatch itself, by name, in the reference's order."""
