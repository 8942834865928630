"""The pipeline overview: one row per stage, end-to-end freshness first."""

# ruff: noqa: E501 (each panel's PromQL is one literal block, its lines as long as on the dashboard)

from cdcwatch.mixin.dashboards.delta import TABLE_STATES
from cdcwatch.mixin.dashboards.model import (
    ACTIVE,
    CONNECTED,
    FRESHNESS,
    STATUS,
    UNIQUE,
    UP,
    DashboardSpec,
    PanelSpec,
    Query,
    Threshold,
    Variable,
)

__all__ = ["OVERVIEW"]

OVERVIEW = DashboardSpec(
    "cdcwatch-overview", "CDC pipeline overview",
    "At a glance first: each pipeline's state, end-to-end freshness, tasks not running, Debezium's connection, the "
    "worst consumer, the shortest runway before data is lost, targets down and firing alerts. Below, one row per "
    "stage, Source → Debezium → Kafka Connect → Kafka → Spark: walk it top to bottom, the first red stage is where "
    "the pipeline stopped.",
    '{__name__=~"%(endpoint_series)s"',
    (Variable("server", 'label_values({%(server_series)s, job=~"$job"}, server)'),),
    (
        ("At a glance", (
            PanelSpec("Pipeline state", "Each pipeline's state (server): the worst of its stages, flowing, idle, "
                      "backlogged or stalled.", "none",
                      (Query('max by (server) (server_stage:cdcwatch_freshness:code{server=~"$server"})', "{{server}}"),), kind="state",
                      mappings=FRESHNESS, alerts=("CdcPipelineStalled",)),
            PanelSpec("End-to-end freshness", "Age of the newest change or heartbeat the apply job has applied, per "
                      "pipeline; where no listener reports, the age of the newest canary the target holds.", "s",
                      (Query('max by (server) (cdcwatch_spark_freshness_seconds{%(spark_board)s, server=~"$server"})',
                             "{{server}}"),
                       Query('max by (server) (cdcwatch_canary_target_age_seconds{%(cdcwatch_board)s, server=~"$server"}) unless on (server) max by (server) (cdcwatch_spark_freshness_seconds{%(spark_board)s})',
                             "{{server}} (canary)", when="a pipeline without the Spark listener has a canary")),
                      kind="stat", threshold=Threshold("spark_freshness_seconds"), alerts=("CdcCanaryStale",)),
            PanelSpec("Target freshness (canary)", "Age of the newest canary each pipeline's target holds, whatever "
                      "applies the changes (a sink connector, your own service): how stale the target is.", "s",
                      (Query('max by (server) (cdcwatch_canary_target_age_seconds{%(cdcwatch_board)s, server=~"$server"})',
                             "{{server}}"),), kind="stat", threshold=Threshold("canary_age_seconds"),
                      alerts=("CdcCanaryStale",), unless_stages=("spark",)),
            PanelSpec("Newest change in Kafka: age", "Without an apply job or a canary reporting freshness: the age of "
                      "the newest source commit (or Debezium heartbeat) each pipeline's topics hold.", "s",
                      (Query('time() - max by (server) (cdcwatch_kafka_newest_source_commit_timestamp_seconds{%(cdcwatch_board)s, server=~"$server"})', "{{server}}"),), kind="stat",
                      threshold=Threshold("kafka_data_age_seconds"), unless_stages=("spark", "canary")),
            PanelSpec("Connect tasks not RUNNING", "Kafka Connect tasks in any state but RUNNING: 0 is right.", "none",
                      (Query('count(cdcwatch_connect_task_state{%(cdcwatch_board)s, state!="RUNNING", server=~"$server"} == 1) or vector(0)', "tasks"),), kind="stat", green_below=1,
                      alerts=("CdcConnectTaskFailed", "CdcConnectTaskNotRunning")),
            PanelSpec("Debezium connected", "Whether each connector's streaming reader is connected to its database "
                      "(not during a snapshot).", "none",
                      (Query('max by (server) (cdcwatch_debezium_connected{%(cdcwatch_board)s, context="streaming", server=~"$server"})', "{{server}}"),),
                      kind="state", mappings=CONNECTED, alerts=("CdcDebeziumConnectorDisconnected",)),
            PanelSpec("Worst consumer status", "The worst status of any consumer group on any topic.", "none",
                      (Query('max(cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch_board)s, status="OK"} * 0 or cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch_board)s, status="WARN"} * 1 or cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch_board)s, status="STALL"} * 2 or cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch_board)s, status="STOP"} * 3 or cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch_board)s, status="REWIND"} * 4) or vector(0)', "groups"),),
                      kind="state", mappings=STATUS, alerts=("CdcKafkaConsumerNotProgressing",)),
            PanelSpec("Shortest runway before loss", "Time left before data a pipeline still needs is deleted: WAL a "
                      "replication slot holds, the binlog a MySQL connector reads, Kafka messages a group has not "
                      "read (no value: nothing at risk).", "s",
                      (Query('min(slot:cdcwatch_postgres_replication_slot_safe_wal_runway_seconds:deriv5m{%(scope)s, server=~"$server"})', "WAL slot", when="the source sets max_slot_wal_keep_size"),
                       Query('min(server:cdcwatch_mysql_binlog_runway_seconds:min{%(scope)s, server=~"$server"})', "binlog",
                             when="the connector is behind the binlog being written"),
                       Query('min(group_topic:cdcwatch_kafka_consumergroup_retention_runway_seconds:min{%(scope)s, server=~"$server"})', "Kafka retention")),
                      kind="stat", threshold=Threshold("slot_wal_runway_warning_seconds", below=True),
                      alerts=("CdcMysqlBinlogRunwayCritical", "CdcKafkaRetentionRunwayCritical")),
            PanelSpec("Exporter targets down", "Targets cdcwatch failed to collect from at its last collection: 0 is "
                      "right.", "none",
                      (Query("count(cdcwatch_up{%(cdcwatch_board)s} == 0) or vector(0)", "targets"),), kind="stat",
                      green_below=1, alerts=("CdcwatchTargetDown",)),
            PanelSpec("Firing CDC alerts", "cdcwatch's alerts firing now, of every pipeline: 0 is right.", "none",
                      (Query('count(ALERTS{alertname=~"Cdc.*", alertstate="firing"}) or vector(0)', "alerts"),),
                      kind="stat", green_below=1),
        )),
        ("Freshness state", (
            PanelSpec("Freshness state by stage", "Per pipeline and stage (capture: source → connector, publish: connector "
                      "→ Kafka, consume: Kafka, apply: Spark or the canary; pipeline: the worst of them): flowing, idle (caught up, proven by a recent heartbeat "
                      "or the slot keeping up with the WAL), backlogged (moving, but the lag grows) or stalled (nothing "
                      "moves while the source has changes for the stage).", "none",
                      (Query('max by (server, stage) (server_stage:cdcwatch_freshness:code{server=~"$server"})',
                             "{{server}} {{stage}}"),), kind="timeline", mappings=FRESHNESS, alerts=("CdcPipelineStalled",)),
        )),
        ("Pipelines: connector ↔ server ↔ slot ↔ database", (
            PanelSpec("Pipelines", "Each connector's identity across the stages, from its configuration in Kafka Connect: "
                      "the server name every stage's series carry, its replication slot and database, the Debezium "
                      "plugin.", "none",
                      (Query('max by (connector, server, slot, database, plugin) (cdcwatch_connect_connector_pipeline_info{%(cdcwatch_board)s, server=~"$server"})', ""),), kind="table"),
            PanelSpec("Server names used twice", "Other Debezium connectors that use the same server name (topic.prefix): "
                      "0 is right; more means their topics and Debezium metrics collide.", "none",
                      (Query('max by (server) (cdcwatch_connect_server_name_conflicts{%(cdcwatch_board)s, server=~"$server"})',
                             "{{server}}"),), kind="state", mappings=UNIQUE, alerts=("CdcConnectServerNameConflict",)),
        )),
        ("Source: PostgreSQL replication slots", (
            PanelSpec("WAL retained by the slot", "WAL the database keeps for the slot (current position − restart_lsn).",
                      "bytes", (Query('max by (slot, server) (cdcwatch_postgres_replication_slot_retained_wal_bytes{%(cdcwatch_board)s, server=~"$server"})', "{{slot}}"),),
                      threshold=Threshold("slot_retained_wal_bytes")),
            PanelSpec("Safe WAL size", "WAL that can still be written before the slot risks losing WAL (needs "
                      "max_slot_wal_keep_size).", "bytes",
                      (Query('min by (slot, server) (cdcwatch_postgres_replication_slot_safe_wal_size_bytes{%(cdcwatch_board)s, server=~"$server"})', "{{slot}}", when="the source sets max_slot_wal_keep_size"),),
                      alerts=("CdcPostgresSlotSafeWalRunningOut",)),
            PanelSpec("Slot active", "Whether a consumer reads the slot.", "none",
                      (Query('max by (slot, server) (cdcwatch_postgres_replication_slot_active{%(cdcwatch_board)s, server=~"$server"})',
                             "{{slot}}"),), kind="state", mappings=ACTIVE, alerts=("CdcPostgresSlotInactive",)),
        )),
        ("Source: PostgreSQL WAL", (
            PanelSpec("Safe WAL runway", "Time until each slot's safe_wal_size runs out at the current WAL rate: when a "
                      "stopped slot starts losing WAL, how long a healthy one may stop.", "s",
                      (Query('min by (slot, server) (slot:cdcwatch_postgres_replication_slot_safe_wal_runway_seconds:deriv5m{%(scope)s, server=~"$server"})', "{{slot}}",
                             when="the source sets max_slot_wal_keep_size"),),
                      threshold=Threshold("slot_wal_runway_warning_seconds", below=True),
                      alerts=("CdcPostgresSlotRunwayCritical",)),
            PanelSpec("WAL written", "WAL each source writes per second: the slope of its WAL position.", "Bps",
                      (Query("target:cdcwatch_postgres_wal_position_bytes:deriv5m{%(scope)s}", "{{target}}"),)),
            PanelSpec("WAL directory", "Size of the WAL directory of each source (pg_ls_waldir(); needs pg_monitor).",
                      "bytes", (Query("max by (target) (cdcwatch_postgres_wal_directory_bytes{%(cdcwatch_board)s})", "{{target}}"),)),
        )),
        ("Source: MySQL binlog", (
            PanelSpec("Binlog runway", "Time until the oldest binlog each connector still needs expires "
                      "(binlog_expire_logs_seconds after its rotation; 0: expired or removed); no value while the "
                      "connector reads the binlog being written.", "s",
                      (Query('min by (target, server) (server:cdcwatch_mysql_binlog_runway_seconds:min{%(scope)s, server=~"$server"})', "{{server}}",
                             when="the connector is behind the binlog being written"),),
                      threshold=Threshold("binlog_runway_warning_seconds", below=True),
                      alerts=("CdcMysqlBinlogRunwayCritical",)),
            PanelSpec("Binlog kept for the connector", "Binlog bytes the source keeps from the connector's binlog on.",
                      "bytes", (Query('max by (target, server) (server:cdcwatch_mysql_binlog_retained_bytes:sum{%(scope)s, server=~"$server"})', "{{server}}",
                                      when="the source's server is set and its connector has read a binlog"),)),
            PanelSpec("Binlogs", "Size of all the binary logs each source keeps.", "bytes",
                      (Query("max by (target) (cdcwatch_mysql_binlog_size_bytes{%(cdcwatch_board)s})", "{{target}}",
                             when="a mysql source is configured"),)),
        )),
        ("Debezium", (
            PanelSpec("Lag behind the source", "Time between a change's commit and Debezium processing it (last event).",
                      "s", (Query('server:cdcwatch_debezium_lag_behind_source_seconds:max{%(scope)s, server=~"$server"}',
                                  "{{server}}"),), threshold=Threshold("debezium_lag_seconds")),
        )),
        ("Kafka Connect", (
            PanelSpec("Task restarts in 30 minutes", "Restarts of each task in the last 30 minutes (the worker JVM's or "
                      "the task's own), as the restart alert counts them.", "short",
                      (Query('sum by (connector, task) (round(increase(cdcwatch_connect_task_restarts_total{%(cdcwatch_board)s, server=~"$server"}[30m])))', "{{connector}}/{{task}}",
                             when="the worker's JMX is collected"),),
                      threshold=Threshold("connect_task_restarts")),
        )),
        ("Kafka", (
            PanelSpec("Newest change in Kafka: age", "Age of the newest source commit any topic of the server holds.", "s",
                      (Query('time() - max by (server) (cdcwatch_kafka_newest_source_commit_timestamp_seconds{%(cdcwatch_board)s, server=~"$server"})', "{{server}}"),),
                      threshold=Threshold("kafka_data_age_seconds")),
            PanelSpec("Consumer lag", "Age of the next message each group will read, per topic.", "s",
                      (Query('group_topic:cdcwatch_kafka_consumergroup_lag_seconds:max{%(scope)s, server=~"$server"}',
                             "{{group}} {{topic}}"),), threshold=Threshold("kafka_lag_seconds")),
            PanelSpec("Retention runway", "Time until retention.ms reaches the next message each group will read.", "s",
                      (Query('group_topic:cdcwatch_kafka_consumergroup_retention_runway_seconds:min{%(scope)s, server=~"$server"}', "{{group}} {{topic}}"),),
                      threshold=Threshold("kafka_retention_runway_warning_seconds", below=True)),
        )),
        ("Spark apply", (
            PanelSpec("Apply lag p99", "How long after their source commit the last batch's changes were applied (p99).", "s",
                      (Query('query:cdcwatch_spark_apply_lag_seconds:p99{%(scope)s, server=~"$server"}', "{{query}} ({{server}})"),),
                      threshold=Threshold("spark_apply_lag_seconds")),
            PanelSpec("Changes applied", "Row changes the apply job writes to the target per second.", "ops",
                      (Query('sum by (query, server) (query:cdcwatch_spark_changes_applied:rate5m{%(scope)s, server=~"$server"})',
                             "{{query}}"),)),
            PanelSpec("Duplicates per change", "Share of the changes read that are re-deliveries.", "percentunit",
                      (Query('query:cdcwatch_spark_duplicates:ratio_rate5m{%(scope)s, server=~"$server"}', "{{query}}"),),
                      threshold=Threshold("spark_duplicates_ratio")),
        )),
        ("Delta tables", (
            PanelSpec("Delta tables by state", "Per Delta table the apply job merges into (server is its topic's): "
                      "fresh, idle (its source table did not change; never pages), behind its topic, or stalled "
                      "(behind and not committing: pages). The Delta board has each table.", "none",
                      (Query("""
                                 max by (target, topic) (
                                   target:cdcwatch_delta_freshness:state{%(scope)s, server=~"$server", state="fresh"} * 1
                                   or target:cdcwatch_delta_freshness:state{%(scope)s, server=~"$server", state="idle"} * 2
                                   or target:cdcwatch_delta_freshness:state{%(scope)s, server=~"$server", state="behind"} * 3
                                   or target:cdcwatch_delta_freshness:state{%(scope)s, server=~"$server", state="stalled"} * 4
                                 )
                                 """, "{{target}}", when="the exporter watches Delta tables (`delta` entries)"),),
                      kind="timeline", mappings=TABLE_STATES, alerts=("CdcDeltaTableStalled",)),
        )),
        ("Canary: the target's freshness", (
            PanelSpec("Canary age: source and target", "Age of the newest canary at the source (nothing writes it when it "
                      "grows) and in the target (how stale the target is); the gap between them is the pipeline's "
                      "delivery time, up to one canary interval more.", "s",
                      (Query('time() - max by (server) (cdcwatch_canary_source_timestamp_seconds{%(cdcwatch_board)s, server=~"$server"})',
                             "{{server}} source", when="the canary's source is configured"),
                       Query('max by (server) (cdcwatch_canary_target_age_seconds{%(cdcwatch_board)s, server=~"$server"})',
                             "{{server}} target")),
                      threshold=Threshold("canary_age_seconds"), alerts=("CdcCanaryStale",)),
            PanelSpec("Canary read time", "How long each side's canary read took at the last scrape (one aggregate on a "
                      "kept connection).", "s",
                      (Query('max by (server, side) (cdcwatch_canary_read_duration_seconds{%(cdcwatch_board)s, server=~"$server"})',
                             "{{server}} {{side}}"),)),
        )),
        ("cdcwatch", (
            PanelSpec("Targets up", "Whether cdcwatch's last collection from each target succeeded.", "none",
                      (Query("cdcwatch_up{%(cdcwatch_board)s}", "{{collector}} {{target}}"),), kind="state", mappings=UP,
                      alerts=("CdcwatchTargetDown",)),
            PanelSpec("Collection time", "Time cdcwatch's last collection from each target took.", "s",
                      (Query("cdcwatch_scrape_duration_seconds{%(cdcwatch_board)s}", "{{collector}} {{target}}"),),
                      threshold=Threshold("scrape_duration_seconds")),
        )),
    ))
