"""Kafka: consumer group lag in seconds, messages and status, its spread over partitions, how close retention is
to what the groups have not read, topic throughput."""

# ruff: noqa: E501 (each panel's PromQL is one literal block, its lines as long as on the dashboard)

from cdcwatch.mixin.dashboards.model import STATUS, DashboardSpec, PanelSpec, Query, Threshold, Variable

__all__ = ["KAFKA"]


KAFKA = DashboardSpec(
    "cdcwatch-kafka", "CDC: Kafka consumer lag",
    "Lag of every consumer group on the CDC topics, in seconds, in messages and as a status; how long before "
    "retention deletes what they have not read; topic throughput.",
    "cdcwatch_kafka_topic_partitions{%(cdcwatch)s",
    (Variable("cluster", "label_values(cdcwatch_kafka_topic_partitions{%(cdcwatch_board)s}, target)"),
     Variable("group", 'label_values(cdcwatch_kafka_consumergroup_lag_messages{%(cdcwatch_board)s, target=~"$cluster"}, group)'),
     Variable("topic", 'label_values(cdcwatch_kafka_consumergroup_lag_messages{%(cdcwatch_board)s, target=~"$cluster", '
                       'group=~"$group"}, topic)')),
    (
        ("Lag", (
            PanelSpec("Lag in seconds", "Age of the next message each group will read, per topic (0 when caught up).", "s",
                      (Query('group_topic:cdcwatch_kafka_consumergroup_lag_seconds:max{%(scope)s, target=~"$cluster", group=~"$group", topic=~"$topic"}', "{{group}} {{topic}}"),),
                      threshold=Threshold("kafka_lag_seconds")),
            PanelSpec("Lag in messages", "Messages between each group's committed offset and the log end.", "short",
                      (Query('sum by (group, topic) (cdcwatch_kafka_consumergroup_topic_lag_messages{%(cdcwatch_board)s, target=~"$cluster", group=~"$group", topic=~"$topic"})',
                             "{{group}} {{topic}}"),)),
            PanelSpec("Status", "Burrow-style status of each group on each topic over the sliding window.", "none",
                      (Query('max by (group, topic) (cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch_board)s, target=~"$cluster", group=~"$group", topic=~"$topic", status="OK"} * 0 or cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch_board)s, target=~"$cluster", group=~"$group", topic=~"$topic", status="WARN"} * 1 or cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch_board)s, target=~"$cluster", group=~"$group", topic=~"$topic", status="STALL"} * 2 or cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch_board)s, target=~"$cluster", group=~"$group", topic=~"$topic", status="STOP"} * 3 or cdcwatch_kafka_consumergroup_topic_status{%(cdcwatch_board)s, target=~"$cluster", group=~"$group", topic=~"$topic", status="REWIND"} * 4)', "{{group}} {{topic}}"),),
                      kind="state", mappings=STATUS, alerts=("CdcKafkaConsumerNotProgressing", "CdcKafkaConsumerRewound")),
        )),
        ("Lag over partitions", (
            PanelSpec("Lag heatmap", "How the partitions' lag in seconds spreads over time: a band moving up is a group "
                      "falling behind everywhere, a few high cells are hot partitions.", "s",
                      (Query('cdcwatch_kafka_consumergroup_lag_seconds{%(cdcwatch_board)s, target=~"$cluster", group=~"$group", topic=~"$topic"}', "{{group}} {{topic}} {{partition}}"),),
                      kind="heatmap"),
        )),
        ("Retention", (
            PanelSpec("Retention runway", "Time until retention.ms reaches the next message each group will consume "
                      "(all of retention.ms when caught up; negative: overdue).", "s",
                      (Query('group_topic:cdcwatch_kafka_consumergroup_retention_runway_seconds:min{%(scope)s, target=~"$cluster", group=~"$group", topic=~"$topic"}', "{{group}} {{topic}}"),),
                      threshold=Threshold("kafka_retention_runway_warning_seconds", below=True),
                      alerts=("CdcKafkaRetentionRunwayCritical",)),
            PanelSpec("Retention used", "Age of the next message each group will consume as a share of the topic's "
                      "retention.ms; the runway alerts wait for half.", "percentunit",
                      (Query('group_topic:cdcwatch_kafka_consumergroup_retention_used_ratio:max{%(scope)s, target=~"$cluster", group=~"$group", topic=~"$topic"}', "{{group}} {{topic}}"),)),
            PanelSpec("Messages ahead of the log start", "Committed offset minus log start offset, the smallest of the "
                      "partitions: 0 means the next deletion loses data, below 0 it already has.", "short",
                      (Query('min by (group, topic) (cdcwatch_kafka_consumergroup_topic_retention_margin_messages{%(cdcwatch_board)s, target=~"$cluster", group=~"$group", topic=~"$topic"})', "{{group}} {{topic}}"),)),
            PanelSpec("Topic retention", "retention.ms of each topic that deletes by time.", "s",
                      (Query('max by (topic) (cdcwatch_kafka_topic_retention_seconds{%(cdcwatch_board)s, target=~"$cluster", topic=~"$topic"})', "{{topic}}"),),
                      kind="stat"),
        )),
        ("Topics", (
            PanelSpec("Messages produced", "Messages appended to each topic per second: the slope of its log end offset "
                      "(a gauge, so deriv, not rate).", "ops",
                      (Query('sum by (topic) (deriv(cdcwatch_kafka_log_end_offset{%(cdcwatch_board)s, target=~"$cluster", topic=~"$topic"}[$__rate_interval]))', "{{topic}}"),)),
            PanelSpec("Newest change: age", "Age of the newest source commit each topic holds.", "s",
                      (Query('time() - max by (topic) (cdcwatch_kafka_newest_source_commit_timestamp_seconds{%(cdcwatch_board)s, target=~"$cluster", topic=~"$topic"})',
                             "{{topic}}"),), threshold=Threshold("kafka_data_age_seconds")),
        )),
    ), stage="kafka")
