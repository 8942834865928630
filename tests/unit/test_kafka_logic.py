"""The kafka collector's own logic: consumer status over a window, interpolated write times, caches, the
topics' retention settings, the label sets kept between scrapes."""

from __future__ import annotations

import time
from concurrent.futures import Future
from itertools import pairwise
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric

from cdcwatch.config import KafkaClusterConfig
from cdcwatch.exposition import render_text
from cdcwatch.families import RenderedFamily
from cdcwatch.kafka.cluster import ClusterState, GroupState, Retention, RetentionSettings, retention_of
from cdcwatch.kafka.collector import KAFKA_METRICS, KafkaCollector
from cdcwatch.kafka.interpolation import EndOffsetHistory
from cdcwatch.kafka.messages import CACHE_SLACK, At, BoundedCache, Lookup, MessageReader, NewestChange
from cdcwatch.kafka.status import ConsumerStatus, StatusWindow, WindowSample
from devstack.tls import make_pki
from tests.stand_ins import KafkaStandIn


def window(samples: list[tuple[int, int]], size: int = 3) -> StatusWindow:
    result = StatusWindow(size, max_age=3600)
    for second, (committed, lag) in enumerate(samples):
        result.add(WindowSample(float(second), committed, lag))
    return result


@pytest.mark.parametrize("samples,members,expected", [
    ([(5, 3), (5, 3)], False, ConsumerStatus.OK),               # too few samples to judge
    ([(5, 3), (5, 4), (5, 5)], False, ConsumerStatus.STOP),     # not moving, lag, nobody connected
    ([(5, 3), (5, 4), (5, 5)], True, ConsumerStatus.STALL),     # not moving, lag, a member connected
    ([(5, 0), (5, 0), (5, 0)], False, ConsumerStatus.OK),       # caught up and idle is fine
    ([(5, 3), (6, 5), (7, 9)], True, ConsumerStatus.WARN),      # moving, but the lag only grows
    ([(5, 9), (6, 5), (7, 6)], True, ConsumerStatus.OK),        # the lag shrank within the window
    ([(9, 1), (4, 6), (5, 5)], True, ConsumerStatus.REWIND),    # the committed offset went back
    ([(9, 1), (4, 6), (5, 5), (6, 4)], True, ConsumerStatus.OK),  # the rewind left the 3-sample window
])
def test_status(samples: list[tuple[int, int]], members: bool, expected: ConsumerStatus) -> None:
    assert window(samples).status(has_members=members) is expected


def status_by_the_table(samples: list[WindowSample], has_members: bool) -> ConsumerStatus:
    """The status table of cdcwatch.kafka.status, read literally over a whole window."""
    pairs = list(pairwise(samples))
    if any(newer.committed < older.committed for older, newer in pairs):
        return ConsumerStatus.REWIND
    if len(samples) < 3 or samples[-1].lag == 0:
        return ConsumerStatus.OK
    if all(s.committed == samples[0].committed for s in samples):
        return ConsumerStatus.STALL if has_members else ConsumerStatus.STOP
    if all(newer.lag >= older.lag for older, newer in pairs) and samples[-1].lag > samples[0].lag:
        return ConsumerStatus.WARN
    return ConsumerStatus.OK


@given(st.lists(st.tuples(st.integers(0, 30), st.sampled_from([-2, 0, 0, 1, 1, 2]), st.integers(0, 5)), max_size=40),
       st.integers(1, 6), st.integers(5, 60), st.booleans())
def test_the_window_keeps_its_status_as_samples_come_and_go(
        steps: list[tuple[int, int, int]], size: int, max_age: int, members: bool) -> None:
    """After every sample, the status equals the table's over the samples still in the window (the last
    `size`, none older than `max_age`), however offsets (mostly moving on, sometimes back), lags and gaps
    between samples go."""
    tracked, at, committed = StatusWindow(size, max_age=max_age), 0.0, 10
    seen: list[WindowSample] = []
    for gap, moved, lag in steps:
        at, committed = at + gap, committed + moved
        sample = WindowSample(at, committed, lag)
        tracked.add(sample)
        seen.append(sample)
        kept = [s for s in seen[-size:] if at - s.at <= max_age]
        assert list(tracked.samples) == kept
        assert tracked.status(has_members=members) is status_by_the_table(kept, members)


def test_old_samples_leave_the_window() -> None:
    stale = StatusWindow(10, max_age=60)
    for at in (0.0, 10.0, 100.0, 110.0, 120.0):
        stale.add(WindowSample(at, 5, 3))
    assert [at for at, _, _ in stale.samples] == [100.0, 110.0, 120.0]


