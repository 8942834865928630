"""Kafka Connect workers: connector and task states, failures, restarts, pipeline identity, record flow, errors
and dead letter queue."""

from cdcwatch.mixin.dashboards.model import (
    CONNECT_STATES,
    RESTARTS_30M,
    DashboardSpec,
    PanelSpec,
    Query,
    Threshold,
    Variable,
    state_code,
)

__all__ = ["CONNECT"]

_SEL = '%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"'

CONNECT = DashboardSpec(
    "cdcwatch-connect", "CDC: Kafka Connect",
    "Connector and task states (REST), failures with their exception, restarts, each connector's slot and database, "
    "records polled and written, errors and the dead letter queue (JMX) per worker and connector.",
    "cdcwatch_connect_connectors{%(cdcwatch)s",
    (Variable("worker", "label_values(cdcwatch_connect_connectors{%(cdcwatch_board)s}, target)"),
     Variable("connector", 'label_values(cdcwatch_connect_connector_state{%(cdcwatch_board)s, target=~"$worker"}, connector)')),
    (
        ("State", (
            PanelSpec("Connector state", "The state Kafka Connect's REST API reports for each connector.", "none",
                      (Query(state_code("cdcwatch_connect_connector_state", _SEL, "connector", CONNECT_STATES),
                             "{{connector}}"),), kind="state", mappings=CONNECT_STATES,
                      alerts=("CdcConnectConnectorFailed", "CdcConnectTaskNotRunning")),
            PanelSpec("Task state", "The state of each task.", "none",
                      (Query(state_code("cdcwatch_connect_task_state", _SEL, "connector, task", CONNECT_STATES),
                             "{{connector}}/{{task}}"),), kind="state", mappings=CONNECT_STATES,
                      alerts=("CdcConnectTaskFailed", "CdcConnectTaskNotRunning")),
            PanelSpec("Failures", "FAILED connectors and tasks with the first exception class of their trace; "
                      "`GET /connectors/<name>/status` has the whole trace.", "none",
                      (Query(f"max by (connector, task, exception) (cdcwatch_connect_task_failure_info{{{_SEL}}} == 1)", "",
                             when="a task or connector FAILED"),
                       Query(f"max by (connector, exception) (cdcwatch_connect_connector_failure_info{{{_SEL}}} == 1)", "",
                             when="a task or connector FAILED")),
                      kind="table", alerts=("CdcConnectTaskFailed", "CdcConnectConnectorFailed")),
            PanelSpec("Tasks running of configured", "Tasks each connector has, and how many of them run.", "short",
                      (Query(f"sum by (connector) (cdcwatch_connect_connector_tasks_running{{{_SEL}}})", "{{connector}} running"),
                       Query(f"sum by (connector) (cdcwatch_connect_connector_tasks_configured{{{_SEL}}})",
                             "{{connector}} configured"))),
        )),
        ("Restarts and identity", (
            PanelSpec("Task restarts in 30 minutes", "Restarts of each task in the last 30 minutes (the worker JVM's or "
                      "the task's own), as the restart alert counts them.", "short",
                      (Query(f"{RESTARTS_30M}{{{_SEL}}}[30m])))", "{{connector}}/{{task}}",
                             when="the worker's JMX is collected"),),
                      threshold=Threshold("connect_task_restarts")),
            PanelSpec("Running since", "How long each task and each worker JVM have run since their last start.", "s",
                      (Query(f"time() - max by (connector, task) (cdcwatch_connect_task_start_time_seconds{{{_SEL}}})",
                             "{{connector}}/{{task}}", when="the worker's JMX is collected"),
                       Query('time() - max by (target) (cdcwatch_connect_worker_start_time_seconds{%(cdcwatch_board)s, '
                             'target=~"$worker"})', "worker {{target}}", when="the worker's JMX is collected"))),
            PanelSpec("Pipelines", "Each connector's server name (topic.prefix), replication slot, database and Debezium "
                      "plugin, from its configuration; a server name used twice is a conflict.", "none",
                      (Query("max by (connector, server, slot, database, plugin) "
                             f"(cdcwatch_connect_connector_pipeline_info{{{_SEL}}})", ""),
                       Query('max by (server) (cdcwatch_connect_server_name_conflicts{%(cdcwatch_board)s, target=~"$worker"}) > 0',
                             "", when="two connectors share a server name")),
                      kind="table", alerts=("CdcConnectServerNameConflict",)),
        )),
        ("Records", (
            PanelSpec("Records polled and written", "Records the source tasks poll from Debezium and write to Kafka, per "
                      "second.", "ops",
                      (Query(f"sum by (connector) (rate(cdcwatch_connect_source_records_polled_total{{{_SEL}}}[$__rate_interval]))",
                             "{{connector}} polled", when="the worker's JMX is collected"),
                       Query(f"sum by (connector) (rate(cdcwatch_connect_source_records_written_total{{{_SEL}}}[$__rate_interval]))",
                             "{{connector}} written", when="the worker's JMX is collected"))),
            PanelSpec("Records awaiting acknowledgement", "Records polled but not yet acknowledged by Kafka.", "short",
                      (Query(f"sum by (connector) (cdcwatch_connect_source_records_active{{{_SEL}}})", "{{connector}}",
                             when="the worker's JMX is collected"),)),
            PanelSpec("Poll batch time", "Average time a source task takes to poll a batch.", "s",
                      (Query(f"max by (connector, task) (cdcwatch_connect_source_poll_batch_avg_seconds{{{_SEL}}})",
                             "{{connector}}/{{task}}", when="the worker's JMX is collected"),)),
        )),
        ("Errors and dead letter queue", (
            PanelSpec("Record errors and retries", "Records that failed, and retried operations, per second.", "ops",
                      (Query(f"sum by (connector) (rate(cdcwatch_connect_task_record_errors_total{{{_SEL}}}[$__rate_interval]))",
                             "{{connector}} errors", when="the worker's JMX is collected"),
                       Query(f"sum by (connector) (rate(cdcwatch_connect_task_retries_total{{{_SEL}}}[$__rate_interval]))",
                             "{{connector}} retries", when="the worker's JMX is collected"))),
            PanelSpec("Records skipped", "Records skipped after errors (errors.tolerance=all) per interval: lost for a "
                      "source task.", "short",
                      (Query("sum by (connector) (increase(cdcwatch_connect_task_records_skipped_total"
                             f"{{{_SEL}}}[$__rate_interval]))", "{{connector}}", when="the worker's JMX is collected"),),
                      alerts=("CdcConnectRecordsSkipped",)),
            PanelSpec("Dead letter queue", "Records a sink task wrote to its dead letter queue, and writes that failed, "
                      "per second.", "ops",
                      (Query("sum by (connector) (rate(cdcwatch_connect_task_dlq_produce_requests_total"
                             f"{{{_SEL}}}[$__rate_interval]))", "{{connector}} written", when="the worker's JMX is collected"),
                       Query("sum by (connector) (rate(cdcwatch_connect_task_dlq_produce_failures_total"
                             f"{{{_SEL}}}[$__rate_interval]))", "{{connector}} failed", when="the worker's JMX is collected")),
                      alerts=("CdcConnectDlqProduceFailures",)),
        )),
    ), stage="connect_rest")
