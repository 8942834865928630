"""The `kafka` collector: consumer-group lag in offsets, in seconds and as a status, how close retention is
to deleting what a group has yet to read, plus CDC freshness.

Everything is read at scrape time under the cluster's deadline: one batch of broker requests
(cluster.py), then bounded single-message reads for lag in seconds and freshness (messages.py),
both cached so a steady group or an idle topic costs no fetch. The topics' retention settings are
read every few minutes, and no scrape waits for them.

A partition of a consumed topic where the group has committed no offset is measured from the log start, in
messages and in seconds alike: the messages kept, and the age of the first of them (what a consumer that starts
from `earliest` reads first). Both are 0 on an empty partition. The retention runway and margin leave such a
partition out: they measure how close retention is to what the group has committed to read next.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from itertools import groupby, islice
from operator import attrgetter

from confluent_kafka import KafkaException

from cdcwatch.collection import Collection
from cdcwatch.config import KafkaClusterConfig
from cdcwatch.exposition import SeriesLine
from cdcwatch.families import FamilyBuilder
from cdcwatch.kafka.cluster import ClusterReader, ClusterState, GroupState, client_refusal
from cdcwatch.kafka.interpolation import EndOffsetHistory
from cdcwatch.kafka.messages import At, MessageReader, NewestChange
from cdcwatch.kafka.status import STATUS_BY_CODE, ConsumerStatus, StatusWindow
from cdcwatch.specs import MetricSpec, metric_specs

log = logging.getLogger("cdcwatch.kafka")

__all__ = ["GROUP_STATES", "KAFKA_METRICS", "KafkaCollector"]

_PARTITION = ("group", "topic", "partition")
KAFKA_TOPIC_PARTITIONS = MetricSpec("cdcwatch_kafka_topic_partitions", "gauge", "Partitions of the topic.", ("topic", "server"))
KAFKA_LOG_START_OFFSET = MetricSpec("cdcwatch_kafka_log_start_offset", "gauge", (
        "Offset of the oldest message kept (summed over partitions at topic granularity)."),
        ("topic", "partition"))
KAFKA_LOG_END_OFFSET = MetricSpec("cdcwatch_kafka_log_end_offset", "gauge", (
        "Offset the next message will get (high watermark; summed at topic granularity)."),
        ("topic", "partition"))
KAFKA_TOPIC_RETENTION_SECONDS = MetricSpec("cdcwatch_kafka_topic_retention_seconds", "gauge", (
        "retention.ms of a topic that deletes by time, in seconds (absent for -1 and for topics that only compact)."),
        ("topic",))
KAFKA_TOPIC_RETENTION_BYTES = MetricSpec("cdcwatch_kafka_topic_retention_bytes", "gauge", (
        "retention.bytes of a topic that deletes by size: what each partition keeps at most (absent for -1)."),
        ("topic",))
KAFKA_NEWEST_SOURCE_COMMIT_TIMESTAMP_SECONDS = MetricSpec("cdcwatch_kafka_newest_source_commit_timestamp_seconds", "gauge", (
        "Source commit time of the newest Debezium event in the partition (payload.source.ts_ms; TiCDC: "
        "commit_ts physical part); the newest of the topic's partitions at topic granularity."),
        ("topic", "partition", "server"))
KAFKA_CONSUMERGROUP_COMMITTED_OFFSET = MetricSpec("cdcwatch_kafka_consumergroup_committed_offset", "gauge", (
        "Offset the group committed in the partition (with `committed_offsets: true`; the log end offset less the lag "
        "in messages says it otherwise)."),
        _PARTITION)
KAFKA_CONSUMERGROUP_TOPIC_COMMITTED_OFFSET = MetricSpec("cdcwatch_kafka_consumergroup_topic_committed_offset", "gauge", (
        "The group's committed offsets summed over the topic's partitions where it committed: it rises as the group "
        "commits."),
        ("group", "topic", "server"))
KAFKA_CONSUMERGROUP_LAG_MESSAGES = MetricSpec("cdcwatch_kafka_consumergroup_lag_messages", "gauge", (
        "Messages between the committed offset and the log end; from the log start where nothing is "
        "committed."),
        (*_PARTITION, "server"))
KAFKA_CONSUMERGROUP_LAG_SECONDS = MetricSpec("cdcwatch_kafka_consumergroup_lag_seconds", "gauge", (
        "Age of the next message the group will consume, 0 when caught up; where the group committed nothing, of "
        "the first message kept (the log start, as the lag in messages). method=timestamp: exact, the "
        "message's broker timestamp; where the broker keeps none (Kafka < 0.10): method=payload, a Debezium "
        "event's own payload.ts_ms, else method=interpolated, from (time, end offset) samples (a lower bound "
        "at first)."),
        (*_PARTITION, "server", "method"))
KAFKA_CONSUMERGROUP_TOPIC_RETENTION_RUNWAY_SECONDS = MetricSpec("cdcwatch_kafka_consumergroup_topic_retention_runway_seconds", "gauge", (
        "Time until retention may delete the next message the group will consume, in the partition where that "
        "comes first: the topic's retention.ms minus that message's age (its lag in seconds); all of retention.ms "
        "when caught up, negative when overdue. A lower bound: a segment is deleted once its newest message is "
        "that old."),
        ("group", "topic", "server"))
KAFKA_CONSUMERGROUP_TOPIC_RETENTION_USED_RATIO = MetricSpec("cdcwatch_kafka_consumergroup_topic_retention_used_ratio", "gauge", (
        "Age of the next message the group will consume as a share of the topic's retention.ms, the largest of "
        "the topic's partitions (1: due for deletion)."),
        ("group", "topic", "server"))
KAFKA_CONSUMERGROUP_TOPIC_RETENTION_MARGIN_MESSAGES = MetricSpec("cdcwatch_kafka_consumergroup_topic_retention_margin_messages", "gauge", (
        "Committed offset minus log start offset, the smallest of the topic's partitions: the messages retention "
        "can delete before it deletes one the group has not read. 0: the next deletion loses data (if the group "
        "lags); negative: messages were deleted unread."),
        ("group", "topic"))
KAFKA_CONSUMERGROUP_TOPIC_LAG_MESSAGES = MetricSpec("cdcwatch_kafka_consumergroup_topic_lag_messages", "gauge", (
        "Lag in messages summed over the topic's partitions."),
        ("group", "topic", "server"))
KAFKA_CONSUMERGROUP_TOPIC_LAG_SECONDS = MetricSpec("cdcwatch_kafka_consumergroup_topic_lag_seconds", "gauge", (
        "The largest lag in seconds among the topic's partitions."),
        ("group", "topic", "server"))
KAFKA_CONSUMERGROUP_UNCOMMITTED_PARTITIONS = MetricSpec("cdcwatch_kafka_consumergroup_uncommitted_partitions", "gauge", (
        "Partitions of a consumed topic where the group has no committed offset (their lag counts from log "
        "start)."),
        ("group", "topic"))
KAFKA_CONSUMERGROUP_MEMBERS = MetricSpec("cdcwatch_kafka_consumergroup_members", "gauge", "Live members of the group.", ("group",))
KAFKA_CONSUMERGROUP_STATE = MetricSpec("cdcwatch_kafka_consumergroup_state", "gauge", (
        "Group state as a state set: 1 for the current state."),
        ("group", "state"))
KAFKA_CONSUMERGROUP_STATUS_CODE = MetricSpec("cdcwatch_kafka_consumergroup_status_code", "gauge", (
        "With `status.per_partition: true`: the consumer status of the partition over the sliding window: 0 OK, "
        "1 WARN (lag growing), 2 STALL (offset not moving, lag > 0, members connected), 3 STOP (not moving, lag > 0, "
        "no members), 4 REWIND (offset went back)."),
        _PARTITION)
KAFKA_CONSUMERGROUP_TOPIC_STATUS = MetricSpec("cdcwatch_kafka_consumergroup_topic_status", "gauge", (
        "The worst consumer status among the topic's partitions, as a state set (OK, WARN, STALL, STOP, "
        "REWIND)."),
        ("group", "topic", "server", "status"))
KAFKA_SERIES_DROPPED_TOTAL = MetricSpec("cdcwatch_kafka_series_dropped_total", "counter", (
        "Group partitions not reported because of max_partitions, summed over scrapes."), ())
KAFKA_GROUP_PARTITIONS_DROPPED = MetricSpec("cdcwatch_kafka_group_partitions_dropped", "gauge", (
        "Group partitions the latest scrape did not report because of max_partitions (0: all reported)."), ())
KAFKA_MESSAGE_READS_TOTAL = MetricSpec("cdcwatch_kafka_message_reads_total", "counter", (
        "Messages whose timestamp or source commit time was needed, by where it came from: source=cache (no "
        "request) or source=broker (fetched)."),
        ("source",))
KAFKA_METRICS = metric_specs(
    KAFKA_TOPIC_PARTITIONS,
    KAFKA_LOG_START_OFFSET,
    KAFKA_LOG_END_OFFSET,
    KAFKA_TOPIC_RETENTION_SECONDS,
    KAFKA_TOPIC_RETENTION_BYTES,
    KAFKA_NEWEST_SOURCE_COMMIT_TIMESTAMP_SECONDS,
    KAFKA_CONSUMERGROUP_COMMITTED_OFFSET,
    KAFKA_CONSUMERGROUP_TOPIC_COMMITTED_OFFSET,
    KAFKA_CONSUMERGROUP_LAG_MESSAGES,
    KAFKA_CONSUMERGROUP_LAG_SECONDS,
    KAFKA_CONSUMERGROUP_TOPIC_RETENTION_RUNWAY_SECONDS,
    KAFKA_CONSUMERGROUP_TOPIC_RETENTION_USED_RATIO,
    KAFKA_CONSUMERGROUP_TOPIC_RETENTION_MARGIN_MESSAGES,
    KAFKA_CONSUMERGROUP_TOPIC_LAG_MESSAGES,
    KAFKA_CONSUMERGROUP_TOPIC_LAG_SECONDS,
    KAFKA_CONSUMERGROUP_UNCOMMITTED_PARTITIONS,
    KAFKA_CONSUMERGROUP_MEMBERS,
    KAFKA_CONSUMERGROUP_STATE,
    KAFKA_CONSUMERGROUP_STATUS_CODE,
    KAFKA_CONSUMERGROUP_TOPIC_STATUS,
    KAFKA_SERIES_DROPPED_TOTAL,
    KAFKA_GROUP_PARTITIONS_DROPPED,
    KAFKA_MESSAGE_READS_TOTAL,
)
"""Each metric's labels are those besides `target` and the static labels; `partition` only at `granularity: partition`.

