"""Kafka Connect workers: connector and task states, failures, restarts, pipeline identity, record flow, errors
and dead letter queue."""

# ruff: noqa: E501 (each panel's PromQL is one literal block, its lines as long as on the dashboard)

from cdcwatch.mixin.dashboards.model import (
    CONNECT_STATES,
    DashboardSpec,
    PanelSpec,
    Query,
    Threshold,
    Variable,
)

__all__ = ["CONNECT"]


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
                      (Query("""
                                 max by (connector) (
                                   cdcwatch_connect_connector_state{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector", state="RUNNING"} * 1
                                   or cdcwatch_connect_connector_state{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector", state="RESTARTING"} * 2
                                   or cdcwatch_connect_connector_state{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector", state="PAUSED"} * 3
                                   or cdcwatch_connect_connector_state{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector", state="STOPPED"} * 4
                                   or cdcwatch_connect_connector_state{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector", state="UNASSIGNED"} * 5
                                   or cdcwatch_connect_connector_state{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector", state="FAILED"} * 6
                                 )
                                 """,
                             "{{connector}}"),), kind="state", mappings=CONNECT_STATES,
                      alerts=("CdcConnectConnectorFailed", "CdcConnectTaskNotRunning")),
            PanelSpec("Task state", "The state of each task.", "none",
                      (Query("""
                                 max by (connector, task) (
                                   cdcwatch_connect_task_state{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector", state="RUNNING"} * 1
                                   or cdcwatch_connect_task_state{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector", state="RESTARTING"} * 2
                                   or cdcwatch_connect_task_state{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector", state="PAUSED"} * 3
                                   or cdcwatch_connect_task_state{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector", state="STOPPED"} * 4
                                   or cdcwatch_connect_task_state{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector", state="UNASSIGNED"} * 5
                                   or cdcwatch_connect_task_state{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector", state="FAILED"} * 6
                                 )
                                 """,
                             "{{connector}}/{{task}}"),), kind="state", mappings=CONNECT_STATES,
                      alerts=("CdcConnectTaskFailed", "CdcConnectTaskNotRunning")),
            PanelSpec("Failures", "FAILED connectors and tasks with the first exception class of their trace; "
                      "`GET /connectors/<name>/status` has the whole trace.", "none",
                      (Query('max by (connector, task, exception) (cdcwatch_connect_task_failure_info{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"} == 1)', "",
                             when="a task or connector FAILED"),
                       Query('max by (connector, exception) (cdcwatch_connect_connector_failure_info{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"} == 1)', "",
                             when="a task or connector FAILED")),
                      kind="table", alerts=("CdcConnectTaskFailed", "CdcConnectConnectorFailed")),
            PanelSpec("Tasks running of configured", "Tasks each connector has, and how many of them run.", "short",
                      (Query('sum by (connector) (cdcwatch_connect_connector_tasks_running{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"})', "{{connector}} running"),
                       Query('sum by (connector) (cdcwatch_connect_connector_tasks_configured{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"})',
                             "{{connector}} configured"))),
        )),
        ("Restarts and identity", (
            PanelSpec("Task restarts in 30 minutes", "Restarts of each task in the last 30 minutes (the worker JVM's or "
                      "the task's own), as the restart alert counts them.", "short",
                      (Query('sum by (connector, task) (round(increase(cdcwatch_connect_task_restarts_total{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"}[30m])))', "{{connector}}/{{task}}",
                             when="the worker's JMX is collected"),),
                      threshold=Threshold("connect_task_restarts")),
            PanelSpec("Running since", "How long each task and each worker JVM have run since their last start.", "s",
                      (Query('time() - max by (connector, task) (cdcwatch_connect_task_start_time_seconds{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"})',
                             "{{connector}}/{{task}}", when="the worker's JMX is collected"),
                       Query('time() - max by (target) (cdcwatch_connect_worker_start_time_seconds{%(cdcwatch_board)s, target=~"$worker"})', "worker {{target}}", when="the worker's JMX is collected"))),
            PanelSpec("Pipelines", "Each connector's server name (topic.prefix), replication slot, database and Debezium "
                      "plugin, from its configuration; a server name used twice is a conflict.", "none",
                      (Query('max by (connector, server, slot, database, plugin) (cdcwatch_connect_connector_pipeline_info{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"})', ""),
                       Query('max by (server) (cdcwatch_connect_server_name_conflicts{%(cdcwatch_board)s, target=~"$worker"}) > 0',
                             "", when="two connectors share a server name")),
                      kind="table", alerts=("CdcConnectServerNameConflict",)),
        )),
        ("Records", (
            PanelSpec("Records polled and written", "Records the source tasks poll from Debezium and write to Kafka, per "
                      "second.", "ops",
                      (Query('sum by (connector) (rate(cdcwatch_connect_source_records_polled_total{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"}[$__rate_interval]))',
                             "{{connector}} polled", when="the worker's JMX is collected"),
                       Query('sum by (connector) (rate(cdcwatch_connect_source_records_written_total{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"}[$__rate_interval]))',
                             "{{connector}} written", when="the worker's JMX is collected"))),
            PanelSpec("Records awaiting acknowledgement", "Records polled but not yet acknowledged by Kafka.", "short",
                      (Query('sum by (connector) (cdcwatch_connect_source_records_active{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"})', "{{connector}}",
                             when="the worker's JMX is collected"),)),
            PanelSpec("Poll batch time", "Average time a source task takes to poll a batch.", "s",
                      (Query('max by (connector, task) (cdcwatch_connect_source_poll_batch_avg_seconds{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"})',
                             "{{connector}}/{{task}}", when="the worker's JMX is collected"),)),
        )),
        ("Sink tasks", (
            PanelSpec("Sink records read and sent", "Records the sink tasks read from Kafka and pass on to be written, "
                      "per second: read but not sent is filtered or dropped after errors.", "ops",
                      (Query('sum by (connector) (rate(cdcwatch_connect_sink_records_read_total{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"}[$__rate_interval]))',
                             "{{connector}} read", when="a sink connector runs and the worker's JMX is collected"),
                       Query('sum by (connector) (rate(cdcwatch_connect_sink_records_sent_total{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"}[$__rate_interval]))',
                             "{{connector}} sent", when="a sink connector runs and the worker's JMX is collected"))),
            PanelSpec("Sink records not yet committed", "Records read but not yet written and committed.", "short",
                      (Query('sum by (connector) (cdcwatch_connect_sink_records_active{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"})',
                             "{{connector}}", when="a sink connector runs and the worker's JMX is collected"),)),
            PanelSpec("Put batch time", "Average time a sink task takes to write a batch to its target.", "s",
                      (Query('max by (connector, task) (cdcwatch_connect_sink_put_batch_avg_seconds{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"})',
                             "{{connector}}/{{task}}", when="a sink connector runs and the worker's JMX is collected"),)),
            PanelSpec("Sink offset commits", "Offset commits the sink tasks complete per second: committing while the "
                      "records go to the dead letter queue still reads lag 0 (the canary tells).", "ops",
                      (Query('sum by (connector) (rate(cdcwatch_connect_sink_offset_commits_total{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"}[$__rate_interval]))',
                             "{{connector}}", when="a sink connector runs and the worker's JMX is collected"),)),
        )),
        ("Errors and dead letter queue", (
            PanelSpec("Record errors and retries", "Records that failed, and retried operations, per second.", "ops",
                      (Query('sum by (connector) (rate(cdcwatch_connect_task_record_errors_total{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"}[$__rate_interval]))',
                             "{{connector}} errors", when="the worker's JMX is collected"),
                       Query('sum by (connector) (rate(cdcwatch_connect_task_retries_total{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"}[$__rate_interval]))',
                             "{{connector}} retries", when="the worker's JMX is collected"))),
            PanelSpec("Records skipped", "Records skipped after errors (errors.tolerance=all) per interval: lost for a "
                      "source task.", "short",
                      (Query('sum by (connector) (increase(cdcwatch_connect_task_records_skipped_total{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"}[$__rate_interval]))', "{{connector}}", when="the worker's JMX is collected"),),
                      alerts=("CdcConnectRecordsSkipped",)),
            PanelSpec("Dead letter queue", "Records a sink task wrote to its dead letter queue, and writes that failed, "
                      "per second.", "ops",
                      (Query('sum by (connector) (rate(cdcwatch_connect_task_dlq_produce_requests_total{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"}[$__rate_interval]))', "{{connector}} written", when="the worker's JMX is collected"),
                       Query('sum by (connector) (rate(cdcwatch_connect_task_dlq_produce_failures_total{%(cdcwatch_board)s, target=~"$worker", connector=~"$connector"}[$__rate_interval]))', "{{connector}} failed", when="the worker's JMX is collected")),
                      alerts=("CdcConnectDlqProduceFailures",)),
        )),
    ), stage="connect_rest")
