"""Kafka Connect workers: connectors and tasks that failed, stopped or keep restarting, records skipped or lost
on the way to the dead letter queue, and two connectors sharing one server name."""

# ruff: noqa: E501 (each rule's PromQL is one literal block, its lines as long as in the rule file)

from cdcwatch.mixin.alerts.examples import CONNECT, EXPORTER
from cdcwatch.mixin.alerts.model import Alert, Case, Group, labels_of

__all__ = ["GROUP"]

_TASK = f'{CONNECT},task="0"'
_STATE = f'{CONNECT},type="source"'
"""A connector's state, failure and info series: they carry its type."""
_STATE_TASK = f'{_STATE},task="0"'
_BEAN = f'{EXPORTER},target="connect",connector="inventory-connector",task="0"'
_EXCEPTION = 'exception="org.postgresql.util.PSQLException"'
_CONNECTOR_FAILED = "cdcwatch_connect_connector_failure_info"
_CLASS_NOT_FOUND = 'exception="java.lang.ClassNotFoundException"'
_RESTARTS = "cdcwatch_connect_task_restarts_total"
_SERVER = f'{EXPORTER},target="connect",server="inventory"'

_WORKER = f'{EXPORTER},collector="connect",target="connect"'
_CONNECTOR_CLASS = 'class="io.debezium.connector.postgresql.PostgresConnector",worker_id="connect:8083"'
_INFO = f"{_STATE},{_CONNECTOR_CLASS}"
_SINK_INFO = (f'{EXPORTER},target="connect",connector="inventory-sink",server="inventory",type="sink",'
              'class="io.debezium.connector.jdbc.JdbcSinkConnector",worker_id="connect:8083"')
_RENAMED = f'{EXPORTER},target="connect",connector="inventory-connector-v2",server="inventory",type="source",{_CONNECTOR_CLASS}'
_WORKER_JVM = f'{EXPORTER},collector="debezium",target="connect"'
_RESUMED = {f'cdcwatch_connect_task_state{{{_STATE_TASK},state="PAUSED"}}': "1x18 0x22",
            f'cdcwatch_connect_connector_state{{{_STATE},state="PAUSED"}}': "1x18 0x22"}
"""A connector (and its task) paused for 19 minutes, running again from the 19th."""
_FAILURES = ("{{ range printf `max by (failure) (cdcwatch_target_failure_info{job=%%q, instance=%%q, target=%%q})` "
             '$labels.job $labels.instance $labels.target | query | sortByLabel "failure" }} ({{ .Labels.failure }}){{ end }}')
"""How the worker's collections fail now, as " (refused)": one per kind of failure."""


_WORKER_WITHOUT_CONNECTOR = Case(
    "a worker with no connector seen dies at 5 minutes (its REST API and JMX unreachable): a page 2 minutes later",
    {f"cdcwatch_up{{{_WORKER}}}": "1x4 0x40", f"cdcwatch_up{{{_WORKER_JVM}}}": "1x4 0x40",
     f'cdcwatch_target_failure_info{{{_WORKER},failure="refused"}}': "_x4 1x40",
     f'cdcwatch_target_failure_info{{{_WORKER_JVM},failure="refused"}}': "_x4 1x40"},
    labels=labels_of(EXPORTER, 'target="connect"'), queried={"failure": ("refused",)}, since="5m")


