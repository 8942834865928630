"""Bounded reads of single messages: the timestamp of the next message a group will consume, and the
source commit time of the newest message in a partition (Debezium topics). Both are cached by
(topic, partition, offset), so a steady group or an idle topic costs no fetch at all.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, Message, TopicPartition

from cdcwatch.config import KafkaClusterConfig
from cdcwatch.events import EventDecodeError, decode
from cdcwatch.kafka.cluster import client_settings

__all__ = ["At", "BoundedCache", "Lookup", "MessageReader", "NewestChange", "forget_passed"]

At = tuple[str, int, int]  # topic, partition, offset
K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """A dict that forgets its least recently used entries beyond `size`."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def __contains__(self, key: K) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def retain(self, keep: Callable[[K], bool]) -> None:
        """Forget every entry whose key `keep` refuses (the others keep their order)."""
        self._entries = OrderedDict((key, value) for key, value in self._entries.items() if keep(key))

    def put(self, key: K, value: V) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)


@dataclass(frozen=True)
class NewestChange:
    """What the newest message of a partition says about the source (None where it is not a Debezium event)."""

    commit_time: float | None
    server: str | None


_NO_TIMESTAMP = (-1.0, "")


@dataclass(frozen=True)
class Lookup:
    """What one `MessageReader.read` found (see there)."""

    timestamps: dict[At, tuple[float, str] | None]
    newest: dict[At, NewestChange]


def _written(message: Message, topic: str) -> tuple[float, str]:
    kind, stamp = message.timestamp()
    if kind != TIMESTAMP_NOT_AVAILABLE and stamp > 0:
        return stamp / 1000, "timestamp"
    try:
        emitted = decode(message.key(), message.value(), topic).emitted_time_ns
    except EventDecodeError:
        emitted = None
    return (emitted / 1_000_000_000, "payload") if emitted else _NO_TIMESTAMP


CONSUME_WAIT_SECONDS = 0.01
FETCH_WAIT_MS = 10
"""How long the broker holds a fetch that finds nothing new. A pass's partitions join the fetch as librdkafka
readies them: one readied while a fetch of only read-out partitions is held waits that long (100 ms held a pass
in one of seven)."""
CONSUME_BATCH = 1000
WAKE_TIMEOUT_SECONDS = 0.5
SEEK_GAP = 500
"""Read through gaps up to this many messages between two wanted offsets of a partition; seek over longer ones."""
CACHE_SLACK = 1024
"""A cache holds up to twice what one read wants, plus this, before the messages every reader has passed go."""


def forget_passed(cache: BoundedCache[At, V], wanted: set[At]) -> None:
    """Drop the messages behind every wanted offset of their partition (and those of partitions nothing is wanted
    of now), once `cache` holds more than twice what this read wanted: a group moves forward, so nobody asks for
    them again (a group that rewinds reads them anew). Without it, moving offsets fill the cache to its size with
    messages passed long ago (100,000 each: tens of MiB)."""
    if len(cache) <= 2 * len(wanted) + CACHE_SLACK:
        return
    floor: dict[tuple[str, int], int] = {}
    for topic, partition, offset in wanted:
        if offset < floor.get((topic, partition), offset + 1):
            floor[(topic, partition)] = offset
    cache.retain(lambda at: at[2] >= floor.get((at[0], at[1]), at[2] + 1))


