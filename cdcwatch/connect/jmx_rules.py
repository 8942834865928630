"""The worker's `kafka.connect` MBeans → metrics, as data: one rule per (bean type, attribute).

Each rule exports into a metric family declared once as a `MetricSpec`, a constant spelling out the full
metric name (grep finds where it is defined); the rules of a family several attributes feed share its spec, one
label value each. `CONNECT_JMX_METRICS` gathers them with the status state sets (a name declared twice is an
error). A spec's labels are those the bean gives (connector and its server, task) and the rule's own; the
rule's are checked when the rule is made, the bean's as each sample is added.

Only listed attributes are requested: reading `connector-type` (a Java enum) fails unless
connect-api is on the JMX client's classpath, and the rest are not needed.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdcwatch.specs import MetricSpec, metric_specs, referenced_specs

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
SINK_TASK_BEANS = "sink-task-metrics"
TASK_ERROR_BEANS = "task-error-metrics"

_CONNECTOR = ("connector", "server")  # the labels of a connector's beans
_TASK = (*_CONNECTOR, "task")  # of a task's beans
_STATUS = "Status the worker's MBean reports, as a state set."

# The families, each declared once under its full name; the rules below refer to them (the attributes feeding one
# family share its spec, each with its own label value).
# the worker's bean
CONNECT_WORKER_CONNECTORS = MetricSpec("cdcwatch_connect_worker_connectors", "gauge", "Connectors on the worker.")
CONNECT_WORKER_TASKS = MetricSpec("cdcwatch_connect_worker_tasks", "gauge", "Tasks on the worker.")
CONNECT_WORKER_CONNECTOR_STARTUP_ATTEMPTS_TOTAL = MetricSpec(
    "cdcwatch_connect_worker_connector_startup_attempts_total", "counter", "Connector starts the worker attempted.")
CONNECT_WORKER_CONNECTOR_STARTUP_FAILURES_TOTAL = MetricSpec("cdcwatch_connect_worker_connector_startup_failures_total", "counter", (
    "Connector starts that failed (a connector that fails at startup has no MBeans of its own)."))
CONNECT_WORKER_TASK_STARTUP_FAILURES_TOTAL = MetricSpec(
    "cdcwatch_connect_worker_task_startup_failures_total", "counter", "Task starts that failed.")
# the worker's bean of each connector
CONNECT_WORKER_CONNECTOR_TASKS = MetricSpec(
    "cdcwatch_connect_worker_connector_tasks", "gauge", "The connector's tasks on this worker, by state.", (*_CONNECTOR, "state"))
# a task's beans
CONNECT_TASK_BATCH_SIZE_AVG = MetricSpec("cdcwatch_connect_task_batch_size_avg", "gauge", "Average records per batch.", _TASK)
CONNECT_TASK_RUNNING_RATIO = MetricSpec("cdcwatch_connect_task_running_ratio", "gauge", "Fraction of time the task was running.", _TASK)
CONNECT_TASK_OFFSET_COMMIT_FAILURE_RATIO = MetricSpec(
    "cdcwatch_connect_task_offset_commit_failure_ratio", "gauge", "Fraction of offset commits that failed.", _TASK)
# a source task's beans
CONNECT_SOURCE_RECORDS_POLLED_TOTAL = MetricSpec(
    "cdcwatch_connect_source_records_polled_total", "counter", "Records the source task polled (before transformations).", _TASK)
CONNECT_SOURCE_RECORDS_WRITTEN_TOTAL = MetricSpec(
    "cdcwatch_connect_source_records_written_total", "counter", "Records the source task wrote to Kafka (after transformations).", _TASK)
CONNECT_SOURCE_RECORD_POLL_RATE = MetricSpec(
    "cdcwatch_connect_source_record_poll_rate", "gauge", "Records polled per second (the worker's own rate window).", _TASK)
CONNECT_SOURCE_RECORDS_ACTIVE = MetricSpec(
    "cdcwatch_connect_source_records_active", "gauge", "Records polled but not yet acknowledged by Kafka.", _TASK)
CONNECT_SOURCE_POLL_BATCH_AVG_SECONDS = MetricSpec(
    "cdcwatch_connect_source_poll_batch_avg_seconds", "gauge", "Average time to poll a batch.", _TASK)
CONNECT_SOURCE_POLL_BATCH_MAX_SECONDS = MetricSpec(
    "cdcwatch_connect_source_poll_batch_max_seconds", "gauge", "Longest time to poll a batch.", _TASK)
# a sink task's beans
CONNECT_SINK_RECORDS_READ_TOTAL = MetricSpec(
    "cdcwatch_connect_sink_records_read_total", "counter", "Records the sink task read from Kafka (before transformations).", _TASK)
CONNECT_SINK_RECORDS_SENT_TOTAL = MetricSpec(
    "cdcwatch_connect_sink_records_sent_total", "counter", (
        "Records the sink task passed to its connector's put (after transformations): what it was asked to write. "
        "Read but not sent: filtered, or dropped after errors."), _TASK)
CONNECT_SINK_RECORDS_ACTIVE = MetricSpec(
    "cdcwatch_connect_sink_records_active", "gauge", "Records read but not yet committed (written and their offsets committed).", _TASK)
CONNECT_SINK_PUT_BATCH_AVG_SECONDS = MetricSpec(
    "cdcwatch_connect_sink_put_batch_avg_seconds", "gauge", "Average time the sink task takes to write (put) a batch.", _TASK)
CONNECT_SINK_PUT_BATCH_MAX_SECONDS = MetricSpec(
    "cdcwatch_connect_sink_put_batch_max_seconds", "gauge", "Longest time the sink task took to write (put) a batch.", _TASK)
CONNECT_SINK_OFFSET_COMMITS_TOTAL = MetricSpec(
    "cdcwatch_connect_sink_offset_commits_total", "counter", "Offset commits the sink task completed.", _TASK)
CONNECT_SINK_OFFSET_COMMITS_SKIPPED_TOTAL = MetricSpec(
    "cdcwatch_connect_sink_offset_commits_skipped_total", "counter", "Offset commits the sink task skipped (one already running).", _TASK)
CONNECT_SINK_PARTITIONS = MetricSpec(
    "cdcwatch_connect_sink_partitions", "gauge", "Topic partitions assigned to the sink task.", _TASK)
# a task's error beans
CONNECT_TASK_RECORD_ERRORS_TOTAL = MetricSpec(
    "cdcwatch_connect_task_record_errors_total", "counter", "Records that failed in the task.", _TASK)
CONNECT_TASK_RECORD_FAILURES_TOTAL = MetricSpec(
    "cdcwatch_connect_task_record_failures_total", "counter", "Record processing failures (retried ones included).", _TASK)
CONNECT_TASK_RECORDS_SKIPPED_TOTAL = MetricSpec(
    "cdcwatch_connect_task_records_skipped_total", "counter", "Records skipped because of errors (errors.tolerance=all).", _TASK)
CONNECT_TASK_RETRIES_TOTAL = MetricSpec("cdcwatch_connect_task_retries_total", "counter", "Retried operations.", _TASK)
CONNECT_TASK_ERRORS_LOGGED_TOTAL = MetricSpec("cdcwatch_connect_task_errors_logged_total", "counter", "Errors logged.", _TASK)
CONNECT_TASK_DLQ_PRODUCE_REQUESTS_TOTAL = MetricSpec(
    "cdcwatch_connect_task_dlq_produce_requests_total", "counter", "Records written to the dead letter queue.", _TASK)
CONNECT_TASK_DLQ_PRODUCE_FAILURES_TOTAL = MetricSpec(
    "cdcwatch_connect_task_dlq_produce_failures_total", "counter", "Failed writes to the dead letter queue.", _TASK)
CONNECT_TASK_LAST_ERROR_TIMESTAMP_SECONDS = MetricSpec(
    "cdcwatch_connect_task_last_error_timestamp_seconds", "gauge", "When the task last had an error (0: never).", _TASK)
# the `status` of a connector's and a task's beans
CONNECT_JMX_CONNECTOR_STATUS = MetricSpec("cdcwatch_connect_jmx_connector_status", "gauge", _STATUS, (*_CONNECTOR, "state"))
CONNECT_JMX_TASK_STATUS = MetricSpec("cdcwatch_connect_jmx_task_status", "gauge", _STATUS, (*_TASK, "state"))

CONNECT_RULES: tuple[ConnectRule, ...] = (
    ConnectRule(WORKER_BEANS, "connector-count", CONNECT_WORKER_CONNECTORS),
    ConnectRule(WORKER_BEANS, "task-count", CONNECT_WORKER_TASKS),
    ConnectRule(WORKER_BEANS, "connector-startup-attempts-total", CONNECT_WORKER_CONNECTOR_STARTUP_ATTEMPTS_TOTAL),
    ConnectRule(WORKER_BEANS, "connector-startup-failure-total", CONNECT_WORKER_CONNECTOR_STARTUP_FAILURES_TOTAL),
    ConnectRule(WORKER_BEANS, "task-startup-failure-total", CONNECT_WORKER_TASK_STARTUP_FAILURES_TOTAL),
    *(ConnectRule(WORKER_CONNECTOR_BEANS, f"connector-{state}-task-count", CONNECT_WORKER_CONNECTOR_TASKS, labels=(("state", state),))
      for state in ("running", "paused", "failed", "unassigned", "restarting", "destroyed")),
    ConnectRule(TASK_BEANS, "batch-size-avg", CONNECT_TASK_BATCH_SIZE_AVG),
    ConnectRule(TASK_BEANS, "running-ratio", CONNECT_TASK_RUNNING_RATIO),
    ConnectRule(TASK_BEANS, "offset-commit-failure-percentage", CONNECT_TASK_OFFSET_COMMIT_FAILURE_RATIO, scale=0.01),
    ConnectRule(SOURCE_TASK_BEANS, "source-record-poll-total", CONNECT_SOURCE_RECORDS_POLLED_TOTAL),
    ConnectRule(SOURCE_TASK_BEANS, "source-record-write-total", CONNECT_SOURCE_RECORDS_WRITTEN_TOTAL),
    ConnectRule(SOURCE_TASK_BEANS, "source-record-poll-rate", CONNECT_SOURCE_RECORD_POLL_RATE),
    ConnectRule(SOURCE_TASK_BEANS, "source-record-active-count", CONNECT_SOURCE_RECORDS_ACTIVE),
    ConnectRule(SOURCE_TASK_BEANS, "poll-batch-avg-time-ms", CONNECT_SOURCE_POLL_BATCH_AVG_SECONDS, scale=0.001),
    ConnectRule(SOURCE_TASK_BEANS, "poll-batch-max-time-ms", CONNECT_SOURCE_POLL_BATCH_MAX_SECONDS, scale=0.001),
    ConnectRule(SINK_TASK_BEANS, "sink-record-read-total", CONNECT_SINK_RECORDS_READ_TOTAL),
    ConnectRule(SINK_TASK_BEANS, "sink-record-send-total", CONNECT_SINK_RECORDS_SENT_TOTAL),
    ConnectRule(SINK_TASK_BEANS, "sink-record-active-count", CONNECT_SINK_RECORDS_ACTIVE),
    ConnectRule(SINK_TASK_BEANS, "put-batch-avg-time-ms", CONNECT_SINK_PUT_BATCH_AVG_SECONDS, scale=0.001),
    ConnectRule(SINK_TASK_BEANS, "put-batch-max-time-ms", CONNECT_SINK_PUT_BATCH_MAX_SECONDS, scale=0.001),
    ConnectRule(SINK_TASK_BEANS, "offset-commit-completion-total", CONNECT_SINK_OFFSET_COMMITS_TOTAL),
    ConnectRule(SINK_TASK_BEANS, "offset-commit-skip-total", CONNECT_SINK_OFFSET_COMMITS_SKIPPED_TOTAL),
    ConnectRule(SINK_TASK_BEANS, "partition-count", CONNECT_SINK_PARTITIONS),
    ConnectRule(TASK_ERROR_BEANS, "total-record-errors", CONNECT_TASK_RECORD_ERRORS_TOTAL),
    ConnectRule(TASK_ERROR_BEANS, "total-record-failures", CONNECT_TASK_RECORD_FAILURES_TOTAL),
    ConnectRule(TASK_ERROR_BEANS, "total-records-skipped", CONNECT_TASK_RECORDS_SKIPPED_TOTAL),
    ConnectRule(TASK_ERROR_BEANS, "total-retries", CONNECT_TASK_RETRIES_TOTAL),
    ConnectRule(TASK_ERROR_BEANS, "total-errors-logged", CONNECT_TASK_ERRORS_LOGGED_TOTAL),
    ConnectRule(TASK_ERROR_BEANS, "deadletterqueue-produce-requests", CONNECT_TASK_DLQ_PRODUCE_REQUESTS_TOTAL),
    ConnectRule(TASK_ERROR_BEANS, "deadletterqueue-produce-failures", CONNECT_TASK_DLQ_PRODUCE_FAILURES_TOTAL),
    ConnectRule(TASK_ERROR_BEANS, "last-error-timestamp", CONNECT_TASK_LAST_ERROR_TIMESTAMP_SECONDS, scale=0.001),
)

STATUS_RULES: dict[str, MetricSpec] = {
    "connector-metrics": CONNECT_JMX_CONNECTOR_STATUS,
    "connector-task-metrics": CONNECT_JMX_TASK_STATUS,
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