def test_interpolated_write_time() -> None:
    history = EndOffsetHistory()
    history.add(100.0, 10)   # offsets 0..9 written by t=100
    history.add(110.0, 10)   # no change: the first sighting of 10 stays
    history.add(120.0, 30)   # offsets 10..29 written in (100, 120]
    assert history.written_at(5) == 100.0           # older than the history: its oldest time (a lower bound on lag)
    assert history.written_at(10) == pytest.approx(101.0)
    assert history.written_at(29) == pytest.approx(120.0)
    assert history.written_at(30) is None           # not written yet
    history.add(130.0, 3)    # the topic was recreated
    assert history.written_at(1) == 130.0 and history.written_at(5) is None


def test_bounded_cache_forgets_the_least_recently_used() -> None:
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert "b" not in cache and cache.get("a") == 1 and cache.get("c") == 3


class _Message:
    """A message as MessageReader reads it: its offset's broker timestamp."""

    def __init__(self, at: At) -> None:
        self.at = at

    def timestamp(self) -> tuple[int, int]:
        return 1, 1000 * (self.at[2] + 1)

    def key(self) -> None:
        return None

    def value(self) -> bytes:
        return b"{}"  # no Debezium event: its newest change names no source


def test_moving_offsets_leave_no_message_behind_in_the_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups that move on every scrape ask for new offsets each time: the caches keep what is asked for again
    (an offset a group stays at, one another group still has to reach) and forget what every group has passed,
    instead of filling up to their size."""
    reader = MessageReader(KafkaClusterConfig(name="k", bootstrap_servers="127.0.0.1:1"))
    fetched: list[list[At]] = []

    def fetch(wanted: list[At], deadline: float, leaders: Any) -> dict[At, _Message]:
        fetched.append(sorted(wanted))
        return {at: _Message(at) for at in wanted}

    monkeypatch.setattr(reader, "_fetch", fetch)
    partitions = CACHE_SLACK  # enough that the old offsets outgrow the slack
    for step in range(10):
        # two groups per partition: one at `step`, one 3 behind; each partition's newest message moves too
        wanted = [("t", p, offset) for p in range(partitions) for offset in (step, step - 3) if offset >= 0]
        found = reader.read(wanted, [("t", p, step) for p in range(partitions)], deadline=time.monotonic() + 10)
        assert found.timestamps == {at: (at[2] + 1.0, "timestamp") for at in wanted}
        assert len(reader.timestamps) <= 2 * len(set(wanted)) + CACHE_SLACK
        assert len(reader.newest) <= 2 * partitions + CACHE_SLACK
    # the group behind reaches offsets the one ahead asked for three scrapes before: read once, not again
    assert [at for at in fetched[-1] if at[2] == 6] == []
    assert {at[2] for at in reader.timestamps._entries} == set(range(6, 10))  # nothing behind the slower group
    assert {at[2] for at in reader.newest._entries} == {9}
    reader.close()


def test_every_kafka_metric_documents_its_labels() -> None:
    assert all(name.startswith("cdcwatch_kafka_") for name in KAFKA_METRICS)
    assert all(name.endswith("_total") == (spec.type == "counter") for name, spec in KAFKA_METRICS.items())


@pytest.mark.parametrize("settings, expected", [
    ({"cleanup.policy": "delete", "retention.ms": "604800000", "retention.bytes": "-1"}, Retention(604800000, None)),
    ({"cleanup.policy": "compact,delete", "retention.ms": "3600000", "retention.bytes": "1073741824"},
     Retention(3600000, 1073741824)),
    ({"cleanup.policy": "compact", "retention.ms": "3600000", "retention.bytes": "1073741824"}, Retention(None, None)),
    ({"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}, Retention(None, None)),
    ({"retention.ms": "0"}, Retention(0, None)),  # no policy reported: Kafka's default, delete
])
def test_retention_counts_only_where_the_topic_deletes(settings: dict[str, str], expected: Retention) -> None:
    assert retention_of(settings) == expected


class _Entry:
    def __init__(self, value: str) -> None:
        self.value = value


class _Admin:
    """Answers DescribeConfigs with futures the test resolves (or not) itself."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []
        self.futures: dict[str, Future[dict[str, _Entry]]] = {}

    def describe_configs(self, resources: list[ConfigResource], request_timeout: float) -> dict[ConfigResource, Future]:
        self.asked.append([r.name for r in resources])
        answers = {}
        for resource in resources:
            self.futures[resource.name] = answers[resource] = Future()
        return answers

    def answer(self, topic: str, retention_ms: str) -> None:
        self.futures[topic].set_result({"cleanup.policy": _Entry("delete"), "retention.ms": _Entry(retention_ms),
                                        "retention.bytes": _Entry("-1")})