class MessageReader:
    """A never-committing consumer that fetches single messages by offset under a deadline."""

    def __init__(self, cluster: KafkaClusterConfig, cache_size: int = 100_000,
                 caches_from: MessageReader | None = None) -> None:
        self.consumer = Consumer({**client_settings(cluster), "group.id": f"cdcwatch-reader-{cluster.name}",
                                  "enable.auto.commit": False, "enable.partition.eof": True,
                                  "fetch.wait.max.ms": FETCH_WAIT_MS, "fetch.message.max.bytes": 4 * 1024 * 1024})
        self.timestamps: BoundedCache[At, tuple[float, str]] = (
            caches_from.timestamps if caches_from else BoundedCache(cache_size))
        self.newest: BoundedCache[At, NewestChange] = caches_from.newest if caches_from else BoundedCache(cache_size)
        self.reads: dict[str, int] = caches_from.reads if caches_from else {"cache": 0, "broker": 0}
        """Messages asked for, by where the answer came from (exported as a counter)."""

    def read(self, timestamps: list[At], newest: list[At], deadline: float,
             leaders: Mapping[tuple[str, int], int] | None = None) -> Lookup:
        """What the messages at the wanted offsets say, from the caches or from one pass over the partitions.

        `timestamps`: when the message at each offset was written, in seconds, and how that is known
        (`timestamp`: the broker's message timestamp; `payload`: where the broker keeps none, Kafka
        < 0.10, a Debezium event's own `payload.ts_ms`, when the connector emitted it; None: neither).
        `newest`: the decoded source commit time and server of the message at each offset (a
        partition's newest). Offsets not read before the deadline are left out. `leaders` (partition → leader
        broker id) lets the fetch start at once on every broker (see `_wake`).
        """
        wanted_stamps, wanted_newest = set(timestamps), set(newest)  # groups at one offset ask for it once
        missing_stamps = [at for at in wanted_stamps if at not in self.timestamps]
        missing_newest = [at for at in wanted_newest if at not in self.newest]
        self.reads["cache"] += len(timestamps) - len(missing_stamps) + len(newest) - len(missing_newest)
        fetched = self._fetch(missing_stamps + missing_newest, deadline, leaders or {})
        for at in missing_stamps:
            if (message := fetched.get(at)) is not None:
                self.timestamps.put(at, _written(message, at[0]))
        for at in missing_newest:
            if (message := fetched.get(at)) is not None:
                try:
                    event = decode(message.key(), message.value(), at[0])
                    self.newest.put(at, NewestChange(event.commit_time, event.server))
                except EventDecodeError:
                    self.newest.put(at, NewestChange(None, None))
        forget_passed(self.timestamps, wanted_stamps)
        forget_passed(self.newest, wanted_newest)
        stamps = {at: None if stamp == _NO_TIMESTAMP else stamp
                  for at in wanted_stamps if (stamp := self.timestamps.get(at)) is not None}
        return Lookup(stamps, {at: change for at in wanted_newest if (change := self.newest.get(at)) is not None})

    def _fetch(self, wanted: list[At], deadline: float, leaders: Mapping[tuple[str, int], int]) -> dict[At, Message]:
        """The messages at the wanted offsets that could be read before the deadline.

        Each partition is read forward from its smallest wanted offset, seeking over gaps longer
        than SEEK_GAP, and paused once its last wanted offset (or its end) is reached.
        """
        if not wanted:
            return {}
        plan: dict[tuple[str, int], list[int]] = {}
        for topic, partition, offset in sorted(set(wanted)):
            plan.setdefault((topic, partition), []).append(offset)
        assignment = [TopicPartition(t, p, offsets[0]) for (t, p), offsets in plan.items()]
        self.consumer.assign(assignment)
        self.consumer.resume(assignment)  # librdkafka keeps a partition paused by an earlier fetch
        self._wake(assignment, leaders, deadline)
        got: dict[At, Message] = {}
        try:
            while plan and time.monotonic() < deadline:
                # what has arrived, else the next message to arrive: consume() waits for num_messages or its
                # timeout, so a pass never waits once its last wanted message is in
                batch = (self.consumer.consume(num_messages=CONSUME_BATCH, timeout=0)
                         or self.consumer.consume(num_messages=1, timeout=CONSUME_WAIT_SECONDS))
                done: list[TopicPartition] = []
                for message in batch:
                    read_topic, read_partition = message.topic(), message.partition()
                    if read_topic is None or read_partition is None:
                        continue
                    where = (read_topic, read_partition)
                    pending = plan.get(where)
                    if pending is None:
                        continue
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            _done(plan, where, done)
                        continue
                    read_offset = message.offset()
                    if read_offset is None:
                        continue
                    while pending and pending[0] < read_offset:  # compacted away or deleted: not readable
                        pending.pop(0)
                    if pending and pending[0] == read_offset:
                        got[(*where, read_offset)] = message
                        pending.pop(0)
                    if not pending:
                        _done(plan, where, done)
                    elif pending[0] - read_offset > SEEK_GAP:
                        self.consumer.seek(TopicPartition(*where, pending[0]))
                if done:  # no more fetches for them; one call for all, since each call waits for librdkafka's threads
                    self.consumer.pause(done)
        finally:
            self.consumer.unassign()
        self.reads["broker"] += len(got)
        return got

    def _wake(self, assignment: list[TopicPartition], leaders: Mapping[tuple[str, int], int], deadline: float) -> None:
        """One request to each leader broker of the assignment. A partition assigned again on the broker that led
        it before starts fetching only when that broker's thread next wakes up, up to a second later; a request
        (ListOffsets of one partition) wakes it now. Only the wake-up counts, so the requests are made from a thread
        of their own while the fetch goes on; their answers and errors are not used."""
        first: dict[int, TopicPartition] = {}
        for tp in assignment:
            first.setdefault(leaders.get((tp.topic, tp.partition), -1), tp)
        timeout = min(WAKE_TIMEOUT_SECONDS, max(deadline - time.monotonic(), 0.0))

        def ask() -> None:
            for tp in first.values():
                try:
                    self.consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)
                except (KafkaException, RuntimeError):  # RuntimeError: the consumer closed meanwhile
                    pass
        threading.Thread(target=ask, name="cdcwatch-kafka-wake", daemon=True).start()

    def close(self) -> None:
        self.consumer.close()


def _done(plan: dict[tuple[str, int], list[int]], where: tuple[str, int], done: list[TopicPartition]) -> None:
    """`where` is read out: off the plan, and among the partitions to pause."""
    if plan.pop(where, None) is not None:
        done.append(TopicPartition(*where))
