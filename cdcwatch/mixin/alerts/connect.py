"""Kafka Connect workers: connectors and tasks that failed or stopped, records skipped or lost on the way
to the dead letter queue."""

from cdcwatch.mixin.alerts.examples import CONNECT, EXPORTER
from cdcwatch.mixin.alerts.model import Alert, Case, Group, labels_of

__all__ = ["GROUP"]

_TASK = f'{CONNECT},task="0"'
_BEAN = f'{EXPORTER},target="connect",connector="inventory-connector",task="0"'
_EXCEPTION = 'exception="org.postgresql.util.PSQLException"'
_CONNECTOR_FAILED = "cdcwatch_connect_connector_failure_info"
_CLASS_NOT_FOUND = 'exception="java.lang.ClassNotFoundException"'

ALERTS = (
    Alert(
        "CdcConnectTaskFailed",
        "cdcwatch_connect_task_failure_info{%(cdcwatch)s} == 1",
        "critical", "instant",
        "Kafka Connect task {{ $labels.connector }}/{{ $labels.task }} FAILED",
        "Task {{ $labels.task }} of {{ $labels.connector }} (server {{ $labels.server }}) failed with "
        "{{ $labels.exception }}; a FAILED task never restarts by itself.",
        fires=Case("failed", {f"cdcwatch_connect_task_failure_info{{{_TASK},{_EXCEPTION}}}": "1x40"},
                   labels=labels_of(_TASK, _EXCEPTION), value=1),
        quiet=Case("not failed", {f"cdcwatch_connect_task_failure_info{{{_TASK},{_EXCEPTION}}}": "0x40"}),
    ),
    Alert(
        "CdcConnectConnectorFailed",
        "cdcwatch_connect_connector_failure_info{%(cdcwatch)s} == 1",
        "critical", "instant",
        "Kafka Connect connector {{ $labels.connector }} FAILED",
        "The connector {{ $labels.connector }} (server {{ $labels.server }}) failed with {{ $labels.exception }}; "
        "a connector that fails at start-up has no Debezium beans at all.",
        fires=Case("failed", {f'{_CONNECTOR_FAILED}{{{CONNECT},{_CLASS_NOT_FOUND}}}': "1x40"},
                   labels=labels_of(CONNECT, _CLASS_NOT_FOUND), value=1),
        quiet=Case("not failed", {f'{_CONNECTOR_FAILED}{{{CONNECT},{_CLASS_NOT_FOUND}}}': "0x40"}),
    ),
    Alert(
        "CdcConnectTaskNotRunning",
        'cdcwatch_connect_task_state{%(cdcwatch)s, state=~"PAUSED|UNASSIGNED"} == 1\n'
        'or cdcwatch_connect_connector_state{%(cdcwatch)s, state=~"PAUSED|UNASSIGNED"} == 1',
        "critical", "warning",
        "Kafka Connect {{ $labels.connector }} is {{ $labels.state }}",
        "{{ $labels.connector }} (server {{ $labels.server }}) has been {{ $labels.state }} for %(for)s: "
        "no change flows. PAUSED is someone's doing (resume it); UNASSIGNED means no worker runs it.",
        fires=Case("a task left unassigned", {
            f'cdcwatch_connect_task_state{{{_TASK},state="UNASSIGNED"}}': "1x40",
            f'cdcwatch_connect_connector_state{{{CONNECT},state="PAUSED"}}': "0x40"},
            labels=labels_of(_TASK, 'state="UNASSIGNED"'), value=1),
        quiet=Case("running", {
            f'cdcwatch_connect_task_state{{{_TASK},state="UNASSIGNED"}}': "0x40",
            f'cdcwatch_connect_connector_state{{{CONNECT},state="PAUSED"}}': "0x40"}),
    ),
    Alert(
        "CdcConnectRecordsSkipped",
        "sum by (job, instance, target, connector, task) (increase(cdcwatch_connect_task_records_skipped_total{%(cdcwatch)s}[10m])) > 0",
        "critical", "instant",
        "Kafka Connect {{ $labels.connector }}/{{ $labels.task }} skips records",
        "Task {{ $labels.task }} of {{ $labels.connector }} skipped records after errors (errors.tolerance=all) in "
        "the last 10 minutes: a source task has no dead letter queue, so those changes are lost.",
        fires=Case("one more every minute", {f"cdcwatch_connect_task_records_skipped_total{{{_BEAN}}}": "0+1x40"},
                   labels=labels_of(_BEAN), value=10),
        quiet=Case("a constant count", {f"cdcwatch_connect_task_records_skipped_total{{{_BEAN}}}": "4x40"}),
        since="1m", boundary_value=2,
    ),
    Alert(
        "CdcConnectDlqProduceFailures",
        "sum by (job, instance, target, connector, task) "
        "(increase(cdcwatch_connect_task_dlq_produce_failures_total{%(cdcwatch)s}[10m])) > 0",
        "critical", "instant",
        "Kafka Connect {{ $labels.connector }}/{{ $labels.task }} cannot write its dead letter queue",
        "Task {{ $labels.task }} of {{ $labels.connector }} failed to write records to its dead letter queue in the "
        "last 10 minutes: those records are neither applied nor kept.",
        fires=Case("one more every minute", {f"cdcwatch_connect_task_dlq_produce_failures_total{{{_BEAN}}}": "0+1x40"},
                   labels=labels_of(_BEAN), value=10),
        quiet=Case("a constant count", {f"cdcwatch_connect_task_dlq_produce_failures_total{{{_BEAN}}}": "1x40"}),
        since="1m", boundary_value=2,
    ),
)

GROUP = Group("cdcwatch-connect", (), ALERTS)