The retention families are per group and topic at either granularity: per partition they are what the partition
series already give (retention.ms minus lag in seconds, committed minus log start offset), and three more series
per group partition would not fit `max_series_per_target` at `max_partitions`."""

GROUP_STATES = ("STABLE", "PREPARING_REBALANCING", "COMPLETING_REBALANCING", "EMPTY", "DEAD", "UNKNOWN")

Partition = tuple[str, int]


class _GroupPartition:
    """One reported group partition, kept from one scrape to the next while it is reported: its status window and
    its rendered sample lines stay, its readings are replaced every scrape."""

    __slots__ = ("committed", "committed_line", "group", "lag", "lag_line", "lag_seconds", "margin", "method",
                 "partition", "position", "runway", "seconds_line", "seconds_method", "server", "stamp", "stamp_at",
                 "status", "status_line", "topic", "used", "window")

    def __init__(self, group: str, topic: str, partition: int) -> None:
        self.group, self.topic, self.partition = group, topic, partition
        self.committed: int | None = None
        self.lag = 0
        self.position = 0
        """Offset of the next message the group will consume: the committed one, else the log start."""
        self.lag_seconds: float | None = None
        self.method = ""
        self.stamp: tuple[float, str] | None = None
        """When the message at `stamp_at` was written and how that is known: a message never changes, so while the
        group stays at one offset its age needs no lookup."""
        self.stamp_at = -1
        self.status = 0
        """The status's code (SEVERITY)."""
        self.margin: int | None = None
        """Committed offset minus log start offset."""
        self.runway: float | None = None
        """Seconds until retention.ms reaches the next message to consume."""
        self.used: float | None = None
        """That message's age over retention.ms."""
        self.window: StatusWindow | None = None
        self.server = ""
        """The server label its lines were rendered with."""
        self.committed_line: SeriesLine | None = None
        self.lag_line: SeriesLine | None = None
        self.seconds_line: SeriesLine | None = None
        self.seconds_method = ""
        self.status_line: SeriesLine | None = None

    def forget_derived(self) -> None:
        """Drop what was worked out under the previous configuration (a reload may change the labels, or turn families
        and the lag in seconds on or off): the rendered lines, the lag in seconds and its retention figures."""
        self.lag_line = self.committed_line = self.seconds_line = self.status_line = None
        self.server = self.seconds_method = self.method = ""
        self.lag_seconds = self.runway = self.used = None