def test_retention_is_read_in_the_background_and_refreshed_at_its_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr("cdcwatch.kafka.cluster.time.monotonic", lambda: clock[0])
    settings, admin = RetentionSettings(300), _Admin()
    topics = {"a": 1, "b": 1}
    settings.request(admin, topics, deadline=1005.0)
    assert admin.asked == [["a", "b"]]
    assert settings.current(topics) == {}  # not answered yet: nothing waits for it
    admin.answer("a", "3600000")
    assert settings.current(topics) == {"a": Retention(3600000, None)}
    settings.request(admin, topics, deadline=1005.0)
    assert admin.asked == [["a", "b"]]  # b is still in flight, a is fresh
    admin.futures["b"].set_exception(KafkaException("TOPIC_AUTHORIZATION_FAILED"))
    assert settings.current(topics) == {"a": Retention(3600000, None)}  # b stays unknown
    clock[0] += 300
    settings.request(admin, topics, deadline=clock[0] + 5)
    assert admin.asked[-1] == ["a", "b"]
    admin.futures["a"].set_exception(KafkaException("REQUEST_TIMED_OUT"))
    assert settings.current(topics) == {"a": Retention(3600000, None)}  # a failed refresh keeps what was read
    assert settings.current({"b": 1}) == {} and "a" not in settings.known  # a deleted topic is forgotten


def test_partition_series_follow_a_learned_server_and_a_changed_method(monkeypatch: pytest.MonkeyPatch) -> None:
    """The label sets a group partition keeps between scrapes give way when its topic's server becomes known and
    when its lag in seconds is known another way; partitions that went away take theirs with them."""
    collector = KafkaCollector(KafkaClusterConfig(name="k", bootstrap_servers="127.0.0.1:1"))
    scrapes = iter([
        # (partitions of the topic, server the newest message names, lag in seconds known from)
        (2, None, "timestamp"),
        (2, "srv", "timestamp"),
        (1, "srv", "interpolated"),
        (1, "srv", "interpolated"),
        (1, "srv", "interpolated"),
    ])
    current: dict[str, Any] = {}

    def read(deadline: float) -> ClusterState:
        count, current["server"], current["method"] = next(scrapes)
        # the group moves on to a message whose age is known another way (a message's own never changes)
        committed = 5 if current["method"] == "timestamp" else 6
        group = GroupState("g", "STABLE", 1, {("t", p): committed for p in range(count)})
        return ClusterState({"t": count}, {("t", p): 0 for p in range(count)}, {("t", p): 9 for p in range(count)},
                            [group], time.time())

    def messages(stamps: list[At], newest: list[At], deadline: float, leaders: Any = None) -> Lookup:
        found = {at: NewestChange(1.0, current["server"]) for at in newest}
        if current["method"] == "timestamp":
            return Lookup({at: (1.0, "timestamp") for at in stamps}, found)
        for at in stamps:
            collector.history.setdefault(at[:2], EndOffsetHistory()).add(1.0, 0)
            collector.history[at[:2]].add(2.0, 9)
        return Lookup({at: None for at in stamps}, found)

    monkeypatch.setattr(collector.reader, "read", read)
    monkeypatch.setattr(collector.messages, "read", messages)

    def series(name: str) -> list[Any]:
        families = collector.collect().families
        return [s.labels for f in families for s in f.samples if s.name == name]

    first = series("cdcwatch_kafka_consumergroup_lag_messages")
    assert [(s["partition"], s["server"]) for s in first] == [("0", ""), ("1", "")]
    second = series("cdcwatch_kafka_consumergroup_lag_messages")
    assert [(s["partition"], s["server"]) for s in second] == [("0", "srv"), ("1", "srv")]
    assert [(s["partition"], s["server"], s["method"]) for s in series("cdcwatch_kafka_consumergroup_lag_seconds")] == [
        ("0", "srv", "interpolated")]
    assert {group: list(kept) for group, kept in collector.kept.items()} == {"g": [("t", 0)]}
    # and while nothing changes, the same lines (rendered once) serve every scrape
    def lines(name: str) -> list[str]:
        return next(f.lines for f in collector.collect().families if isinstance(f, RenderedFamily) and f.name == name)
    first_lines = lines("cdcwatch_kafka_consumergroup_lag_messages")
    assert all(before is after for before, after in zip(
        first_lines, lines("cdcwatch_kafka_consumergroup_lag_messages"), strict=True)) and first_lines
    collector.close()


