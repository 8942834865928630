"""A base for the stand-in HTTP servers of unit tests (an API answering JSON, quietly)."""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future
from http.server import BaseHTTPRequestHandler
from types import SimpleNamespace
from typing import Any

from confluent_kafka import TIMESTAMP_CREATE_TIME, ConsumerGroupState, KafkaError, TopicPartition
from confluent_kafka.admin import OffsetSpec


class JsonHandler(BaseHTTPRequestHandler):
    """Subclasses implement do_GET and answer with `send_json`; nothing is logged."""

    def send_json(self, data: object) -> None:
        body = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class KafkaStandIn:
    """A Kafka cluster in place of librdkafka's clients, for the kafka collector's unit tests: `install` makes the
    AdminClients and Consumers cdcwatch.kafka creates talk to it. Topics hold messages (their write times), groups
    their commits; the test moves both on between scrapes.

    `hold_commits()` makes the next OffsetFetch (the last request of a collection's broker reads) answer late: with
    the commits of the moment it was asked, once the test sets `release`; `held` is set while it waits. Every
    consumer is recorded in `consumers`; a call into a closed consumer, or a close during a call, is recorded in
    `violations`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.written: dict[str, list[list[float]]] = {}
        """Topic → each partition's messages, as their write times (seconds), from offset 0."""
        self.commits: dict[str, dict[tuple[str, int], int]] = {}
        self.held, self.release = threading.Event(), threading.Event()
        self._hold = False
        self.consumers: list[StandInConsumer] = []
        self.violations: list[str] = []

    def install(self, monkeypatch: Any) -> None:
        monkeypatch.setattr("cdcwatch.kafka.cluster.AdminClient", lambda settings: StandInAdmin(self))
        monkeypatch.setattr("cdcwatch.kafka.messages.Consumer", self._consumer)

    def _consumer(self, settings: object) -> StandInConsumer:
        consumer = StandInConsumer(self)
        with self._lock:
            self.consumers.append(consumer)
        return consumer

    def produce(self, topic: str, partition: int, count: int, written: float) -> None:
        with self._lock:
            self.written.setdefault(topic, [])
            partitions = self.written[topic]
            while len(partitions) <= partition:
                partitions.append([])
            partitions[partition] += [written] * count

    def commit(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        with self._lock:
            self.commits.setdefault(group, {}).update(offsets)

    def hold_commits(self) -> None:
        self._hold = True

    def end(self, topic: str, partition: int) -> int:
        with self._lock:
            return len(self.written[topic][partition])

    def message_written(self, topic: str, partition: int, offset: int) -> float | None:
        with self._lock:
            kept = self.written.get(topic, [])
            return kept[partition][offset] if partition < len(kept) and offset < len(kept[partition]) else None

    def committed(self, group: str) -> tuple[dict[tuple[str, int], int], bool]:
        """The group's commits now, and whether this answer is the one to hold."""
        with self._lock:
            hold, self._hold = self._hold, False
            return dict(self.commits.get(group, {})), hold


def _answered(result: object) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(result)
    return future


class StandInAdmin:
    """The AdminClient calls ClusterReader makes, answered from a KafkaStandIn (one broker, id 1)."""

    def __init__(self, cluster: KafkaStandIn) -> None:
        self.cluster = cluster

    def poll(self, timeout: float) -> int:
        return 0

    def list_topics(self, timeout: float) -> Any:
        with self.cluster._lock:
            topics = {name: SimpleNamespace(error=None, partitions={p: SimpleNamespace(leader=1) for p in range(len(parts))})
                      for name, parts in self.cluster.written.items()}
        return SimpleNamespace(topics=topics)

    def list_consumer_groups(self, request_timeout: float) -> Future[Any]:
        with self.cluster._lock:
            groups = [SimpleNamespace(group_id=name, state=ConsumerGroupState.STABLE) for name in self.cluster.commits]
        return _answered(SimpleNamespace(valid=groups))

    def describe_consumer_groups(self, names: list[str], request_timeout: float) -> dict[str, Future[Any]]:
        answers = {}
        for name in names:
            with self.cluster._lock:
                consumed = [TopicPartition(t, p) for t, p in self.cluster.commits.get(name, {})]
            member = SimpleNamespace(assignment=SimpleNamespace(topic_partitions=consumed))
            answers[name] = _answered(SimpleNamespace(state=ConsumerGroupState.STABLE, members=[member]))
        return answers

    def list_offsets(self, wanted: dict[TopicPartition, Any], request_timeout: float) -> dict[TopicPartition, Future[Any]]:
        earliest = type(OffsetSpec.earliest())
        return {tp: _answered(SimpleNamespace(offset=0 if isinstance(spec, earliest) else self.cluster.end(tp.topic, tp.partition)))
                for tp, spec in wanted.items()}

    def list_consumer_group_offsets(self, requests: list[Any], request_timeout: float) -> dict[str, Future[Any]]:
        [request] = requests
        commits, hold = self.cluster.committed(request.group_id)
        if hold:  # answered as of now, arriving once the test lets it
            self.cluster.held.set()
            if not self.cluster.release.wait(60):
                raise AssertionError("the held OffsetFetch was never released")
        answer = [TopicPartition(t, p, offset) for (t, p), offset in sorted(commits.items())]
        return {request.group_id: _answered(SimpleNamespace(topic_partitions=answer))}

    def describe_configs(self, resources: list[Any], request_timeout: float) -> dict[Any, Future[Any]]:
        settings = {"cleanup.policy": "delete", "retention.ms": "604800000", "retention.bytes": "-1"}
        return {resource: _answered({name: SimpleNamespace(value=v) for name, v in settings.items()})
                for resource in resources}


class _Message:
    def __init__(self, topic: str, partition: int, offset: int, written: float | None) -> None:
        self._where, self._written = (topic, partition, offset), written

    def topic(self) -> str:
        return self._where[0]

    def partition(self) -> int:
        return self._where[1]

    def offset(self) -> int:
        return self._where[2]

    def error(self) -> KafkaError | None:
        return KafkaError(KafkaError._PARTITION_EOF) if self._written is None else None

    def timestamp(self) -> tuple[int, int]:
        return TIMESTAMP_CREATE_TIME, int((self._written or 0) * 1000)

    def key(self) -> bytes | None:
        return None

    def value(self) -> bytes | None:
        return None


class StandInConsumer:
    """The Consumer calls MessageReader makes: each assigned partition is read from its position to its end."""

    def __init__(self, cluster: KafkaStandIn) -> None:
        self.cluster = cluster
        self.closed = False
        self._calls = 0
        self._positions: dict[tuple[str, int], int] = {}
        self._paused: set[tuple[str, int]] = set()

    def _call(self, name: str) -> None:
        if self.closed:
            self.cluster.violations.append(f"{name} on a closed consumer")
            raise RuntimeError("Consumer closed")

    def assign(self, partitions: list[TopicPartition]) -> None:
        self._call("assign")
        self._positions = {(tp.topic, tp.partition): tp.offset for tp in partitions}
        self._paused.clear()

    def resume(self, partitions: list[TopicPartition]) -> None:
        self._call("resume")
        self._paused -= {(tp.topic, tp.partition) for tp in partitions}

    def pause(self, partitions: list[TopicPartition]) -> None:
        self._call("pause")
        self._paused |= {(tp.topic, tp.partition) for tp in partitions}

    def seek(self, partition: TopicPartition) -> None:
        self._call("seek")
        self._positions[(partition.topic, partition.partition)] = partition.offset

    def unassign(self) -> None:
        self._call("unassign")
        self._positions = {}

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[_Message]:
        self._call("consume")
        self._calls += 1
        try:
            batch = []
            for (topic, partition), position in self._positions.items():
                if (topic, partition) in self._paused or len(batch) >= num_messages:
                    continue
                batch.append(_Message(topic, partition, position, self.cluster.message_written(topic, partition, position)))
                self._positions[(topic, partition)] = position + 1
            return batch
        finally:
            self._calls -= 1

    def get_watermark_offsets(self, partition: TopicPartition, timeout: float = -1, cached: bool = False) -> tuple[int, int]:
        if self.closed:  # MessageReader's wake-up requests may come late, and expect this
            raise RuntimeError("Consumer closed")
        return 0, self.cluster.end(partition.topic, partition.partition)

    def close(self) -> None:
        if self._calls:
            self.cluster.violations.append("close during a call")
        self.closed = True
