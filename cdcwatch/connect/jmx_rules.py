"""The worker's `kafka.connect` MBeans → metrics, as data: one rule per (bean type, attribute).

Only listed attributes are requested: reading `connector-type` (a Java enum) fails unless
connect-api is on the JMX client's classpath, and the rest are not needed.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CONNECT_JMX_PATTERN", "CONNECT_RULES", "STATUS_RULES", "ConnectRule"]

CONNECT_JMX_PATTERN = "kafka.connect:*"


@dataclass(frozen=True)
class ConnectRule:
    bean_type: str
    attribute: str
    metric: str
    type: str
    help: str
    scale: float = 1.0
    labels: tuple[tuple[str, str], ...] = ()


_W, _C, _T, _S, _E = ("connect-worker-metrics", "connect-worker-metrics+connector", "connector-task-metrics",
                      "source-task-metrics", "task-error-metrics")

CONNECT_RULES: tuple[ConnectRule, ...] = (
    ConnectRule(_W, "connector-count", "cdcwatch_connect_worker_connectors", "gauge", "Connectors on the worker."),
    ConnectRule(_W, "task-count", "cdcwatch_connect_worker_tasks", "gauge", "Tasks on the worker."),
    ConnectRule(_W, "connector-startup-attempts-total", "cdcwatch_connect_worker_connector_startup_attempts_total",
                "counter", "Connector starts the worker attempted."),
    ConnectRule(_W, "connector-startup-failure-total", "cdcwatch_connect_worker_connector_startup_failures_total",
                "counter", "Connector starts that failed (a connector that fails at startup has no MBeans of its own)."),
    ConnectRule(_W, "task-startup-failure-total", "cdcwatch_connect_worker_task_startup_failures_total",
                "counter", "Task starts that failed."),
    *(ConnectRule(_C, f"connector-{state}-task-count", "cdcwatch_connect_worker_connector_tasks", "gauge",
                  "The connector's tasks on this worker, by state.", labels=(("state", state),))
      for state in ("running", "paused", "failed", "unassigned", "restarting", "destroyed")),
    ConnectRule(_T, "batch-size-avg", "cdcwatch_connect_task_batch_size_avg", "gauge", "Average records per batch."),
    ConnectRule(_T, "running-ratio", "cdcwatch_connect_task_running_ratio", "gauge", "Fraction of time the task was running."),
    ConnectRule(_T, "offset-commit-failure-percentage", "cdcwatch_connect_task_offset_commit_failure_ratio", "gauge",
                "Fraction of offset commits that failed.", scale=0.01),
    ConnectRule(_S, "source-record-poll-total", "cdcwatch_connect_source_records_polled_total", "counter",
                "Records the source task polled (before transformations)."),
    ConnectRule(_S, "source-record-write-total", "cdcwatch_connect_source_records_written_total", "counter",
                "Records the source task wrote to Kafka (after transformations)."),
    ConnectRule(_S, "source-record-poll-rate", "cdcwatch_connect_source_record_poll_rate", "gauge",
                "Records polled per second (the worker's own rate window)."),
    ConnectRule(_S, "source-record-active-count", "cdcwatch_connect_source_records_active", "gauge",
                "Records polled but not yet acknowledged by Kafka."),
    ConnectRule(_S, "poll-batch-avg-time-ms", "cdcwatch_connect_source_poll_batch_avg_seconds", "gauge",
                "Average time to poll a batch.", scale=0.001),
    ConnectRule(_S, "poll-batch-max-time-ms", "cdcwatch_connect_source_poll_batch_max_seconds", "gauge",
                "Longest time to poll a batch.", scale=0.001),
    ConnectRule(_E, "total-record-errors", "cdcwatch_connect_task_record_errors_total", "counter", "Records that failed in the task."),
    ConnectRule(_E, "total-record-failures", "cdcwatch_connect_task_record_failures_total", "counter",
                "Record processing failures (retried ones included)."),
    ConnectRule(_E, "total-records-skipped", "cdcwatch_connect_task_records_skipped_total", "counter",
                "Records skipped because of errors (errors.tolerance=all)."),
    ConnectRule(_E, "total-retries", "cdcwatch_connect_task_retries_total", "counter", "Retried operations."),
    ConnectRule(_E, "total-errors-logged", "cdcwatch_connect_task_errors_logged_total", "counter", "Errors logged."),
    ConnectRule(_E, "deadletterqueue-produce-requests", "cdcwatch_connect_task_dlq_produce_requests_total", "counter",
                "Records written to the dead letter queue."),
    ConnectRule(_E, "deadletterqueue-produce-failures", "cdcwatch_connect_task_dlq_produce_failures_total", "counter",
                "Failed writes to the dead letter queue."),
    ConnectRule(_E, "last-error-timestamp", "cdcwatch_connect_task_last_error_timestamp_seconds", "gauge",
                "When the task last had an error (0: never).", scale=0.001),
)

STATUS_RULES: dict[str, str] = {
    "connector-metrics": "cdcwatch_connect_jmx_connector_status",
    "connector-task-metrics": "cdcwatch_connect_jmx_task_status",
}
"""Beans whose `status` attribute becomes a state set (the REST states are the authority: they also
cover connectors that failed before registering any bean)."""

JMX_STATES = ("running", "paused", "stopped", "failed", "unassigned", "restarting", "destroyed")
