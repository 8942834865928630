"""Commits a streaming query's finished Kafka offsets under a consumer group, so lag monitors see it.

Spark's Kafka source keeps its offsets in the checkpoint and commits nothing to Kafka: consumer-lag
monitors (cdcwatch's kafka collector, Burrow, kafka-consumer-groups) cannot see the query. This
listener commits each batch's `endOffset` after the batch finished, from the driver. The checkpoint
stays the source of truth; the group is for monitoring only.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from pyspark.sql.streaming.listener import StreamingQueryListener

from spark_listeners.metrics import SparkMetrics

__all__ = ["OffsetCommitter"]

log = logging.getLogger("cdcwatch.apply")


class OffsetCommitter(StreamingQueryListener):
    """Commits the end offsets of every progress of query `query_name` under `group`, and says so in `metrics`
    (`cdcwatch_spark_query_commit_group_info`): the group's stall is then the query's staleness, paged once."""

    def __init__(self, bootstrap_servers: str, group: str, query_name: str, client: dict[str, str] | None = None,
                 metrics: SparkMetrics | None = None) -> None:
        self.query_name = query_name
        if metrics is not None:
            metrics.commits_under(query_name, group)
        self.consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": group,
                                  "enable.auto.commit": False, **(client or {})})

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        if progress.name != self.query_name:
            return
        offsets = []
        for source in json.loads(progress.json).get("sources") or ():
            end = source.get("endOffset")
            end = json.loads(end) if isinstance(end, str) else end
            if isinstance(end, dict):
                offsets += [TopicPartition(topic, int(partition), int(offset))
                            for topic, partitions in end.items() for partition, offset in partitions.items()]
        if offsets:
            try:
                self.consumer.commit(offsets=offsets, asynchronous=False)
            except Exception as exc:  # monitoring only: the query goes on
                log.warning("committing offsets for %s failed: %s", self.query_name, exc)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass
