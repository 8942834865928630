"""One memoised batch of broker requests per scrape: topics, log start/end offsets, groups, commits; and, every
few minutes, the topics' retention settings (DescribeConfigs), whose answers no scrape waits for."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec, ResourceType

from cdcwatch.config import KafkaClusterConfig

__all__ = ["ClientErrors", "ClusterReader", "ClusterState", "GroupState", "Retention", "RetentionSettings",
           "client_problems", "client_refusal", "client_settings", "retention_of"]

log = logging.getLogger("cdcwatch.kafka")

Partition = tuple[str, int]


_FATAL_CODES = {"_AUTHENTICATION", "_SSL", "SASL_AUTHENTICATION_FAILED", "TOPIC_AUTHORIZATION_FAILED",
                "GROUP_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED", "_INVALID_ARG"}
"""librdkafka errors that a retry will not cure: the scrape's error names them instead of a timeout."""
_CONNECTION_CODES = {"_TRANSPORT", "_RESOLVE"}
"""librdkafka errors that say why a broker cannot be reached (refused, unknown host), where the failed request
itself only says "Broker transport failure"."""


class ClientErrors:
    """The last errors librdkafka reported through `error_cb` that say why it cannot talk to the cluster."""

    def __init__(self) -> None:
        self.last: str | None = None
        self.connection: str | None = None
        self.all_down = False
        """librdkafka said every broker it knows is down (after each connection attempt failed)."""

    def record(self, error: KafkaError) -> None:
        if error.name() in _FATAL_CODES:
            self.last = f"{error.name()}: {error.str()}"
        elif error.name() in _CONNECTION_CODES:
            self.connection = f"{error.name()}: {error.str()}"
        elif error.code() == KafkaError._ALL_BROKERS_DOWN:
            self.all_down = True

    def forget(self) -> None:
        """Drop what was recorded (an outage that is over)."""
        self.last = self.connection = None
        self.all_down = False

    def explain(self, exc: BaseException) -> BaseException:
        """`exc`, or a ConnectionError naming the recorded cause: a wrong password, an untrusted certificate
        before a broker refusing the connection or a name that does not resolve."""
        cause = self.last or self.connection
        self.forget()
        if cause is None:
            return exc
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


def client_refusal(exc: KafkaException) -> str:
    """librdkafka's words for why it would not create a client."""
    error = exc.args[0] if exc.args else exc
    text = error.str() if isinstance(error, KafkaError) else str(error)
    return re.sub(r"^Failed to create \w+ client: ", "", text)


_PROPERTY = re.compile(r'configuration property:? "([^"]+)"')


def client_problems(cluster: KafkaClusterConfig) -> list[str]:
    """What the Kafka client library refuses of the cluster's `client` settings, one line each (`client.<property>:
    the library's words`): an unknown name or a value it does not take, found as the collector would meet them, by
    building a client, here one with no broker to connect to. A setting the library names is left out to find the
    next. What it refuses of the set as a whole (a certificate file it cannot read where `check` runs, a SASL
    mechanism without its credentials) depends on where it runs: the collector reports it, as up 0."""
    settings = dict(cluster.client)
    problems: list[str] = []
    while True:
        try:
            AdminClient({"log_level": 0, **settings})
            return problems
        except KafkaException as exc:
            message = client_refusal(exc)
        named = _PROPERTY.search(message)
        if named is None or named[1] not in settings:
            return problems  # the set as a whole (a file to read, credentials): the collector's to report, as up 0
        problems.append(f"client.{named[1]}: {message}: fix or remove it (librdkafka's CONFIGURATION.md lists every "
                        "setting)")
        del settings[named[1]]


@dataclass
class GroupState:
    name: str
    state: str
    members: int
    committed: dict[Partition, int | None] = field(default_factory=dict)
    """Committed offset per partition the group has committed to, in report order (topic, partition); None: the
    group has no commit there."""


@dataclass(frozen=True)
class Retention:
    """How long and how much of a partition a topic keeps before deleting its oldest segments; None where it
    deletes nothing that way (retention -1, or a topic that only compacts)."""

    ms: int | None
    bytes: int | None
    """retention.bytes is per partition."""


def retention_of(settings: Mapping[str, str | None]) -> Retention:
    """The retention a topic's effective settings (cleanup.policy, retention.ms, retention.bytes) give."""
    policies = {p.strip() for p in (settings.get("cleanup.policy") or "delete").split(",")}
    if "delete" not in policies:
        return Retention(None, None)

    def limit(name: str) -> int | None:
        try:
            value = int(settings.get(name) or -1)
        except ValueError:
            return None
        return value if value >= 0 else None

    return Retention(limit("retention.ms"), limit("retention.bytes"))