def test_rendered_lines_are_what_prometheus_client_writes_of_the_same_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-partition families are written from lines the collector keeps; their samples, built for other
    readers, must say the same thing, byte for byte once rendered, through changes of offsets, servers and methods."""
    collector = KafkaCollector(KafkaClusterConfig(name="k", bootstrap_servers="127.0.0.1:1", labels={"env": 'a"b\\'}))
    steps = iter([(5, None, "timestamp"), (7, "srv", "timestamp"), (7, "srv", "interpolated"), (-1, "srv", "payload")])
    current: dict[str, Any] = {}

    def read(deadline: float) -> ClusterState:
        committed, current["server"], current["method"] = next(steps)
        group = GroupState("g", "STABLE", 1, {("t", 0): committed if committed >= 0 else None, ("t", 1): 3})
        return ClusterState({"t": 2}, {("t", 0): 0, ("t", 1): 0}, {("t", 0): 9, ("t", 1): 3}, [group], time.time())

    def messages(stamps: list[At], newest: list[At], deadline: float, leaders: Any = None) -> Lookup:
        found = {at: NewestChange(1.0, current["server"]) for at in newest}
        if current["method"] == "interpolated":
            for at in stamps:
                collector.history.setdefault(at[:2], EndOffsetHistory()).add(1.0, 0)
                collector.history[at[:2]].add(2.0, 9)
            return Lookup({at: None for at in stamps}, found)
        return Lookup({at: (1.0, current["method"]) for at in stamps}, found)

    monkeypatch.setattr(collector.reader, "read", read)
    monkeypatch.setattr(collector.messages, "read", messages)
    for _ in range(4):
        families = collector.collect().families
        plain = []
        for family in families:
            copy = Metric(family.name, family.documentation, family.type)
            copy.samples = list(family.samples)
            plain.append(copy)
        assert render_text(_Families(families)) == generate_latest(_Families(plain))
    collector.close()


def test_a_collector_that_inherits_at_a_reload_renders_the_lines_with_its_own_labels(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A reload keeps the group partitions' status windows, not their lines: the new collector's labels and families
    (here another static label, and committed offsets turned on) are in every per-partition line, and a lag in
    seconds turned off leaves none behind."""
    def read(deadline: float) -> ClusterState:
        group = GroupState("g", "STABLE", 1, {("t", 0): 5, ("t", 1): 3})
        return ClusterState({"t": 2}, {("t", 0): 0, ("t", 1): 0}, {("t", 0): 9, ("t", 1): 3}, [group], time.time())

    def messages(stamps: list[At], newest: list[At], deadline: float, leaders: Any = None) -> Lookup:
        return Lookup({at: (1.0, "timestamp") for at in stamps}, {})

    def collector(env: str, **settings: Any) -> KafkaCollector:
        made = KafkaCollector(KafkaClusterConfig(name="k", bootstrap_servers="127.0.0.1:1", labels={"env": env},
                                                 **settings))
        monkeypatch.setattr(made.reader, "read", read)
        monkeypatch.setattr(made.messages, "read", messages)
        return made

    before = collector("a", committed_offsets=False)
    before.collect()
    after = collector("b", committed_offsets=True, status={"per_partition": True})
    after.inherit(before)
    families = {family.name: family for family in after.collect().families}
    per_partition = [families[name] for name in ("cdcwatch_kafka_consumergroup_committed_offset",
                                                 "cdcwatch_kafka_consumergroup_lag_messages",
                                                 "cdcwatch_kafka_consumergroup_lag_seconds",
                                                 "cdcwatch_kafka_consumergroup_status_code")]
    assert [len(family.samples) for family in per_partition] == [2, 2, 2, 2]
    assert {sample.labels["env"] for family in per_partition for sample in family.samples} == {"b"}
    # and with the lag in seconds turned off, none of it (nor the retention figures from it) is left over
    without = collector("b", committed_offsets=True, lag_seconds=False)
    without.inherit(after)
    seconds = [sample for family in without.collect().families for sample in family.samples
               if "seconds" in sample.name or "retention_used" in sample.name]
    assert seconds == []
    for made in (before, after, without):
        made.close()


