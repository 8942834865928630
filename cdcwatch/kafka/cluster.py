"""One memoised batch of broker requests per scrape: topics, log start/end offsets, groups, commits."""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from cdcwatch.config import KafkaClusterConfig

__all__ = ["ClientErrors", "ClusterReader", "ClusterState", "GroupState", "client_settings"]

log = logging.getLogger("cdcwatch.kafka")

Partition = tuple[str, int]


_FATAL_CODES = {"_AUTHENTICATION", "_SSL", "SASL_AUTHENTICATION_FAILED", "TOPIC_AUTHORIZATION_FAILED",
                "GROUP_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED", "_INVALID_ARG"}
"""librdkafka errors that a retry will not cure: the scrape's error names them instead of a timeout."""


class ClientErrors:
    """The last error librdkafka reported through `error_cb` that says why it cannot talk to the cluster."""

    def __init__(self) -> None:
        self.last: str | None = None

    def record(self, error: KafkaError) -> None:
        if error.name() in _FATAL_CODES:
            self.last = f"{error.name()}: {error.str()}"

    def explain(self, exc: BaseException) -> BaseException:
        """`exc`, or a ConnectionError naming the recorded cause (a wrong password, an untrusted certificate)."""
        if self.last is None:
            return exc
        cause, self.last = self.last, None
        return ConnectionError(f"the Kafka client cannot connect: {cause}")


def client_settings(cluster: KafkaClusterConfig, errors: ClientErrors | None = None) -> dict[str, Any]:
    """librdkafka settings: the bootstrap servers, the user's pass-through settings, logs to our logger.

    librdkafka's own connection errors are silenced by default (`log_level` 0): a broker that is
    down is reported once by the exporter as up=0, not every few milliseconds by the client;
    authentication and TLS failures reach `errors` so that the scrape's error names them.
    """
    settings: dict[str, Any] = {"bootstrap.servers": cluster.bootstrap_servers, "logger": log, "log_level": 0,
                                "log.connection.close": False, **cluster.client}
    if errors is not None:
        settings["error_cb"] = errors.record
    return settings


@dataclass
class GroupState:
    name: str
    state: str
    members: int
    committed: dict[Partition, int | None] = field(default_factory=dict)
    """Committed offset per partition the group has committed to; None: the group has no commit there."""


@dataclass
class ClusterState:
    partitions: dict[str, int]
    """Topic → partition count (reported topics only)."""
    start: dict[Partition, int]
    end: dict[Partition, int]
    groups: list[GroupState]
    read_at: float


class ClusterReader:
    """Reads a cluster's offsets and groups with one AdminClient, all requests in flight together."""

    def __init__(self, cluster: KafkaClusterConfig) -> None:
        self.cluster = cluster
        self.errors = ClientErrors()
        self.admin = AdminClient(client_settings(cluster, self.errors))

    def read(self, deadline: float) -> ClusterState:
        metadata = self.admin.list_topics(timeout=_left(deadline))
        partitions = {name: len(topic.partitions) for name, topic in metadata.topics.items()
                      if topic.error is None and self.cluster.topics.matches(name)}
        wanted = [TopicPartition(topic, p) for topic, count in partitions.items() for p in range(count)]
        starts = self._list_offsets(wanted, OffsetSpec.earliest(), deadline)
        ends = self._list_offsets(wanted, OffsetSpec.latest(), deadline)
        names = self._group_names(deadline)
        described = self.admin.describe_consumer_groups(names, request_timeout=_left(deadline)) if names else {}
        commits = {name: self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(name)],
                                                                request_timeout=_left(deadline))[name]
                   for name in names}
        groups = [self._group(name, described.get(name), commits[name], partitions, deadline) for name in names]
        return ClusterState(partitions, _offsets(starts, deadline), _offsets(ends, deadline),
                            [group for group in groups if group.committed], time.time())

    def _list_offsets(self, wanted: list[TopicPartition], spec: OffsetSpec, deadline: float) -> dict[Any, Future[Any]]:
        if not wanted:
            return {}
        return self.admin.list_offsets({tp: spec for tp in wanted}, request_timeout=_left(deadline))

    def _group_names(self, deadline: float) -> list[str]:
        listed = self.admin.list_consumer_groups(request_timeout=_left(deadline)).result(timeout=_left(deadline))
        names = {group.group_id for group in listed.valid} | set(self.cluster.extra_groups)
        return sorted(name for name in names if self.cluster.groups.matches(name))

    def _group(self, name: str, description: Future[Any] | None, commits: Future[Any], partitions: dict[str, int],
               deadline: float) -> GroupState:
        state, members, assigned = "UNKNOWN", 0, set()
        if description is not None:
            try:
                described = description.result(timeout=_left(deadline))
                state, members = described.state.name, len(described.members)
                assigned = {tp.topic for member in described.members if member.assignment
                            for tp in member.assignment.topic_partitions}
            except KafkaException as exc:  # an old broker may not describe a group: the commits still count
                log.debug("describe group %s: %s", name, exc)
        group = GroupState(name, state, members)
        for tp in commits.result(timeout=_left(deadline)).topic_partitions:
            if tp.topic in partitions and tp.error is None:
                group.committed[(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else None
        # partitions of a consumed topic without a commit yet: reported, flagged, lag counted from log start
        for topic in {topic for topic, _ in group.committed} | (assigned & partitions.keys()):
            for partition in range(partitions[topic]):
                group.committed.setdefault((topic, partition), None)
        return group

    def explain(self, exc: BaseException) -> BaseException:
        """Why a read failed: `exc`, or the authentication/TLS error the client reported meanwhile."""
        self.admin.poll(0)  # serves the queued error callbacks
        return self.errors.explain(exc)

    def close(self) -> None:
        """AdminClient has no close; dropping it stops its threads."""
        self.admin = None  # type: ignore[assignment]


def _offsets(futures: dict[Any, Future[Any]], deadline: float) -> dict[Partition, int]:
    resolved: dict[Partition, int] = {}
    for tp, future in futures.items():
        resolved[(tp.topic, tp.partition)] = future.result(timeout=_left(deadline)).offset
    return resolved


def _left(deadline: float) -> float:
    """Seconds to the deadline; a request that cannot finish in time fails instead of hanging the scrape."""
    left = deadline - time.monotonic()
    if left <= 0.05:
        raise TimeoutError("the Kafka collection deadline passed")
    return left