RETENTION_SETTINGS = ("cleanup.policy", "retention.ms", "retention.bytes")


class RetentionSettings:
    """The topics' retention, read with DescribeConfigs at most every `refresh_seconds` per topic.

    A request is sent with a scrape's other requests and harvested by whichever later scrape finds it
    answered: no scrape waits for it. A topic whose settings cannot be read (no DescribeConfigs
    permission) keeps what was read before, or stays unknown.
    """

    def __init__(self, refresh_seconds: float, known: Mapping[str, Retention] | None = None) -> None:
        self.refresh_seconds = refresh_seconds
        self.known: dict[str, Retention] = dict(known or {})
        self._asked: dict[str, float] = {}
        self._pending: dict[str, Future[Any]] = {}
        self._complained = False

    def request(self, admin: AdminClient, topics: Iterable[str], deadline: float) -> None:
        now = time.monotonic()
        due = [topic for topic in topics if topic not in self._pending
               and now - self._asked.get(topic, -float("inf")) >= self.refresh_seconds]
        if not due:
            return
        # nobody waits for the answer: it may take longer than the scrape, up to a minute
        futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic) for topic in due],
                                         request_timeout=max(_left(deadline), min(self.refresh_seconds, 60.0)))
        for resource, future in futures.items():
            self._pending[resource.name] = future
            self._asked[resource.name] = now

    def current(self, topics: Mapping[str, int]) -> dict[str, Retention]:
        """What is known of `topics`, with every answer that has arrived; topics that are gone are forgotten."""
        for topic, future in list(self._pending.items()):
            if not future.done():
                continue
            del self._pending[topic]
            try:
                entries = future.result()
            except KafkaException as exc:
                if not self._complained:
                    log.info("retention of topic %s not readable (DescribeConfigs): %s", topic, exc)
                    self._complained = True
                continue
            self.known[topic] = retention_of({name: entries[name].value for name in RETENTION_SETTINGS if name in entries})
        for gone in [t for t in self.known if t not in topics]:
            del self.known[gone]
        for gone in [t for t in self._asked if t not in topics and t not in self._pending]:
            del self._asked[gone]
        return {topic: self.known[topic] for topic in topics if topic in self.known}


@dataclass
class ClusterState:
    partitions: dict[str, int]
    """Topic → partition count (reported topics only)."""
    start: dict[Partition, int]
    end: dict[Partition, int]
    groups: list[GroupState]
    read_at: float
    retention: dict[str, Retention] = field(default_factory=dict)
    """Topic → its retention, where known (filled in by `ClusterReader.retention` after the other reads)."""
    leaders: dict[Partition, int] = field(default_factory=dict)
    """Partition → the broker id of its leader, as the metadata said."""


METADATA_WAIT_SECONDS = 0.25
"""How long one metadata request waits before the client's errors are looked at (see `ClusterReader._metadata`)."""

OFFSET_FETCH_CLIENTS = 3
"""AdminClients the groups' committed offsets are asked through, groups spread over them. A broker answers the
requests of one connection one after another, and librdkafka asks one group per OffsetFetch, so with one client
a coordinator of 50 groups answers 50 requests in turn (50 ms here); over three connections it works on three
at once."""