class _Families:
    def __init__(self, families: list[Any]) -> None:
        self.families = families

    def collect(self) -> list[Any]:
        return self.families


def test_an_uncommitted_partition_lags_from_the_log_start_in_messages_and_in_seconds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Partition 0: committed at 7. Partition 1: nothing committed, messages 3..9 kept (the first written 600 s
    ago). Partition 2: nothing committed and nothing kept: no lag either way."""
    collector = KafkaCollector(KafkaClusterConfig(name="k", bootstrap_servers="127.0.0.1:1", freshness=False))
    now = time.time()
    written = {("t", 0, 7): now - 60, ("t", 1, 3): now - 600}
    asked: list[At] = []

    def read(deadline: float) -> ClusterState:
        group = GroupState("g", "STABLE", 1, {("t", 0): 7, ("t", 1): None, ("t", 2): None})
        return ClusterState({"t": 3}, {("t", 0): 0, ("t", 1): 3, ("t", 2): 4}, {("t", 0): 9, ("t", 1): 9, ("t", 2): 4},
                            [group], now)

    def messages(stamps: list[At], newest: list[At], deadline: float, leaders: Any = None) -> Lookup:
        asked.extend(stamps)
        return Lookup({at: (written[at], "timestamp") for at in stamps}, {})

    monkeypatch.setattr(collector.reader, "read", read)
    monkeypatch.setattr(collector.messages, "read", messages)
    samples = [s for f in collector.collect().families for s in f.samples]

    def by_partition(name: str) -> dict[str, float]:
        return {s.labels["partition"]: s.value for s in samples if s.name == name}

    assert by_partition("cdcwatch_kafka_consumergroup_lag_messages") == {"0": 2, "1": 6, "2": 0}
    assert by_partition("cdcwatch_kafka_consumergroup_lag_seconds") == pytest.approx({"0": 60, "1": 600, "2": 0}, abs=1e-3)
    assert sorted(asked) == [("t", 0, 7), ("t", 1, 3)]  # the log start's message, not the log end's
    collector.close()


def test_group_partitions_beyond_max_partitions_are_left_out_counted_shown_and_logged_once(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Three group partitions, a cap of two: the third is not reported, the gauge says how many the scrape left out,
    the counter sums them over scrapes, and the log says so once (again only after the cap stopped biting)."""
    collector = KafkaCollector(KafkaClusterConfig(name="k", bootstrap_servers="127.0.0.1:1", max_partitions=2,
                                                  lag_seconds=False, freshness=False))
    counts = iter([3, 3, 2, 3])

    def read(deadline: float) -> ClusterState:
        count = next(counts)
        group = GroupState("g", "STABLE", 1, {("t", p): 5 for p in range(count)})
        return ClusterState({"t": count}, {("t", p): 0 for p in range(count)}, {("t", p): 9 for p in range(count)},
                            [group], time.time())

    monkeypatch.setattr(collector.reader, "read", read)
    monkeypatch.setattr(collector.messages, "read", lambda *args, **kwargs: Lookup({}, {}))

    def scrape() -> tuple[list[str], float, float]:
        samples = [s for f in collector.collect().families for s in f.samples]
        reported = [s.labels["partition"] for s in samples if s.name == "cdcwatch_kafka_consumergroup_lag_messages"]
        gauge = next(s.value for s in samples if s.name == "cdcwatch_kafka_group_partitions_dropped")
        total = next(s.value for s in samples if s.name == "cdcwatch_kafka_series_dropped_total")
        return reported, gauge, total

    assert scrape() == (["0", "1"], 1, 1)
    assert scrape() == (["0", "1"], 1, 2)
    assert scrape() == (["0", "1"], 0, 2)
    assert scrape() == (["0", "1"], 1, 3)
    warnings = [r.getMessage() for r in caplog.records if "max_partitions" in r.getMessage()]
    assert len(warnings) == 2 and "1 group partitions beyond max_partitions (2)" in warnings[0]
    collector.close()


