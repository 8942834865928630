"""The worker's `kafka.connect` MBeans → metrics, as data: one rule per (bean type, attribute).

Each rule exports into a metric family declared once as a `MetricSpec`: inline where one attribute feeds
the family, as a shared constant where several do (one label value each). `CONNECT_JMX_METRICS` gathers them
with the status state sets (a name declared twice is an error). A spec's labels are those the bean gives
(connector and its server, task) and the rule's own; the rule's are checked when the rule is made, the bean's
as each sample is added.

Only listed attributes are requested: reading `connector-type` (a Java enum) fails unless
connect-api is on the JMX client's classpath, and the rest are not needed.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdcwatch.families import MetricSpec, metric_specs, referenced_specs

__all__ = ["CONNECT_JMX_METRICS", "CONNECT_RULES", "JMX_STATES", "STATUS_RULES", "ConnectRule",
           "CONNECT_JMX_QUERIES",
           "sources"]


@dataclass(frozen=True)
class ConnectRule:
    bean_type: str
    attribute: str
    spec: MetricSpec
    scale: float = 1.0
    labels: tuple[tuple[str, str], ...] = ()  # fixed labels of this attribute's series (one value of a shared family)

    def __post_init__(self) -> None:
        self.spec.check_labels(name for name, _ in self.labels)


# the bean types (`type=` of kafka.connect's MBeans) the rules read
WORKER_BEANS = "connect-worker-metrics"
WORKER_CONNECTOR_BEANS = "connect-worker-metrics+connector"  # the worker's bean of one connector (type=…,connector=…)
TASK_BEANS = "connector-task-metrics"
SOURCE_TASK_BEANS = "source-task-metrics"
TASK_ERROR_BEANS = "task-error-metrics"

_CONNECTOR = ("connector", "server")  # the labels of a connector's beans
_TASK = (*_CONNECTOR, "task")  # of a task's beans


def _g(name: str, help: str, *labels: str) -> MetricSpec:
    return MetricSpec("cdcwatch_connect_" + name, "gauge", help, labels)


def _c(name: str, help: str, *labels: str) -> MetricSpec:
    return MetricSpec("cdcwatch_connect_" + name + "_total", "counter", help, labels)


_CONNECTOR_TASKS = _g("worker_connector_tasks", "The connector's tasks on this worker, by state.", *_CONNECTOR, "state")

CONNECT_RULES: tuple[ConnectRule, ...] = (
    ConnectRule(WORKER_BEANS, "connector-count", _g("worker_connectors", "Connectors on the worker.")),
    ConnectRule(WORKER_BEANS, "task-count", _g("worker_tasks", "Tasks on the worker.")),
    ConnectRule(WORKER_BEANS, "connector-startup-attempts-total", _c("worker_connector_startup_attempts",
                                                           "Connector starts the worker attempted.")),
    ConnectRule(WORKER_BEANS, "connector-startup-failure-total", _c("worker_connector_startup_failures", (
        "Connector starts that failed (a connector that fails at startup has no MBeans of its own)."))),
    ConnectRule(WORKER_BEANS, "task-startup-failure-total", _c("worker_task_startup_failures", "Task starts that failed.")),
    *(ConnectRule(WORKER_CONNECTOR_BEANS, f"connector-{state}-task-count", _CONNECTOR_TASKS, labels=(("state", state),))
      for state in ("running", "paused", "failed", "unassigned", "restarting", "destroyed")),
    ConnectRule(TASK_BEANS, "batch-size-avg", _g("task_batch_size_avg", "Average records per batch.", *_TASK)),
    ConnectRule(TASK_BEANS, "running-ratio", _g("task_running_ratio", "Fraction of time the task was running.", *_TASK)),
    ConnectRule(TASK_BEANS, "offset-commit-failure-percentage", _g("task_offset_commit_failure_ratio",
                                                           "Fraction of offset commits that failed.", *_TASK), scale=0.01),
    ConnectRule(SOURCE_TASK_BEANS, "source-record-poll-total", _c("source_records_polled",
                                                   "Records the source task polled (before transformations).", *_TASK)),
    ConnectRule(SOURCE_TASK_BEANS, "source-record-write-total", _c("source_records_written",
                                                    "Records the source task wrote to Kafka (after transformations).", *_TASK)),
    ConnectRule(SOURCE_TASK_BEANS, "source-record-poll-rate", _g("source_record_poll_rate",
                                                  "Records polled per second (the worker's own rate window).", *_TASK)),
    ConnectRule(SOURCE_TASK_BEANS, "source-record-active-count", _g("source_records_active",
                                                     "Records polled but not yet acknowledged by Kafka.", *_TASK)),
    ConnectRule(SOURCE_TASK_BEANS, "poll-batch-avg-time-ms", _g("source_poll_batch_avg_seconds", "Average time to poll a batch.", *_TASK),
                scale=0.001),
    ConnectRule(SOURCE_TASK_BEANS, "poll-batch-max-time-ms", _g("source_poll_batch_max_seconds", "Longest time to poll a batch.", *_TASK),
                scale=0.001),
    ConnectRule(TASK_ERROR_BEANS, "total-record-errors", _c("task_record_errors", "Records that failed in the task.", *_TASK)),
    ConnectRule(TASK_ERROR_BEANS, "total-record-failures", _c("task_record_failures", "Record processing failures (retried ones included).",
                                                *_TASK)),
    ConnectRule(TASK_ERROR_BEANS, "total-records-skipped", _c("task_records_skipped",
                                                "Records skipped because of errors (errors.tolerance=all).", *_TASK)),
    ConnectRule(TASK_ERROR_BEANS, "total-retries", _c("task_retries", "Retried operations.", *_TASK)),
    ConnectRule(TASK_ERROR_BEANS, "total-errors-logged", _c("task_errors_logged", "Errors logged.", *_TASK)),
    ConnectRule(TASK_ERROR_BEANS, "deadletterqueue-produce-requests", _c("task_dlq_produce_requests",
                                                           "Records written to the dead letter queue.", *_TASK)),
    ConnectRule(TASK_ERROR_BEANS, "deadletterqueue-produce-failures", _c("task_dlq_produce_failures",
                                                           "Failed writes to the dead letter queue.", *_TASK)),
    ConnectRule(TASK_ERROR_BEANS, "last-error-timestamp", _g("task_last_error_timestamp_seconds",
                                                             "When the task last had an error (0: never).", *_TASK),
                scale=0.001),
)

_STATUS = "Status the worker's MBean reports, as a state set."
STATUS_RULES: dict[str, MetricSpec] = {
    "connector-metrics": _g("jmx_connector_status", _STATUS, *_CONNECTOR, "state"),
    "connector-task-metrics": _g("jmx_task_status", _STATUS, *_TASK, "state"),
}
"""Beans whose `status` attribute becomes a state set (the REST states are the authority: they also
cover connectors that failed before registering any bean)."""

JMX_STATES = ("running", "paused", "stopped", "failed", "unassigned", "restarting", "destroyed")

CONNECT_JMX_METRICS = metric_specs(*referenced_specs(r.spec for r in CONNECT_RULES), *STATUS_RULES.values())
"""Every family the worker's `kafka.connect` beans give, declared once; labels besides target and the worker's
static labels."""


def sources(spec: MetricSpec) -> tuple[str, ...]:
    """`bean type` `attribute` of each attribute `spec`'s samples are read from (for the reference)."""
    read = [(r.bean_type.split("+")[0], r.attribute) for r in CONNECT_RULES if r.spec is spec]
    read += [(bean_type, "status") for bean_type, status in STATUS_RULES.items() if status is spec]
    return tuple(f"`{bean_type}` `{attribute}`" for bean_type, attribute in read)


def _bean_pattern(bean_type: str) -> str:
    if bean_type == WORKER_BEANS:
        return f"kafka.connect:type={WORKER_BEANS}"  # the worker's own bean, not its per-connector ones
    if bean_type == WORKER_CONNECTOR_BEANS:
        return f"kafka.connect:type={WORKER_BEANS},connector=*"
    return f"kafka.connect:type={bean_type},*"


def _connect_jmx_queries() -> list[tuple[str, tuple[str, ...]]]:
    wanted: dict[str, list[str]] = {}
    for rule in CONNECT_RULES:
        wanted.setdefault(rule.bean_type, []).append(rule.attribute)
    for bean_type in STATUS_RULES:
        wanted.setdefault(bean_type, []).append("status")
    return [(_bean_pattern(bean_type), tuple(dict.fromkeys(attributes))) for bean_type, attributes in wanted.items()]


CONNECT_JMX_QUERIES = _connect_jmx_queries()
"""One (pattern, attributes) query per bean type, asking each bean only for the attributes it has: Kafka's
JmxReporter logs a warning with a stack trace on the worker for every attribute a bean lacks, on every read."""