class ClusterReader:
    """Reads a cluster's offsets and groups, all requests in flight together: through one AdminClient, and the
    committed offsets through `OFFSET_FETCH_CLIENTS`."""

    def __init__(self, cluster: KafkaClusterConfig, retention_from: ClusterReader | None = None) -> None:
        self.cluster = cluster
        self.errors = ClientErrors()
        self.admin = AdminClient(client_settings(cluster, self.errors))
        self.offset_clients = [self.admin, *(AdminClient(client_settings(cluster, self.errors))
                                             for _ in range(OFFSET_FETCH_CLIENTS - 1))]
        # a new client starts with what the old one read (its requests in flight are dropped with it)
        self.retention_settings: RetentionSettings = RetentionSettings(
            cluster.retention_refresh_seconds, retention_from.retention_settings.known if retention_from else None)

    def read(self, deadline: float) -> ClusterState:
        listing = self.admin.list_consumer_groups(request_timeout=_left(deadline))  # in flight with the metadata
        metadata = self._metadata(deadline)
        partitions = {name: len(topic.partitions) for name, topic in metadata.topics.items()
                      if topic.error is None and self.cluster.topics.matches(name)}
        leaders = {(name, p): found.leader for name in partitions for p, found in metadata.topics[name].partitions.items()}
        wanted = [TopicPartition(topic, p) for topic, count in partitions.items() for p in range(count)]
        if self.cluster.retention:
            self.retention_settings.request(self.admin, partitions, deadline)
        starts = self._list_offsets(wanted, OffsetSpec.earliest(), deadline)
        ends = self._list_offsets(wanted, OffsetSpec.latest(), deadline)
        listed = self._listed_groups(listing, deadline)
        names = sorted(listed)
        # an empty group has no members to describe: its listed state says all there is
        to_describe = [name for name in names if listed[name] != "EMPTY"]
        described = (self.admin.describe_consumer_groups(to_describe, request_timeout=_left(deadline))
                     if to_describe else {})
        clients = self.offset_clients
        commits = {name: clients[n % len(clients)].list_consumer_group_offsets(
                       [ConsumerGroupTopicPartitions(name)], request_timeout=_left(deadline))[name]
                   for n, name in enumerate(names)}
        groups = [self._group(name, listed[name], described.get(name), commits[name], partitions, deadline)
                  for name in names]
        state = ClusterState(partitions, _offsets(starts, deadline), _offsets(ends, deadline),
                             [group for group in groups if group.committed], time.time(), leaders=leaders)
        self.errors.forget()  # the cluster answered: what was reported before says nothing of the next read
        return state

    def _metadata(self, deadline: float) -> Any:
        """The cluster's metadata, asked in short waits: once librdkafka says every broker is down (refused, a name
        that does not resolve, a failed handshake), the read fails at once with why, instead of at the deadline."""
        while True:
            try:
                return self.admin.list_topics(timeout=min(METADATA_WAIT_SECONDS, _left(deadline)))
            except KafkaException:
                self.admin.poll(0)  # serves the error callbacks queued meanwhile
                if self.errors.all_down or self.errors.last:
                    raise
                _left(deadline)

    def _list_offsets(self, wanted: list[TopicPartition], spec: OffsetSpec, deadline: float) -> dict[Any, Future[Any]]:
        if not wanted:
            return {}
        return self.admin.list_offsets({tp: spec for tp in wanted}, request_timeout=_left(deadline))

    def _listed_groups(self, listing: Future[Any], deadline: float) -> dict[str, str]:
        """Group name → the state the listing gave (UNKNOWN where the broker gives none, and for `extra_groups`
        it does not list)."""
        listed = {group.group_id: group.state.name if group.state is not None else "UNKNOWN"
                  for group in listing.result(timeout=_left(deadline)).valid}
        for name in self.cluster.extra_groups:
            listed.setdefault(name, "UNKNOWN")
        return {name: state for name, state in listed.items() if self.cluster.groups.matches(name)}

    def _group(self, name: str, listed_state: str, description: Future[Any] | None, commits: Future[Any],
               partitions: dict[str, int], deadline: float) -> GroupState:
        state, members, assigned = listed_state, 0, set()
        if description is not None:
            try:
                described = description.result(timeout=_left(deadline))
                state, members = described.state.name, len(described.members)
                assigned = {tp.topic for member in described.members if member.assignment
                            for tp in member.assignment.topic_partitions}
            except KafkaException as exc:  # an old broker may not describe a group: the commits still count
                log.debug("describe group %s: %s", name, exc)
        group = GroupState(name, state, members)
        committed = group.committed
        for tp in commits.result(timeout=_left(deadline)).topic_partitions:
            topic = tp.topic
            if topic in partitions and tp.error is None:
                offset = tp.offset
                committed[(topic, tp.partition)] = offset if offset >= 0 else None
        # partitions of a consumed topic without a commit yet: reported, flagged, lag counted from log start
        consumed = {topic for topic, _ in committed} | (assigned & partitions.keys())
        if len(committed) < sum(partitions[topic] for topic in consumed):
            for topic in consumed:
                for partition in range(partitions[topic]):
                    committed.setdefault((topic, partition), None)
        group.committed = {where: committed[where] for where in sorted(committed)}
        return group

    def retention(self, state: ClusterState) -> None:
        """Fill in `state.retention` with the retention settings known by now (never waits)."""
        if self.cluster.retention:
            state.retention = self.retention_settings.current(state.partitions)

    def explain(self, exc: BaseException) -> BaseException:
        """Why a read failed: `exc`, or the authentication/TLS error the client reported meanwhile."""
        for client in self.offset_clients:
            client.poll(0)  # serves the queued error callbacks
        return self.errors.explain(exc)

    def close(self) -> None:
        """AdminClient has no close; dropping it stops its threads."""
        self.admin = None  # type: ignore[assignment]
        self.offset_clients = []


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