def _reported(state: ClusterState, cap: int) -> Iterator[tuple[GroupState, Iterable[tuple[Partition, int | None]]]]:
    """Each group with the partitions it reports and their commits (None: none), in report order (group, topic,
    partition), up to `cap` group partitions in all."""
    room = cap
    for group in state.groups:
        if room <= 0:
            return
        count = len(group.committed)
        yield group, group.committed.items() if count <= room else islice(group.committed.items(), room)
        room -= count


_UNREAD = (0.0, "")
"""A message not read (yet)."""

_RUN = attrgetter("group", "topic")
"""A row's (group, topic): rows come in runs of one group and topic."""


class KafkaCollector:
    """Collects one Kafka cluster; raises on failure (the exporter turns that into up=0)."""

    kind = "kafka"

    def __init__(self, cluster: KafkaClusterConfig) -> None:
        self.cluster = cluster
        self.target = cluster.name
        self.common = {"target": cluster.name, **cluster.labels}
        """The labels every series of the cluster carries."""
        self._partition_status = cluster.status.enabled and cluster.status.per_partition
        self.address = cluster.bootstrap_servers
        self._clients: tuple[ClusterReader, MessageReader] | None = None
        """The clients; None while librdkafka refuses the settings as a whole (a certificate file it cannot read,
        SASL without its credentials): each collection tries again and fails, naming the cause (up 0)."""
        self._refused = ""
        self._connect()
        self._fetcher = ThreadPoolExecutor(1, thread_name_prefix=f"cdcwatch-kafka-messages-{cluster.name}")
        """Reads the messages a scrape needs while the scrape goes on with what needs none of them."""
        self.history: dict[Partition, EndOffsetHistory] = {}
        """The end offsets' history of the partitions whose messages carry no time (`_lag_seconds`), from the first
        such message on: one list of samples per partition of the cluster would grow with every partition."""
        self.kept: dict[str, dict[Partition, _GroupPartition]] = {}
        """Group → partition → the row kept from the previous scrape."""
        self.topic_server: dict[str, str] = {}
        self.dropped = 0
        """Group partitions not reported because of max_partitions, over all scrapes (a counter)."""
        self.dropped_now = 0
        self._warned_cap = False
        self._server_patterns = [(re.compile(pattern), server) for pattern, server in cluster.topic_servers.items()]
        self._lock = threading.Lock()
        """Held while a collection runs (it writes everything above): a hand-over or a close waits for it."""
        self._retired = False
        """Replaced at a reload (its state handed on) or closed: it collects no more."""

    @property
    def reader(self) -> ClusterReader:
        if self._clients is None:
            raise RuntimeError(self._refused)
        return self._clients[0]

    @property
    def messages(self) -> MessageReader:
        if self._clients is None:
            raise RuntimeError(self._refused)
        return self._clients[1]

    def _connect(self) -> None:
        """New clients, handed what the old ones learned; none while librdkafka refuses the settings."""
        old = self._clients
        try:
            self._clients = (ClusterReader(self.cluster, retention_from=old[0] if old else None),
                             MessageReader(self.cluster, caches_from=old[1] if old else None))
        except KafkaException as exc:
            self._clients = None
            refused = (f"the Kafka client refuses the settings of kafka cluster {self.target}: {client_refusal(exc)}: "
                       "fix its `client` settings")
            if refused != self._refused:
                log.error("%s", refused)
            self._refused = refused
        if old is not None:
            old[0].close()
            threading.Thread(target=old[1].close, daemon=True).start()  # close() may block on a dead broker

    def collect(self) -> Collection:
        with self._lock:
            if self._retired:
                raise RuntimeError(f"the collector of kafka cluster {self.target} was replaced or closed")
            if self._clients is None:
                self._connect()  # the certificate may be mounted by now
                if self._clients is None:
                    raise RuntimeError(self._refused)
            try:
                return self._collect()
            except Exception as exc:
                # librdkafka clients can keep a stale coordinator or fetch state after a broker restart:
                # start the next collection with fresh ones (caches and status windows are kept)
                explained = self.reader.explain(exc)
                if not self._retired:  # a collector being closed makes no clients any more
                    self._connect()
                if explained is not exc:
                    raise explained from exc
                raise

    def inherit(self, previous: KafkaCollector) -> None:
        """Carry on what the collector this one replaces at a reload learned: its counters, the consumer status
        windows, the end-offset history lag is interpolated from, the message caches, the topics' servers and
        retention settings (its clients are its own: the replaced collector closes them).

        Taken over, not shared: once a collection of `previous` still under way has ended (this waits for it),
        `previous` is retired and collects no more, so nothing it wrote is lost and it writes nothing this one
        reads."""
        with previous._lock:
            previous._retired = True
            if previous._clients is None or self._clients is None:
                return
            history, kept, topic_server = previous.history, previous.kept, previous.topic_server
            dropped = previous.dropped
            timestamps, newest, reads = previous.messages.timestamps, previous.messages.newest, previous.messages.reads
            retention = dict(previous.reader.retention_settings.known)
        with self._lock:
            for rows in kept.values():
                for row in rows.values():
                    row.forget_derived()
            self.history, self.kept, self.topic_server = history, kept, topic_server
            self.dropped = dropped
            self.messages.timestamps, self.messages.newest, self.messages.reads = timestamps, newest, reads
            self.reader.retention_settings.known.update(retention)


    def _collect(self) -> Collection:
        deadline = time.monotonic() + self.cluster.timeout_seconds * 0.9
        state = self.reader.read(deadline)
        for where in [where for where in self.history if where not in state.end]:  # the partition is gone
            del self.history[where]
        for where, history in self.history.items():
            history.add(state.read_at, state.end[where])
        reading = self._fetcher.submit(self.messages.read, self._positions(state), self._newest_offsets(state),
                                       deadline, state.leaders)
        # meanwhile (the read is mostly waiting on the broker): all that needs no message, in one pass
        servers: dict[str, str] = {}
        try:
            rows = self._rows(state, servers)
        except BaseException:
            wait([reading])  # it writes the message caches and counts: a collection ends only with it
            raise
        found = reading.result()
        known_servers = len(self.topic_server)
        newest = self._newest_commit_times(found.newest)
        if len(self.topic_server) != known_servers:  # a topic's server became known from its newest message
            self._relabel(rows, servers)
        self.reader.retention(state)  # the answers that arrived meanwhile
        if self.cluster.lag_seconds:
            self._lag_seconds(rows, state, found.timestamps)
        builder = FamilyBuilder()
        self._topic_families(builder, state, newest)
        self._group_families(builder, state, rows, servers)
        worst = max((row.lag for row in rows), default=0)
        return Collection(builder.families(), f"{len(state.groups)} groups, {len(rows)} group partitions, max lag {worst}")

    # --- reading ---------------------------------------------------------------------------

    def _newest_offsets(self, state: ClusterState) -> list[At]:
        """The newest two messages of each partition: a delete's tombstone (no source block) follows its delete
        event, which then holds the partition's newest commit time and its server. With the newest alone, a
        collector started while a tombstone was newest had no server for the topic, and its series changed labels
        once the next change came."""
        if not self.cluster.freshness:
            return []
        return [(t, p, offset) for (t, p), end in state.end.items() for offset in (end - 2, end - 1)
                if offset >= state.start.get((t, p), 0)]

    def _newest_commit_times(self, found: dict[At, NewestChange]) -> dict[Partition, float]:
        """Each partition's newest source commit time, from the newest message that has one."""
        times: dict[Partition, float] = {}
        for (topic, partition, _), change in sorted(found.items()):  # per partition, the newer offset last
            if change.server and topic not in self.topic_server:
                self.topic_server[topic] = change.server
            if change.commit_time is not None:
                times[(topic, partition)] = change.commit_time
        return times

    def _rows(self, state: ClusterState, servers: dict[str, str]) -> list[_GroupPartition]:
        """The group partitions to report, in report order (group, topic, partition), with this scrape's offsets,
        statuses and the lines that need no message; those that vanished leave no state behind. Beyond
        `max_partitions` the rest are dropped and counted. `servers` gets the server label of each topic reported.

        One pass over the rows (it runs for every group partition on every scrape): the per-partition lines are
        made for new rows and updated for kept ones, so that `_partition_series` only gathers them."""
        rows: list[_GroupPartition] = []
        kept: dict[str, dict[Partition, _GroupPartition]] = {}
        previous, no_rows = self.kept, dict[Partition, _GroupPartition]()
        start_of, end_of, now = state.start.get, state.end.get, state.read_at
        status = self.cluster.status.enabled
        size, age = self.cluster.status.window_samples, self.cluster.status.max_sample_age_seconds
        lines = self.cluster.granularity == "partition"
        for group, reported in _reported(state, self.cluster.max_partitions):
            before = previous.get(group.name, no_rows)
            now_kept = kept[group.name] = {}
            has_members = group.members > 0
            for where, committed in reported:
                row = before.get(where)
                if row is None:
                    row = _GroupPartition(group.name, *where)
                now_kept[where] = row
                start = start_of(where, 0)
                row.committed = committed
                if committed is None:
                    position = row.position = start
                    row.margin = None
                else:
                    position = row.position = committed
                    row.margin = committed - start
                lag = end_of(where, 0) - position
                if lag < 0:
                    lag = 0
                row.lag = lag
                if status:
                    window = row.window
                    if window is None:
                        window = row.window = StatusWindow(size, age)
                    if committed is not None:
                        window.observe(now, committed, lag)
                    row.status = window.code(has_members)
                if lines:
                    if row.lag_line is None:
                        server = servers.get(row.topic)
                        if server is None:
                            server = servers[row.topic] = self._server(row.topic)
                        self._new_lines(row, server)
                        continue
                    row.lag_line.count(lag)
                    if row.committed_line is not None and committed is not None:
                        row.committed_line.count(committed)
                    if row.status_line is not None:
                        row.status_line.count(row.status)
            rows += now_kept.values()
        reported_count = len(rows)
        dropped = sum(len(group.committed) for group in state.groups) - reported_count
        self.kept = kept
        self.dropped_now = dropped
        self.dropped += dropped
        if dropped and not self._warned_cap:
            log.warning("kafka cluster %s: %d group partitions beyond max_partitions (%d) are not reported; raise "
                        "max_partitions or narrow groups/topics", self.target, dropped, self.cluster.max_partitions)
        self._warned_cap = bool(dropped)
        for row in rows:  # rows kept with lines: their topics' servers too (a topic's rows share one)
            if row.topic not in servers:
                servers[row.topic] = row.server if lines else self._server(row.topic)
        return rows

    def _new_lines(self, row: _GroupPartition, server: str) -> None:
        """The row's per-partition lines, rendered for its labels and current values (the lag in seconds is
        rendered once known)."""
        names = (*self.common, *_PARTITION)
        values = (*self.common.values(), row.group, row.topic, str(row.partition))
        row.server = server
        row.lag_line = SeriesLine(KAFKA_CONSUMERGROUP_LAG_MESSAGES.name, (*names, "server"), (*values, server))
        row.lag_line.count(row.lag)
        row.seconds_line = None
        if self.cluster.committed_offsets:
            row.committed_line = SeriesLine(KAFKA_CONSUMERGROUP_COMMITTED_OFFSET.name, names, values)
            if row.committed is not None:
                row.committed_line.count(row.committed)
        if self._partition_status:
            row.status_line = SeriesLine(KAFKA_CONSUMERGROUP_STATUS_CODE.name, names, values)
            row.status_line.count(row.status)

    def _relabel(self, rows: list[_GroupPartition], servers: dict[str, str]) -> None:
        """Renders again the lines of the topics whose server became known from their newest message (since `_rows`
        rendered them); called only then, since it looks at every topic's server again."""
        changed = {topic for topic, server in servers.items() if self._server(topic) != server}
        if not changed:
            return
        for topic in changed:
            servers[topic] = self._server(topic)
        if self.cluster.granularity == "partition":
            for row in rows:
                if row.topic in changed:
                    self._new_lines(row, servers[row.topic])

    def _positions(self, state: ClusterState) -> list[At]:
        """The next message to consume wherever a group lags, in the group partitions `_rows` reports, each once: its
        age is the lag in seconds."""
        if not self.cluster.lag_seconds:
            return []
        start_of, end_of = state.start.get, state.end.get
        wanted: set[At] = set()
        for _, reported in _reported(state, self.cluster.max_partitions):
            for where, committed in reported:
                position = start_of(where, 0) if committed is None else committed
                if end_of(where, 0) > position:
                    wanted.add((*where, position))
        return list(wanted)

    def _lag_seconds(self, rows: list[_GroupPartition], state: ClusterState,
                     stamps: dict[At, tuple[float, str] | None]) -> None:
        """The age of the message at each row's position: where the group committed nothing, the first message kept
        (the log start), where its lag in messages counts from too, so that the two always measure the same
        backlog (both 0 on an empty partition). With it, how close time retention is to that message (where the
        group committed), and the row's lag in seconds line."""
        now, retention, history = state.read_at, state.retention, self.history
        lines = self.cluster.granularity == "partition"
        for row in rows:
            row.runway = row.used = None
            if row.lag == 0:
                seconds, method = 0.0, "timestamp"
            else:
                stamp = row.stamp
                if stamp is None or row.stamp_at != row.position:
                    at = (row.topic, row.partition, row.position)
                    stamp = stamps.get(at, _UNREAD)
                    if stamp is None:  # the message carries no time: when its offset was written, from the history
                        where = (row.topic, row.partition)
                        if where not in history:  # the first such message: its partition's history starts now
                            history[where] = EndOffsetHistory()
                            history[where].add(now, state.end.get(where, 0))
                        written = history[where].written_at(row.position)
                        stamp = _UNREAD if written is None else (written, "interpolated")
                    elif stamp is not _UNREAD:
                        row.stamp, row.stamp_at = stamp, row.position
                    if stamp is _UNREAD:  # not read within this scrape's deadline: the next scrape finds it cached
                        row.lag_seconds, row.method = None, ""
                        continue
                written, method = stamp
                seconds = now - written if now > written else 0.0
            row.lag_seconds, row.method = seconds, method
            if row.committed is not None and retention:  # a partition without a commit counts not, as in the margin
                topic_retention = retention.get(row.topic)
                if topic_retention is not None and topic_retention.ms is not None:
                    keep = topic_retention.ms / 1000
                    row.runway = keep - seconds
                    if keep > 0:
                        row.used = seconds / keep
            if lines:
                line = row.seconds_line
                if line is None or row.seconds_method != method:
                    row.seconds_method = method
                    line = row.seconds_line = SeriesLine(KAFKA_CONSUMERGROUP_LAG_SECONDS.name, (
                        *self.common, *_PARTITION, "server", "method"), (
                        *self.common.values(), row.group, row.topic, str(row.partition), row.server, method))
                line.line(seconds)

    def _server(self, topic: str) -> str:
        for pattern, server in self._server_patterns:
            if pattern.fullmatch(topic):
                return server
        return self.topic_server.get(topic, "")

    # --- families --------------------------------------------------------------------------


    def _topic_families(self, builder: FamilyBuilder, state: ClusterState, newest: dict[Partition, float]) -> None:
        per_partition = self.cluster.granularity == "partition"
        for topic, count in sorted(state.partitions.items()):
            server = self._server(topic)
            builder.add_spec(KAFKA_TOPIC_PARTITIONS, count, self.common, topic=topic, server=server)
            retention = state.retention.get(topic)
            if retention is not None and retention.ms is not None:
                builder.add_spec(KAFKA_TOPIC_RETENTION_SECONDS, retention.ms / 1000, self.common, topic=topic)
            if retention is not None and retention.bytes is not None:
                builder.add_spec(KAFKA_TOPIC_RETENTION_BYTES, retention.bytes, self.common, topic=topic)
            partitions = range(count)
            if per_partition:
                for p in partitions:
                    where = (topic, p)
                    builder.add_spec(KAFKA_LOG_START_OFFSET, state.start.get(where, 0), self.common, topic=topic, partition=str(p))
                    builder.add_spec(KAFKA_LOG_END_OFFSET, state.end.get(where, 0), self.common, topic=topic, partition=str(p))
                    if where in newest:
                        builder.add_spec(KAFKA_NEWEST_SOURCE_COMMIT_TIMESTAMP_SECONDS, newest[where], self.common,
                                  topic=topic, partition=str(p), server=server)
            else:
                builder.add_spec(KAFKA_LOG_START_OFFSET, sum(state.start.get((topic, p), 0) for p in partitions), self.common, topic=topic)
                builder.add_spec(KAFKA_LOG_END_OFFSET, sum(state.end.get((topic, p), 0) for p in partitions), self.common, topic=topic)
                times = [newest[(topic, p)] for p in partitions if (topic, p) in newest]
                if times:
                    builder.add_spec(KAFKA_NEWEST_SOURCE_COMMIT_TIMESTAMP_SECONDS, max(times), self.common, topic=topic, server=server)

    def _group_families(self, builder: FamilyBuilder, state: ClusterState, rows: list[_GroupPartition],
                        servers: dict[str, str]) -> None:
        for group in state.groups:
            builder.add_spec(KAFKA_CONSUMERGROUP_MEMBERS, group.members, self.common, group=group.name)
            current = group.state if group.state in GROUP_STATES else "UNKNOWN"
            for name in GROUP_STATES:
                builder.add_spec(KAFKA_CONSUMERGROUP_STATE, float(name == current), self.common, group=group.name, state=name)
        if self.cluster.granularity == "partition":
            self._partition_series(builder, rows)
        status = self.cluster.status.enabled
        for (group_name, topic), run in groupby(rows, key=_RUN):
            members = list(run)
            server = servers[topic]
            builder.add_spec(KAFKA_CONSUMERGROUP_TOPIC_LAG_MESSAGES, sum(r.lag for r in members), self.common,
                      group=group_name, topic=topic, server=server)
            seconds = [r.lag_seconds for r in members if r.lag_seconds is not None]
            if seconds:
                builder.add_spec(KAFKA_CONSUMERGROUP_TOPIC_LAG_SECONDS, max(seconds), self.common, group=group_name,
                          topic=topic, server=server)
            builder.add_spec(KAFKA_CONSUMERGROUP_UNCOMMITTED_PARTITIONS,
                      sum(r.committed is None for r in members), self.common, group=group_name, topic=topic)
            committed = [r.committed for r in members if r.committed is not None]
            if committed:
                builder.add_spec(KAFKA_CONSUMERGROUP_TOPIC_COMMITTED_OFFSET, sum(committed), self.common,
                                 group=group_name, topic=topic, server=server)
            self._topic_retention(builder, group_name, topic, server, members)
            if status:
                worst = STATUS_BY_CODE[max(r.status for r in members)]
                for each in ConsumerStatus:
                    builder.add_spec(KAFKA_CONSUMERGROUP_TOPIC_STATUS, float(each is worst), self.common, group=group_name,
                              topic=topic, server=server, status=each.value)
        builder.add_spec(KAFKA_SERIES_DROPPED_TOTAL, self.dropped, self.common)
        builder.add_spec(KAFKA_GROUP_PARTITIONS_DROPPED, self.dropped_now, self.common)
        for source, count in self.messages.reads.items():
            builder.add_spec(KAFKA_MESSAGE_READS_TOTAL, count, self.common, source=source)

    def _topic_retention(self, builder: FamilyBuilder, group: str, topic: str, server: str,
                         members: list[_GroupPartition]) -> None:
        """The partition closest to losing data speaks for the topic."""
        where = {"group": group, "topic": topic}
        runways = [r.runway for r in members if r.runway is not None]
        if runways:
            builder.add_spec(KAFKA_CONSUMERGROUP_TOPIC_RETENTION_RUNWAY_SECONDS, min(runways), self.common, server=server,
                      **where)
        used = [r.used for r in members if r.used is not None]
        if used:
            builder.add_spec(KAFKA_CONSUMERGROUP_TOPIC_RETENTION_USED_RATIO, max(used), self.common, server=server, **where)
        margins = [r.margin for r in members if r.margin is not None]
        if margins:
            builder.add_spec(KAFKA_CONSUMERGROUP_TOPIC_RETENTION_MARGIN_MESSAGES, min(margins), self.common, **where)

    def _partition_series(self, builder: FamilyBuilder, rows: list[_GroupPartition]) -> None:
        """The per-partition series: tens of thousands on a large cluster, so each group partition keeps its
        rendered lines from one scrape to the next (RenderedFamily), made and updated with its readings; the status is
        one coded series per partition (the per-topic status is the full state set)."""
        names = (*self.common, *_PARTITION)

        def family(spec: MetricSpec, labels: tuple[str, ...]) -> list[str]:
            spec.check_labels(labels[len(self.common):])
            return builder.rendered(spec).lines

        if self.cluster.committed_offsets:
            family(KAFKA_CONSUMERGROUP_COMMITTED_OFFSET, names).extend(
                [r.committed_line.text for r in rows if r.committed is not None])  # type: ignore[union-attr]
        family(KAFKA_CONSUMERGROUP_LAG_MESSAGES, (*names, "server")).extend(
            [r.lag_line.text for r in rows])  # type: ignore[union-attr]
        family(KAFKA_CONSUMERGROUP_LAG_SECONDS, (*names, "server", "method")).extend(
            [r.seconds_line.text for r in rows if r.lag_seconds is not None])  # type: ignore[union-attr]
        if self._partition_status:
            family(KAFKA_CONSUMERGROUP_STATUS_CODE, names).extend(
                [r.status_line.text for r in rows])  # type: ignore[union-attr]

    def close(self) -> None:
        self._retired = True
        # a collection under way ends by its deadline: its clients are closed after it, not under it
        locked = self._lock.acquire(timeout=self.cluster.timeout_seconds)
        try:
            self._fetcher.shutdown(wait=True)  # a read under way ends by its scrape's deadline
            if self._clients is not None:
                self._clients[1].close()
                self._clients[0].close()
        finally:
            if locked:
                self._lock.release()