def test_only_partitions_whose_messages_carry_no_time_keep_an_end_offset_history(monkeypatch: pytest.MonkeyPatch) -> None:
    """The end offsets' history serves the lag in seconds of messages without a time (brokers older than 0.10): a
    partition starts one at its first such message, and one whose messages carry their time keeps none (a history per
    partition of a large cluster grew to 120 samples each)."""
    cluster = KafkaStandIn()
    cluster.install(monkeypatch)
    cluster.produce("timed", 0, 10, time.time() - 60)
    cluster.produce("untimed", 0, 10, 0.0)  # no timestamp, and no event whose payload says when
    cluster.commit("g", {("timed", 0): 2, ("untimed", 0): 2})
    collector = KafkaCollector(KafkaClusterConfig(name="k", bootstrap_servers="127.0.0.1:1", freshness=False))

    def methods() -> dict[str, str]:
        return {s.labels["topic"]: s.labels["method"] for f in collector.collect().families for s in f.samples
                if s.name == "cdcwatch_kafka_consumergroup_lag_seconds"}

    assert methods() == {"timed": "timestamp", "untimed": "interpolated"}
    assert list(collector.history) == [("untimed", 0)]
    cluster.produce("untimed", 0, 5, 0.0)
    assert methods() == {"timed": "timestamp", "untimed": "interpolated"}
    assert [end for _, end in collector.history[("untimed", 0)].samples] == [10, 15]
    collector.close()


def test_settings_the_client_refuses_as_a_whole_leave_the_cluster_down_and_named_never_a_crash(tmp_path) -> None:
    """A CA file that is not there yet (a Secret not mounted): no client can be built. The collector is built all the
    same, each collection fails naming librdkafka's cause and the fix (up 0), and once the file is there the next
    collection builds the clients."""
    ca = tmp_path / "ca.pem"
    cluster = KafkaClusterConfig(name="main", bootstrap_servers="127.0.0.1:1",
                                 client={"security.protocol": "SSL", "ssl.ca.location": str(ca)}, timeout_seconds=1)
    collector = KafkaCollector(cluster)
    try:
        with pytest.raises(RuntimeError) as refused:
            collector.collect()
        assert str(refused.value).startswith("the Kafka client refuses the settings of kafka cluster main: "
                                             "ssl.ca.location failed") and "fix its `client` settings" in str(refused.value)
        with pytest.raises(RuntimeError, match="ssl.ca.location failed"):
            collector.collect()  # still refused: tried again, named again
        make_pki(tmp_path / "pki", names=()).ca.replace(ca)
        with pytest.raises(Exception) as unreachable:  # built now: what fails is the broker that is not there
            collector.collect()
        assert "refuses the settings" not in str(unreachable.value)
    finally:
        collector.close()


def test_by_default_a_group_partition_costs_two_series(monkeypatch: pytest.MonkeyPatch) -> None:
    """What an on-call engineer reads per group partition, its lag in messages and in seconds, and nothing more by
    default: its commits are summed per group and topic (the pipeline's consume stage reads them rise), its status
    is the per-topic state set. The per-partition committed offset and status code are there when asked for."""
    def read(deadline: float) -> ClusterState:
        group = GroupState("g", "STABLE", 1, {("t", 0): 5, ("t", 1): 3, ("t", 2): None})
        return ClusterState({"t": 3}, {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}, {("t", 0): 9, ("t", 1): 3, ("t", 2): 4},
                            [group], time.time())

    def messages(stamps: list[At], newest: list[At], deadline: float, leaders: Any = None) -> Lookup:
        return Lookup({at: (1.0, "timestamp") for at in stamps}, {})

    def per_group_partition(**settings: Any) -> dict[str, int]:
        collector = KafkaCollector(KafkaClusterConfig(name="k", bootstrap_servers="127.0.0.1:1", **settings))
        monkeypatch.setattr(collector.reader, "read", read)
        monkeypatch.setattr(collector.messages, "read", messages)
        families = collector.collect().families
        collector.close()
        counts = {f.name: sum(1 for s in f.samples if "group" in s.labels and "partition" in s.labels) for f in families}
        committed = [s.value for f in families for s in f.samples if s.name.endswith("_topic_committed_offset")]
        assert committed == [8.0]  # the partitions the group committed in, summed
        return {name: count for name, count in counts.items() if count}

    assert per_group_partition() == {"cdcwatch_kafka_consumergroup_lag_messages": 3,
                                     "cdcwatch_kafka_consumergroup_lag_seconds": 3}
    assert per_group_partition(committed_offsets=True, status={"per_partition": True}) == {
        "cdcwatch_kafka_consumergroup_lag_messages": 3, "cdcwatch_kafka_consumergroup_lag_seconds": 3,
        "cdcwatch_kafka_consumergroup_committed_offset": 2, "cdcwatch_kafka_consumergroup_status_code": 3}