ALERTS = (
    Alert(
        "CdcConnectWorkerDown",
        # how the collection fails (refused, timeout, ...) can change within one outage, as when the worker's port
        # opens before its REST API answers: it is named in the description, not a label, so the alert stays one.
        # One series per server the worker's connectors fed within `durations.memory` (one without, for a worker
        # without a known connector), all in one notification: the inhibitions reach the pipelines of those servers
        # (their staleness and catch-up), and no other's
        """
        (
          max by (job, instance, target, server) (last_over_time(cdcwatch_connect_connector_info{%(cdcwatch)s, server!=""}[%(memory)s])) * 0
          or
          (
            max by (job, instance, target) (cdcwatch_up{%(cdcwatch)s, collector="connect"}) * 0
            unless on (job, instance, target) last_over_time(cdcwatch_connect_connector_info{%(cdcwatch)s, server!=""}[%(memory)s])
          )
        )
        + on (job, instance, target) group_left ()
        (min by (job, instance, target) (cdcwatch_up{%(cdcwatch)s, collector="connect"}) == 0)
        """,
        "critical", "critical",
        "Kafka Connect worker {{ $labels.target }} does not answer",
        "cdcwatch has not reached {{ $labels.target }} for %(for)s" + _FAILURES + ": the "
        "worker (or its JVM) is down or hangs, so none of its connectors captures anything and their series are "
        "gone. cdcwatch's log names the address and what to check first.",
        fires=Case("the worker that ran the connector of inventory dies at 5 minutes (its REST API and JMX "
                   "unreachable): a page 2 minutes later, naming that server for the inhibitions of its pipeline",
                   {f"cdcwatch_up{{{_WORKER}}}": "1x4 0x40", f"cdcwatch_up{{{_WORKER_JVM}}}": "1x4 0x40",
                    f'cdcwatch_target_failure_info{{{_WORKER},failure="refused"}}': "_x4 1x40",
                    f'cdcwatch_target_failure_info{{{_WORKER_JVM},failure="refused"}}': "_x4 1x40",
                    f"cdcwatch_connect_connector_info{{{_INFO}}}": "1x4 stale"},
                   labels=labels_of(EXPORTER, 'target="connect"', 'server="inventory"'), queried={"failure": ("refused",)},
                   needs=frozenset({"connect_rest"})),
        quiet=Case("the worker answers (a failure before, none now)",
                   {f"cdcwatch_up{{{_WORKER}}}": "0 1x40", f"cdcwatch_up{{{_WORKER_JVM}}}": "0 1x40",
                    f'cdcwatch_target_failure_info{{{_WORKER},failure="timeout"}}': "1 _x40",
                    f"cdcwatch_connect_connector_info{{{_INFO}}}": "1x40"}),
        since="5m",
        fires_otherwise=(_WORKER_WITHOUT_CONNECTOR,),
        more=(_WORKER_WITHOUT_CONNECTOR,
              Case("the failure changes during the outage (refused while the worker is gone, then other while it starts "
                   "and its REST API does not answer yet): the same alert goes on firing",
                   {f"cdcwatch_up{{{_WORKER}}}": "1x4 0x40", f"cdcwatch_up{{{_WORKER_JVM}}}": "1x4 0x40",
                    f'cdcwatch_target_failure_info{{{_WORKER},failure="refused"}}': "_x4 1x4 stale",
                    f'cdcwatch_target_failure_info{{{_WORKER},failure="other"}}': "_x9 1x40",
                    f'cdcwatch_target_failure_info{{{_WORKER_JVM},failure="refused"}}': "_x4 1x40"},
                   at="10m", labels=labels_of(EXPORTER, 'target="connect"'), queried={"failure": ("other", "refused")}),),
        # without the REST API, the worker's JMX alone (collected by the debezium collector)
        shaped=lambda stages: (None if "connect_rest" in stages else "" if "debezium" not in stages
                               else 'min by (job, instance, target) (cdcwatch_up{%(cdcwatch)s, collector="debezium"}) == 0'),
        # once the worker answers, its connectors start again and register their beans: its inhibition of their
        # alerts (CdcDebeziumMetricsVanished while a task starts) lasts through that
        through_recovery=True,
    ),
    Alert(
        "CdcConnectTaskFailed",
        "cdcwatch_connect_task_failure_info{%(cdcwatch)s} == 1",
        "critical", "instant",
        "Kafka Connect task {{ $labels.connector }}/{{ $labels.task }} FAILED",
        "Task {{ $labels.task }} of {{ $labels.connector }} (server {{ $labels.server }}) failed with "
        "{{ $labels.exception }}; a FAILED task never restarts by itself.",
        fires=Case("failed", {f"cdcwatch_connect_task_failure_info{{{_STATE_TASK},{_EXCEPTION}}}": "1x40"},
                   labels=labels_of(_STATE_TASK, _EXCEPTION), value=1),
        quiet=Case("not failed", {f"cdcwatch_connect_task_failure_info{{{_STATE_TASK},{_EXCEPTION}}}": "0x40"}),
        through_recovery=True,
    ),
    Alert(
        "CdcConnectConnectorFailed",
        "cdcwatch_connect_connector_failure_info{%(cdcwatch)s} == 1",
        "critical", "instant",
        "Kafka Connect connector {{ $labels.connector }} FAILED",
        "The connector {{ $labels.connector }} (server {{ $labels.server }}) failed with {{ $labels.exception }}; "
        "a connector that fails at start-up has no Debezium beans at all.",
        fires=Case("failed", {f'{_CONNECTOR_FAILED}{{{_STATE},{_CLASS_NOT_FOUND}}}': "1x40"},
                   labels=labels_of(_STATE, _CLASS_NOT_FOUND), value=1),
        quiet=Case("not failed", {f'{_CONNECTOR_FAILED}{{{_STATE},{_CLASS_NOT_FOUND}}}': "0x40"}),
        through_recovery=True,
    ),
    Alert(
        "CdcConnectTaskNotRunning",
        """
        cdcwatch_connect_connector_state{%(cdcwatch)s, state=~"PAUSED|UNASSIGNED"} == 1
        or
        (
          cdcwatch_connect_task_state{%(cdcwatch)s, state=~"PAUSED|UNASSIGNED"} == 1
          unless on (job, instance, target, connector)
            cdcwatch_connect_connector_state{%(cdcwatch)s, state=~"PAUSED|UNASSIGNED"} == 1
        )
        """,
        "critical", "warning",
        "Kafka Connect {{ $labels.connector }} is {{ $labels.state }}",
        "{{ $labels.connector }} (server {{ $labels.server }}) has been {{ $labels.state }} for %(for)s: "
        "no change flows. PAUSED is someone's doing (resume it); UNASSIGNED means no worker runs it. A paused "
        "connector's tasks are in its one alert.",
        fires=Case("a task left unassigned", {
            f'cdcwatch_connect_task_state{{{_STATE_TASK},state="UNASSIGNED"}}': "1x40",
            f'cdcwatch_connect_connector_state{{{_STATE},state="PAUSED"}}': "0x40"},
            labels=labels_of(_STATE_TASK, 'state="UNASSIGNED"'), value=1),
        quiet=Case("running", {
            f'cdcwatch_connect_task_state{{{_STATE_TASK},state="UNASSIGNED"}}': "0x40",
            f'cdcwatch_connect_connector_state{{{_STATE},state="PAUSED"}}': "0x40"}),
        more=(Case("a paused connector pauses its tasks: one alert, the connector's", {
            f'cdcwatch_connect_task_state{{{_STATE_TASK},state="PAUSED"}}': "1x40",
            f'cdcwatch_connect_connector_state{{{_STATE},state="PAUSED"}}': "1x40"},
            labels=labels_of(_STATE, 'state="PAUSED"'), value=1),
              Case("resumed a minute ago after 19 minutes paused: firing on while its pipeline catches up", _RESUMED,
                   labels=labels_of(_STATE, 'state="PAUSED"'), value=1),
              Case("resumed 6 minutes ago: resolved", _RESUMED, at="25m")),
        through_recovery=True,
    ),
    Alert(
        "CdcConnectConnectorVanished",
        # listed within `durations.memory`, listed no more while the worker answers; a connector of the same server
        # and type listed now is a rename, not a loss (a sink of that server is no source's rename)
        """
        max by (job, instance, target, connector, server, type) (last_over_time(cdcwatch_connect_connector_info{%(cdcwatch)s}[%(memory)s]))
        unless on (job, instance, target, connector) cdcwatch_connect_connector_info{%(cdcwatch)s}
        unless on (job, instance, target, server, type) cdcwatch_connect_connector_info{%(cdcwatch)s, server!=""}
        and on (job, instance, target) cdcwatch_up{%(cdcwatch)s, collector="connect"} == 1
        """,
        "critical", "instant",
        "Kafka Connect connector {{ $labels.connector }} vanished from {{ $labels.target }}",
        "The connector {{ $labels.connector }} (server {{ $labels.server }}) was listed by the worker "
        "{{ $labels.target }} in the last %(memory)s and is listed no more while the worker answers: it was deleted, "
        "or renamed with another topic.prefix. Nothing captures its server's changes; its replication slot or binlog "
        "position waits where it stopped.",
        fires=Case("deleted at 5 minutes, the worker answering", {
            f"cdcwatch_connect_connector_info{{{_INFO}}}": "1x4 stale", f"cdcwatch_up{{{_WORKER}}}": "1x45"},
            labels=labels_of(_STATE), value=1),
        quiet=Case("listed", {f"cdcwatch_connect_connector_info{{{_INFO}}}": "1x45", f"cdcwatch_up{{{_WORKER}}}": "1x45"}),
        since="5m",
        more=(Case("deleted at 5 minutes while a sink of its server stays listed: lost, not renamed", {
                  f"cdcwatch_connect_connector_info{{{_INFO}}}": "1x4 stale", f"cdcwatch_connect_connector_info{{{_SINK_INFO}}}": "1x45",
                  f"cdcwatch_up{{{_WORKER}}}": "1x45"}, labels=labels_of(_STATE), value=1),
              Case("renamed at 5 minutes, the same topic.prefix: not lost", {
                  f"cdcwatch_connect_connector_info{{{_INFO}}}": "1x4 stale",
                  f'cdcwatch_connect_connector_info{{{_RENAMED}}}': "_x5 1x40", f"cdcwatch_up{{{_WORKER}}}": "1x45"}),
              Case("the worker down: its own alert, not this one", {
                  f"cdcwatch_connect_connector_info{{{_INFO}}}": "1x4 stale", f"cdcwatch_up{{{_WORKER}}}": "1x4 0x40"}),
              Case("created again a minute ago after 14 minutes gone: firing on while its pipeline catches up", {
                  f"cdcwatch_connect_connector_info{{{_INFO}}}": "1x4 stale _x13 1x30", f"cdcwatch_up{{{_WORKER}}}": "1x45"},
                  labels=labels_of(_STATE), value=1),
              Case("created again 6 minutes ago: resolved", {
                  f"cdcwatch_connect_connector_info{{{_INFO}}}": "1x4 stale _x8 1x30", f"cdcwatch_up{{{_WORKER}}}": "1x45"})),
        through_recovery=True,
    ),
    Alert(
        "CdcConnectRecordsSkipped",
        "sum by (job, instance, target, connector, task) (increase(cdcwatch_connect_task_records_skipped_total{%(cdcwatch)s}[%(loss_window)s])) > 0",
        "critical", "instant",
        "Kafka Connect {{ $labels.connector }}/{{ $labels.task }} skips records",
        "Task {{ $labels.task }} of {{ $labels.connector }} skipped records after errors (errors.tolerance=all) in "
        "the last %(loss_window)s: those changes are lost (a source task has no dead letter queue; a sink task that "
        "sends them to one raises CdcConnectSinkDeadLettering instead).",
        fires=Case("one more every minute", {f"cdcwatch_connect_task_records_skipped_total{{{_BEAN}}}": "0+1x40"},
                   labels=labels_of(_BEAN), value=10),
        quiet=Case("a constant count", {f"cdcwatch_connect_task_records_skipped_total{{{_BEAN}}}": "4x40"}),
        since="1m", boundary_value=2,
    ),
    Alert(
        "CdcConnectSinkDeadLettering",
        "sum by (job, instance, target, connector, task) (increase(cdcwatch_connect_task_dlq_produce_requests_total{%(cdcwatch)s}[%(loss_window)s])) > 0",
        "critical", "instant",
        "Kafka Connect {{ $labels.connector }}/{{ $labels.task }} sends records to its dead letter queue",
        "Task {{ $labels.task }} of {{ $labels.connector }} sent {{ $value | humanize }} records to its dead letter "
        "queue in the last %(loss_window)s instead of writing them (errors.tolerance=all): the target misses those "
        "changes while the task commits their offsets, so its consumer lag reads 0. The dead letter topic's headers "
        "(errors.deadletterqueue.context.headers.enable) name each record's error.",
        fires=Case("one more every minute", {f"cdcwatch_connect_task_dlq_produce_requests_total{{{_BEAN}}}": "0+1x40"},
                   labels=labels_of(_BEAN), value=10),
        quiet=Case("a constant count", {f"cdcwatch_connect_task_dlq_produce_requests_total{{{_BEAN}}}": "3x40"}),
        since="1m", boundary_value=2,
    ),
    Alert(
        "CdcConnectDlqProduceFailures",
        "sum by (job, instance, target, connector, task) (increase(cdcwatch_connect_task_dlq_produce_failures_total{%(cdcwatch)s}[%(loss_window)s])) > 0",
        "critical", "instant",
        "Kafka Connect {{ $labels.connector }}/{{ $labels.task }} cannot write its dead letter queue",
        "Task {{ $labels.task }} of {{ $labels.connector }} failed to write records to its dead letter queue in the "
        "last %(loss_window)s: those records are neither applied nor kept.",
        fires=Case("one more every minute", {f"cdcwatch_connect_task_dlq_produce_failures_total{{{_BEAN}}}": "0+1x40"},
                   labels=labels_of(_BEAN), value=10),
        quiet=Case("a constant count", {f"cdcwatch_connect_task_dlq_produce_failures_total{{{_BEAN}}}": "1x40"}),
        since="1m", boundary_value=2,
    ),
    Alert(
        "CdcConnectTaskRestarting",
        "sum by (job, instance, target, connector, server, task) (increase(cdcwatch_connect_task_restarts_total{%(cdcwatch)s}[30m])) > %(connect_task_restarts)s",
        "warning", "instant",
        "Kafka Connect {{ $labels.connector }}/{{ $labels.task }} keeps restarting",
        "Task {{ $labels.task }} of {{ $labels.connector }} (server {{ $labels.server }}) restarted "
        "{{ $value | humanize }} times in the last 30 minutes (threshold %(connect_task_restarts)s): each restart "
        "re-reads from the last committed offset, so changes arrive late and twice.",
        fires=Case("a restart every 2 minutes", {f'{_RESTARTS}{{{_TASK},reason="task"}}': "0 0 1 1 2 2 3 3 4 4 5 5 6x30",
                                                  f'{_RESTARTS}{{{_TASK},reason="jvm"}}': "0x40"},
                   labels=labels_of(_TASK), value=6),
        quiet=Case("one restart at a deploy", {f'{_RESTARTS}{{{_TASK},reason="task"}}': "0 0 0 0 1x40",
                                               f'{_RESTARTS}{{{_TASK},reason="jvm"}}': "0x40"}),
        since="6m", boundary_value=3,
        more=(Case("the worker JVM crashes and the task restarts in each new JVM",
                   {f'{_RESTARTS}{{{_TASK},reason="task"}}': "0x40",
                    f'{_RESTARTS}{{{_TASK},reason="jvm"}}': "0 1 2 3x40"}, at="5m", labels=labels_of(_TASK), value=3),
              Case("restarts far apart: one an hour", {f'{_RESTARTS}{{{_TASK},reason="task"}}': "0x59 1x60 2x60 3x60",
                                                       f'{_RESTARTS}{{{_TASK},reason="jvm"}}': "0x240"}, at="200m")),
    ),
    Alert(
        "CdcConnectServerNameConflict",
        "cdcwatch_connect_server_name_conflicts{%(cdcwatch)s} > 0",
        "warning", "instant",
        "Two Kafka Connect connectors use the server name {{ $labels.server }}",
        "{{ $value | humanize }} more Debezium connector(s) on {{ $labels.target }} share the topic.prefix "
        "{{ $labels.server }}: their change topics mix and their Debezium MBeans collide, so one of them is not "
        "monitored.",
        fires=Case("a second connector with the same topic.prefix", {
            f"cdcwatch_connect_server_name_conflicts{{{_SERVER}}}": "0 0 1x40"}, labels=labels_of(_SERVER), value=1),
        quiet=Case("one connector per server name", {f"cdcwatch_connect_server_name_conflicts{{{_SERVER}}}": "0x40"}),
        since="2m",
    ),
)

GROUP = Group("cdcwatch-connect", (), ALERTS)
