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
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import groupby

from cdcwatch.config import KafkaClusterConfig
from cdcwatch.exposition import SeriesLine
from cdcwatch.families import Collection, FamilyBuilder, MetricSpec, metric_specs
from cdcwatch.kafka.cluster import ClusterReader, ClusterState, GroupState
from cdcwatch.kafka.interpolation import EndOffsetHistory
from cdcwatch.kafka.messages import At, MessageReader, NewestChange
from cdcwatch.kafka.status import STATUS_BY_CODE, ConsumerStatus, StatusWindow

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
        "Offset the group committed in the partition."),
        _PARTITION)
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
        "Consumer status of the partition over the sliding window: 0 OK, 1 WARN (lag growing), 2 STALL "
        "(offset not moving, lag > 0, members connected), 3 STOP (not moving, lag > 0, no members), 4 REWIND "
        "(offset went back)."),
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

    def __init__(self, group: GroupState, topic: str, partition: int) -> None:
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


_Reported = tuple[GroupState, Partition, int | None]


def _report_order(state: ClusterState) -> Iterator[_Reported]:
    """Each group partition with its commit (None: none), in report order: group, topic, partition."""
    for group in state.groups:
        for where, committed in sorted(group.committed.items()):
            yield group, where, committed


class KafkaCollector:
    """Collects one Kafka cluster; raises on failure (the exporter turns that into up=0)."""

    kind = "kafka"

    def __init__(self, cluster: KafkaClusterConfig) -> None:
        self.cluster = cluster
        self.target = cluster.name
        self.common = {"target": cluster.name, **cluster.labels}
        """The labels every series of the cluster carries."""
        self.address = cluster.bootstrap_servers
        self.reader = ClusterReader(cluster)
        self.messages = MessageReader(cluster)
        self._fetcher = ThreadPoolExecutor(1, thread_name_prefix=f"cdcwatch-kafka-messages-{cluster.name}")
        """Reads the messages a scrape needs while the scrape goes on with what needs none of them."""
        self.history: dict[Partition, EndOffsetHistory] = defaultdict(EndOffsetHistory)
        self.kept: dict[tuple[str, str, int], _GroupPartition] = {}
        self.topic_server: dict[str, str] = {}
        self.dropped = 0
        """Group partitions not reported because of max_partitions, over all scrapes (a counter)."""
        self.dropped_now = 0
        self._warned_cap = False
        self._server_patterns = [(re.compile(pattern), server) for pattern, server in cluster.topic_servers.items()]

    def collect(self) -> Collection:
        try:
            return self._collect()
        except Exception as exc:
            # librdkafka clients can keep a stale coordinator or fetch state after a broker restart:
            # start the next collection with fresh ones (caches and status windows are kept)
            explained = self.reader.explain(exc)
            self._reconnect()
            if explained is not exc:
                raise explained from exc
            raise

    def inherit(self, previous: KafkaCollector) -> None:
        """Carry on what the collector this one replaces at a reload learned: its counters, the consumer status
        windows, the end-offset history lag is interpolated from, the message caches, the topics' servers and
        retention settings (its clients are its own: the replaced collector closes them)."""
        self.history, self.kept, self.topic_server = previous.history, previous.kept, previous.topic_server
        self.dropped = previous.dropped
        self.messages.timestamps, self.messages.newest = previous.messages.timestamps, previous.messages.newest
        self.messages.reads = previous.messages.reads
        self.reader.retention_settings.known.update(previous.reader.retention_settings.known)

    def _reconnect(self) -> None:
        old_reader, old_messages = self.reader, self.messages
        self.reader = ClusterReader(self.cluster, retention_from=old_reader)
        self.messages = MessageReader(self.cluster, caches_from=old_messages)
        old_reader.close()
        threading.Thread(target=old_messages.close, daemon=True).start()  # close() may block on a dead broker

    def _collect(self) -> Collection:
        deadline = time.monotonic() + self.cluster.timeout_seconds * 0.9
        state = self.reader.read(deadline)
        for where, end in state.end.items():
            self.history[where].add(state.read_at, end)
        order = list(_report_order(state))
        reading = self._fetcher.submit(self.messages.read, self._positions(state, order), self._newest_offsets(state),
                                       deadline, state.leaders)
        # meanwhile (the read is mostly waiting on the broker): what needs no message
        rows = self._rows(state, order)
        if self.cluster.status.enabled:
            self._statuses(rows, state.read_at)
        self._refresh_lines(rows)
        found = reading.result()
        newest = self._newest_commit_times(found.newest)
        if self.cluster.lag_seconds:
            self._lag_seconds(rows, state, found.timestamps)
        self.reader.retention(state)  # the answers that arrived meanwhile
        self._runway(rows, state)
        builder = FamilyBuilder()
        self._topic_families(builder, state, newest)
        self._group_families(builder, state, rows)
        worst = max((row.lag for row in rows), default=0)
        return Collection(builder.families(), f"{len(state.groups)} groups, {len(rows)} group partitions, max lag {worst}")

    # --- reading ---------------------------------------------------------------------------

    def _newest_offsets(self, state: ClusterState) -> list[At]:
        if not self.cluster.freshness:
            return []
        return [(t, p, end - 1) for (t, p), end in state.end.items() if end > state.start.get((t, p), 0)]

    def _newest_commit_times(self, found: dict[At, NewestChange]) -> dict[Partition, float]:
        times: dict[Partition, float] = {}
        for (topic, partition, _), change in found.items():
            if change.server and topic not in self.topic_server:
                self.topic_server[topic] = change.server
            if change.commit_time is not None:
                times[(topic, partition)] = change.commit_time
        return times

    def _rows(self, state: ClusterState, order: list[_Reported]) -> list[_GroupPartition]:
        """The group partitions to report, in report order (group, topic, partition), with this scrape's offsets;
        those that vanished leave no state behind. Beyond `max_partitions` the rest are dropped and counted."""
        rows: list[_GroupPartition] = []
        kept: dict[tuple[str, str, int], _GroupPartition] = {}
        previous, cap = self.kept, self.cluster.max_partitions
        start_of, end_of = state.start.get, state.end.get
        dropped = 0
        for group, where, committed in order:
            if len(rows) >= cap:
                dropped += 1
                continue
            topic, partition = where
            key = (group.name, topic, partition)
            row = previous.get(key)
            if row is None:
                row = _GroupPartition(group, topic, partition)
            kept[key] = row
            row.group = group
            start = start_of(where, 0)
            row.committed = committed
            if committed is None:
                row.position, row.margin = start, None
            else:
                row.position, row.margin = committed, committed - start
            lag = end_of(where, 0) - row.position
            row.lag = lag if lag > 0 else 0
            row.lag_seconds = row.runway = row.used = None
            row.method = ""
            rows.append(row)
        self.kept = kept
        self.dropped_now = dropped
        self.dropped += dropped
        if dropped and not self._warned_cap:
            log.warning("kafka cluster %s: %d group partitions beyond max_partitions (%d) are not reported; raise "
                        "max_partitions or narrow groups/topics", self.target, dropped, cap)
        self._warned_cap = bool(dropped)
        return rows

    def _positions(self, state: ClusterState, order: list[_Reported]) -> list[At]:
        """The next message to consume wherever a group lags, in the group partitions `_rows` reports, each once: its
        age is the lag in seconds."""
        if not self.cluster.lag_seconds:
            return []
        start_of, end_of = state.start.get, state.end.get
        wanted: set[At] = set()
        for _, where, committed in order[:self.cluster.max_partitions]:
            position = start_of(where, 0) if committed is None else committed
            if end_of(where, 0) > position:
                wanted.add((*where, position))
        return list(wanted)

    def _lag_seconds(self, rows: list[_GroupPartition], state: ClusterState,
                     stamps: dict[At, tuple[float, str] | None]) -> None:
        """The age of the message at each row's position: where the group committed nothing, the first message kept
        (the log start), where its lag in messages counts from too, so that the two always measure the same
        backlog (both 0 on an empty partition)."""
        now = state.read_at
        for row in rows:
            if row.lag == 0:
                row.lag_seconds, row.method = 0.0, "timestamp"
                continue
            stamp = row.stamp
            if stamp is None or row.stamp_at != row.position:
                at = (row.topic, row.partition, row.position)
                if at not in stamps:
                    continue  # not read within this scrape's deadline: the next scrape finds it cached
                stamp = stamps[at]
                if stamp is None:
                    written = self.history[(row.topic, row.partition)].written_at(row.position)
                    if written is not None:
                        row.lag_seconds, row.method = (now - written if now > written else 0.0), "interpolated"
                    continue
                row.stamp, row.stamp_at = stamp, row.position
            written = stamp[0]
            row.lag_seconds, row.method = (now - written if now > written else 0.0), stamp[1]

    @staticmethod
    def _runway(rows: list[_GroupPartition], state: ClusterState) -> None:
        """How close time retention is to the next message each group will consume (where both are known)."""
        if not state.retention:
            return
        for row in rows:
            retention = state.retention.get(row.topic)
            if retention is None or retention.ms is None or row.lag_seconds is None or row.committed is None:
                continue  # a partition without a commit counts not, as in the margin
            keep = retention.ms / 1000
            row.runway = keep - row.lag_seconds
            if keep > 0:
                row.used = row.lag_seconds / keep

    def _statuses(self, rows: list[_GroupPartition], now: float) -> None:
        size, age = self.cluster.status.window_samples, self.cluster.status.max_sample_age_seconds
        for row in rows:
            window = row.window
            if window is None:
                window = row.window = StatusWindow(size, age)
            if row.committed is not None:
                window.observe(now, row.committed, row.lag)
            row.status = window.code(row.group.members > 0)

    def _refresh_lines(self, rows: list[_GroupPartition]) -> None:
        """Formats the changed values of the per-partition lines that need no message (committed offset, lag in
        messages, status), so that `_partition_series` later finds them done."""
        if self.cluster.granularity != "partition":
            return
        for row in rows:
            if row.lag_line is not None:
                row.lag_line.line(row.lag)
            if row.committed_line is not None and row.committed is not None:
                row.committed_line.line(row.committed)
            if row.status_line is not None:
                row.status_line.line(row.status)

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

    def _group_families(self, builder: FamilyBuilder, state: ClusterState, rows: list[_GroupPartition]) -> None:
        for group in state.groups:
            builder.add_spec(KAFKA_CONSUMERGROUP_MEMBERS, group.members, self.common, group=group.name)
            current = group.state if group.state in GROUP_STATES else "UNKNOWN"
            for name in GROUP_STATES:
                builder.add_spec(KAFKA_CONSUMERGROUP_STATE, float(name == current), self.common, group=group.name, state=name)
        servers = {topic: self._server(topic) for topic in {row.topic for row in rows}}
        if self.cluster.granularity == "partition":
            self._partition_series(builder, rows, servers)
        status = self.cluster.status.enabled
        for (group_name, topic), run in groupby(rows, key=lambda r: (r.group.name, r.topic)):
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

    def _partition_series(self, builder: FamilyBuilder, rows: list[_GroupPartition], servers: dict[str, str]) -> None:
        """The per-partition series: tens of thousands on a large cluster, so each group partition keeps its
        rendered lines from one scrape to the next (RenderedFamily); the status is one coded series per partition
        (the per-topic status is the full state set)."""
        base = self.common
        names, base_values = (*base, *_PARTITION), tuple(base.values())
        with_server, with_method = (*names, "server"), (*names, "server", "method")

        def family(spec: MetricSpec, labels: tuple[str, ...]) -> list[str]:
            spec.check_labels(labels[len(base):])
            return builder.rendered(spec).lines

        committed_lines = (family(KAFKA_CONSUMERGROUP_COMMITTED_OFFSET, names)
                           if self.cluster.committed_offsets else None)
        lag_lines = family(KAFKA_CONSUMERGROUP_LAG_MESSAGES, with_server)
        seconds_lines = family(KAFKA_CONSUMERGROUP_LAG_SECONDS, with_method)
        status_lines = (family(KAFKA_CONSUMERGROUP_STATUS_CODE, names)
                        if self.cluster.status.enabled else None)
        for row in rows:
            server = servers[row.topic]
            if row.lag_line is None or row.server != server:  # new, or its topic's server became known
                row.server = server
                values = (*base_values, row.group.name, row.topic, str(row.partition))
                row.lag_line = SeriesLine(KAFKA_CONSUMERGROUP_LAG_MESSAGES.name, with_server, (*values, server))
                row.seconds_line = None
                if committed_lines is not None:
                    row.committed_line = SeriesLine(KAFKA_CONSUMERGROUP_COMMITTED_OFFSET.name, names, values)
                if status_lines is not None:
                    row.status_line = SeriesLine(KAFKA_CONSUMERGROUP_STATUS_CODE.name, names, values)
        # one pass per family, the lines in row order (each line object is set above wherever its family is on)
        if committed_lines is not None:
            committed_lines += [r.committed_line.line(r.committed)  # type: ignore[union-attr]
                                for r in rows if r.committed is not None]
        lag_lines += [r.lag_line.line(r.lag) for r in rows]  # type: ignore[union-attr]
        for row in rows:
            if row.lag_seconds is not None:
                if row.seconds_line is None or row.seconds_method != row.method:
                    row.seconds_method = row.method
                    row.seconds_line = SeriesLine(KAFKA_CONSUMERGROUP_LAG_SECONDS.name, with_method, (
                        *base_values, row.group.name, row.topic, str(row.partition), row.server, row.method))
                seconds_lines.append(row.seconds_line.line(row.lag_seconds))
        if status_lines is not None:
            status_lines += [r.status_line.line(r.status) for r in rows]  # type: ignore[union-attr]

    def close(self) -> None:
        self._fetcher.shutdown(wait=True)  # a read under way ends by its scrape's deadline
        self.messages.close()
        self.reader.close()
