"""Per-query state fed by the listener and the sink, exported as fresh families on every scrape.

Apply lag is measured when a batch's progress arrives (the batch has been applied): now minus the
source commit time of its events (max, p50, p99); of the changes the sink took as new when the sink reports
them (`SinkOutcome.commits`), so a replay of changes already applied never raises it. Freshness is computed at scrape time from the
newest applied change or heartbeat, so it keeps growing while nothing new is applied.

Latency by stage splits the way of every row change into four contiguous stages, each a histogram:

- capture: source commit → the connector processed it (`payload.ts_ms − source.ts_ms`);
- produce: the connector → the Kafka record's timestamp: the producer's send (CreateTime) or the
  broker's append (LogAppendTime), as `timestamp_type` says;
- queue: the Kafka record's timestamp → the start of the micro-batch that reads it (the batch's
  `current_timestamp()`);
- apply: the batch's start → its end (trigger start + triggerExecution, when the sink has merged and
  the offsets are committed), the same for every change of the batch.

`decode_events` puts every change's capture, produce and queue in whole µs and their bucket codes into
`stage_latency` and counts the codes and sums the latencies of each Arrow batch into its `batch_summary`
(vectorized); `instrument` observes those summaries and `merge_summaries` adds them up per micro-batch;
apply is added here from the batch's progress. A stage whose two ends come from
different clocks can come out negative: it counts as 0 s and in `cdcwatch_spark_clock_skew_changes_total`.
Where the sink reports the stages of the changes it took as new (`SinkOutcome.stages`, as `PostgresTarget`
does), the histograms count those alone: a re-delivery after a connector restart, whose capture to queue spans
the restart, never inflates them.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from prometheus_client.metrics_core import Metric

from cdcwatch.failures import KnownExceptions, exception_class
from cdcwatch.families import FamilyBuilder
from cdcwatch.spark import (
    APPLY_LAG_SECONDS,
    BATCH_DURATION_SECONDS,
    BATCHES_TOTAL,
    CHANGES_APPLIED_TOTAL,
    CHANGES_TOTAL,
    CLOCK_SKEW_CHANGES_TOTAL,
    DUPLICATES_TOTAL,
    EVENTS_TOTAL,
    FRESHNESS_SECONDS,
    INPUT_ROWS_PER_SECOND,
    INPUT_ROWS_TOTAL,
    LAST_PROGRESS_TIMESTAMP_SECONDS,
    LOST_OFFSETS_TOTAL,
    MALFORMED_EVENTS_TOTAL,
    NEWEST_APPLIED_CHANGE_TIMESTAMP_SECONDS,
    NEWEST_APPLIED_HEARTBEAT_TIMESTAMP_SECONDS,
    PROCESSED_ROWS_PER_SECOND,
    QUERY_COMMIT_GROUP_INFO,
    QUERY_FAILURE_INFO,
    QUERY_STATE,
    SOURCE_OFFSETS_BEHIND_LATEST,
    SPARK_METRICS,
    STAGE_LATENCY_SECONDS,
    STALE_EVENTS_TOTAL,
)
from spark_listeners.latency import (
    MEASURED_STAGES,
    NEGATIVE_CODE,
    PER_CHANGE_STAGES,
    STAGE_CODES,
    STAGE_LATENCY_BUCKETS,
    TIMESTAMP_TYPES,
    stage_codes,
    stage_sum,
)

__all__ = ["BATCH_DURATION_BUCKETS", "SPARK_EXCEPTIONS", "CommitSpread", "Counts", "Histogram", "QueryState", "SinkOutcome",
           "SparkMetrics"]

BATCH_DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
QUERY_STATES = ("active", "terminated", "failed")

_STAGE_KEYS = (*MEASURED_STAGES, ("apply", ""))
"""The stage series in exposition order."""


SPARK_EXCEPTIONS = KnownExceptions(
    names=frozenset({"KafkaIllegalStateException", "DatabaseError", "StreamingQueryException", "PythonException",
                     "SparkException", "OutOfMemoryError", "IOException", "OperationalError", "ProgrammingError",
                     "IntegrityError", "KafkaException", "TimeoutException", "IllegalStateException"}),
    wrappers=frozenset({"StreamingQueryException", "PythonException", "SparkException"}),
    packages={"psycopg.errors": "DatabaseError", "psycopg2.errors": "DatabaseError"})
"""Exception class names the `exception` label may take (a psycopg error of the sink reads DatabaseError;
Spark's Kafka source reports records lost before they were read as KafkaIllegalStateException);
anything else reads `other`."""


@dataclass(frozen=True)
class CommitSpread:
    """Source commit times (Unix seconds) of the row changes a sink took as new in one batch: how many, the oldest,
    the 1st and 50th percentile and the newest. `changes` 0: the batch held only re-deliveries."""

    changes: int = 0
    oldest: float | None = None
    p01: float | None = None
    p50: float | None = None
    newest: float | None = None

    @classmethod
    def of(cls, commit_times: Iterable[float]) -> CommitSpread:
        """The spread of a sink's new changes' commit times (nearest-rank percentiles)."""
        times = sorted(commit_times)
        if not times:
            return cls()
        def rank(q: float) -> float:
            return times[max(math.ceil(q * len(times)) - 1, 0)]
        return cls(len(times), times[0], rank(0.01), rank(0.5), times[-1])


class Counts(NamedTuple):
    """What a sink did with one table's row changes (or a batch's): see `SinkOutcome`."""

    applied: int = 0
    duplicates: int = 0
    stale: int = 0


@dataclass
class SinkOutcome:
    """What a sink did with one batch's row changes.

    `commits`: the commit times of the changes it took as new (not duplicates). A sink that reports them (with
    the batch id, `SparkMetrics.sink`) makes the apply lag replay-aware: the batch's lag is measured on those
    alone, so a re-delivery after a connector restart never raises it. None: the lag is measured on every
    change the batch read.

    `stages`: the latency by stage of those new changes, keyed as `merge_summaries` returns a batch: `changes` (how
    many), `stage_codes(stage)` ((bucket code, changes) pairs of capture, produce, queue) and
    `stage_sum(stage, timestamp_type)` (µs, negative ones as 0). Reported with the batch id, the stage
    histograms count those changes alone; None: every change the batch read."""

    applied: int = 0     # changed the target
    duplicates: int = 0  # key + source position already applied (redelivered)
    stale: int = 0       # older than what the target holds (out of order); never overwrote it
    commits: CommitSpread | None = None
    stages: Mapping[str, Any] | None = None
    tables: Mapping[str, Counts] | None = None
    """The counts by source table (they sum to the totals above); None: the totals alone, counted under table ""."""

    @classmethod
    def of_tables(cls, tables: Mapping[str, Counts], commits: CommitSpread | None = None,
                  stages: Mapping[str, Any] | None = None) -> SinkOutcome:
        """The outcome whose totals are the sums of its tables' counts."""
        return cls(sum(c.applied for c in tables.values()), sum(c.duplicates for c in tables.values()),
                   sum(c.stale for c in tables.values()), commits, stages, dict(tables))

    def by_table(self) -> Mapping[str, Counts]:
        return self.tables if self.tables is not None else {"": Counts(self.applied, self.duplicates, self.stale)}


@dataclass
class Histogram:
    """Cumulative bucket counts (`STAGE_LATENCY_BUCKETS`), count and sum of one stage; `negative`: the changes
    that came out below 0 and were counted as 0."""

    buckets: list[int] = field(default_factory=lambda: [0] * len(STAGE_LATENCY_BUCKETS))
    count: int = 0
    sum: float = 0.0
    negative: int = 0

    def add(self, buckets: Iterable[int], count: int, total: float, negative: int) -> None:
        """Add counts already bucketed (cumulative, one per bound)."""
        self.buckets = [have + new for have, new in zip(self.buckets, buckets, strict=True)]
        self.count += count
        self.sum += total
        self.negative += negative

    def observe(self, seconds: float, times: int = 1) -> None:
        """`times` changes of `seconds` each (a negative value counts as 0 and as negative)."""
        self.add([times if max(seconds, 0.0) <= bound else 0 for bound in STAGE_LATENCY_BUCKETS], times,
                 max(seconds, 0.0) * times, times if seconds < 0 else 0)


@dataclass
class QueryState:
    name: str
    state: str = "active"
    exception: str | None = None
    server: str = ""
    batches: int = 0
    input_rows: int = 0
    input_rows_per_second: float = 0.0
    processed_rows_per_second: float = 0.0
    duration_buckets: list[int] = field(default_factory=lambda: [0] * len(BATCH_DURATION_BUCKETS))
    duration_count: int = 0
    duration_sum: float = 0.0
    events: int = 0
    changes: int = 0
    malformed: int = 0
    lost_offsets: int = 0
    apply_lag: dict[str, float] = field(default_factory=dict)  # "max", "50", "99"
    newest_change: float | None = None
    newest_heartbeat: float | None = None
    counts: dict[str, Counts] = field(default_factory=dict)  # source table ("": not told) -> counts so far
    offsets_behind: dict[str, float] = field(default_factory=dict)  # topic -> records
    last_progress: float | None = None
    stages: dict[tuple[str, str], Histogram] = field(default_factory=dict)  # (stage, timestamp_type) -> histogram
    commit_groups: set[str] = field(default_factory=set)

    def observe_duration(self, seconds: float) -> None:
        self.duration_count += 1
        self.duration_sum += seconds
        for index, bound in enumerate(BATCH_DURATION_BUCKETS):
            if seconds <= bound:
                self.duration_buckets[index] += 1

    @property
    def newest_applied(self) -> float | None:
        stamps = [s for s in (self.newest_change, self.newest_heartbeat) if s is not None]
        return max(stamps) if stamps else None


class SparkMetrics:
    """Thread-safe store of every query's state; a prometheus_client collector."""

    def __init__(self, clock: Any = time.time) -> None:
        self._queries: dict[str, QueryState] = {}
        self._sink_reports: dict[tuple[str, int], SinkOutcome] = {}
        """(query, batch id) → what the sink reported of that batch, until its progress arrives."""
        self._lock = threading.Lock()
        self._clock = clock

    def query(self, name: str) -> QueryState:
        with self._lock:
            return self._queries.setdefault(name, QueryState(name))

    # fed by the listener ---------------------------------------------------------------------------
    def started(self, name: str) -> None:
        state = self.query(name)
        state.state, state.exception = "active", None

    def commits_under(self, name: str, group: str) -> None:
        """Query `name`'s finished offsets are committed under consumer group `group` (for lag monitors)."""
        state = self.query(name)
        with self._lock:
            state.commit_groups.add(group)

    def terminated(self, name: str, exception: str | None) -> None:
        state = self.query(name)
        with self._lock:  # a batch the sink reported but whose progress never came still changed the target
            for key in sorted(k for k in self._sink_reports if k[0] == name):
                _count_sink(state, self._sink_reports.pop(key))
        state.state = "failed" if exception else "terminated"
        state.exception = exception_class(exception, SPARK_EXCEPTIONS) if exception else None

    def progress(self, name: str, progress: Mapping[str, Any], observed: Mapping[str, Any] | None) -> None:
        """One micro-batch's progress (`StreamingQueryProgress.json` as a dict) and its observed metrics."""
        now = self._clock()
        state = self.query(name)
        with self._lock:
            state.batches += 1
            state.input_rows += int(progress.get("numInputRows") or 0)
            state.input_rows_per_second = float(progress.get("inputRowsPerSecond") or 0.0)
            state.processed_rows_per_second = float(progress.get("processedRowsPerSecond") or 0.0)
            duration_ms = (progress.get("durationMs") or {}).get("triggerExecution")
            if duration_ms is not None:
                state.observe_duration(duration_ms / 1000)
            state.offsets_behind = _offsets_behind(progress.get("sources") or ())
            state.lost_offsets += _offsets_skipped(progress.get("sources") or ())
            state.last_progress = now
            report = self._sink_report(state, progress.get("batchId"))
            if report is not None:
                _count_sink(state, report)  # with the batch's observed counts: a scrape sees both or neither
            if observed:
                self._observed(state, observed, now, report.commits if report else None)
                # the stages of the sink's new changes where it reports them, else of every change the batch read
                staged = {**observed, **report.stages} if report and report.stages is not None else observed
                _measured_stages(state, staged)
                _apply_stage(state, progress, staged)

    def _sink_report(self, state: QueryState, batch_id: Any) -> SinkOutcome | None:
        """What the sink reported of batch `batch_id` (None: nothing); the counts of older batches whose progress
        never came are counted now, their commits and stages forgotten."""
        if not isinstance(batch_id, int):
            return None
        report = self._sink_reports.pop((state.name, batch_id), None)
        for key in sorted(k for k in self._sink_reports if k[0] == state.name and k[1] < batch_id):
            _count_sink(state, self._sink_reports.pop(key))
        return report

    def _observed(self, state: QueryState, observed: Mapping[str, Any], now: float,
                  commits: CommitSpread | None = None) -> None:
        state.events += int(observed.get("events") or 0)
        state.changes += int(observed.get("changes") or 0)
        state.malformed += int(observed.get("malformed") or 0)
        if commits is not None:  # the sink's new changes alone: re-deliveries do not count
            if commits.changes and commits.oldest is not None and commits.p01 is not None and commits.p50 is not None:
                state.apply_lag = {"max": now - commits.oldest, "99": now - commits.p01, "50": now - commits.p50}
        elif observed.get("oldest_commit") is not None:
            state.apply_lag = {"max": now - observed["oldest_commit"], "99": now - observed["p01_commit"],
                               "50": now - observed["p50_commit"]}
        if observed.get("newest_commit") is not None:
            state.newest_change = max(state.newest_change or 0.0, observed["newest_commit"])
        if observed.get("newest_heartbeat") is not None:
            state.newest_heartbeat = max(state.newest_heartbeat or 0.0, observed["newest_heartbeat"])
        low, high = observed.get("server_min"), observed.get("server_max")
        if low is not None:
            state.server = low if low == high else "mixed"

    # fed by the sink ---------------------------------------------------------------------------------
    def sink(self, name: str, outcome: SinkOutcome, batch_id: int | None = None) -> None:
        """A sink's outcome of batch `batch_id` (in `foreachBatch`, before the batch's progress arrives): its counts,
        and with `outcome.commits` / `outcome.stages` the changes the batch's apply lag / stage histograms are
        measured on. With the batch id, the counts are recorded when the batch's progress brings its observed
        counts, so no scrape sees a batch's duplicates without its changes; a second report of one batch replaces
        the first. Without, they count at once."""
        state = self.query(name)
        with self._lock:
            if batch_id is None:
                _count_sink(state, outcome)
            else:
                self._sink_reports[(name, batch_id)] = outcome

    # prometheus_client collector ---------------------------------------------------------------------
    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        now = self._clock()
        with self._lock:
            queries = [(s, sorted(s.commit_groups), dict(s.apply_lag), dict(s.counts), dict(s.offsets_behind), list(s.duration_buckets),
                        [(key, Histogram(list(h.buckets), h.count, h.sum, h.negative)) for key, h in sorted(
                            s.stages.items(), key=lambda item: _STAGE_KEYS.index(item[0]))])
                       for s in self._queries.values()]
        builder = FamilyBuilder()
        for spec in SPARK_METRICS.values():  # every family, in declaration order, even without a sample
            builder.family_of(spec)
        for state, groups, lag, tables, behind, buckets, stages in queries:
            query = {"query": state.name}
            series = {**query, "server": state.server}
            for each in QUERY_STATES:
                builder.add_spec(QUERY_STATE, float(each == state.state), query, state=each)
            if state.state == "failed":
                builder.add_spec(QUERY_FAILURE_INFO, 1.0, query, exception=state.exception or "other")
            for group in groups:
                builder.add_spec(QUERY_COMMIT_GROUP_INFO, 1.0, query, group=group)
            builder.add_spec(BATCHES_TOTAL, state.batches, query)
            builder.add_spec(INPUT_ROWS_TOTAL, state.input_rows, query)
            for spec, value in ((EVENTS_TOTAL, state.events), (CHANGES_TOTAL, state.changes),
                                (MALFORMED_EVENTS_TOTAL, state.malformed), (LOST_OFFSETS_TOTAL, state.lost_offsets)):
                builder.add_spec(spec, value, series)
            for table, counts in sorted((tables or {"": Counts()}).items()):  # zeros before a sink's first report
                for spec, value in zip((CHANGES_APPLIED_TOTAL, DUPLICATES_TOTAL, STALE_EVENTS_TOTAL), counts, strict=True):
                    builder.add_spec(spec, value, series, table=table)
            builder.add_spec(INPUT_ROWS_PER_SECOND, state.input_rows_per_second, query)
            builder.add_spec(PROCESSED_ROWS_PER_SECOND, state.processed_rows_per_second, query)
            for percentile, seconds in sorted(lag.items()):
                builder.add_spec(APPLY_LAG_SECONDS, max(seconds, 0.0), series, percentile=percentile)
            if state.newest_change is not None:
                builder.add_spec(NEWEST_APPLIED_CHANGE_TIMESTAMP_SECONDS, state.newest_change, series)
            if state.newest_heartbeat is not None:
                builder.add_spec(NEWEST_APPLIED_HEARTBEAT_TIMESTAMP_SECONDS, state.newest_heartbeat, series)
            if state.newest_applied is not None:
                builder.add_spec(FRESHNESS_SECONDS, max(now - state.newest_applied, 0.0), series)
            for topic, records in sorted(behind.items()):
                builder.add_spec(SOURCE_OFFSETS_BEHIND_LATEST, records, query, topic=topic)
            if state.last_progress is not None:
                builder.add_spec(LAST_PROGRESS_TIMESTAMP_SECONDS, state.last_progress, query)
            cumulative = [(str(bound), float(count)) for bound, count in zip(BATCH_DURATION_BUCKETS, buckets, strict=True)]
            builder.add_histogram(BATCH_DURATION_SECONDS, cumulative + [("+Inf", float(state.duration_count))],
                                  state.duration_sum, query)
            for (stage, timestamp_type), histogram in stages:
                builder.add_histogram(STAGE_LATENCY_SECONDS, [(str(bound), float(count)) for bound, count in zip(
                    STAGE_LATENCY_BUCKETS, histogram.buckets, strict=True)] + [("+Inf", float(histogram.count))],
                    histogram.sum, series, stage=stage, timestamp_type=timestamp_type)
                builder.add_spec(CLOCK_SKEW_CHANGES_TOTAL, histogram.negative, series, stage=stage,
                                 timestamp_type=timestamp_type)
        yield from builder.families()


def _count_sink(state: QueryState, outcome: SinkOutcome) -> None:
    for table, counts in outcome.by_table().items():
        held = state.counts.get(table, Counts())
        state.counts[table] = Counts(*(have + new for have, new in zip(held, counts, strict=True)))


def _measured_stages(state: QueryState, observed: Mapping[str, Any]) -> None:
    """capture, produce and queue of the batch's changes: changes per bucket code, and the sums."""
    for stage in PER_CHANGE_STAGES:
        changes: dict[int, list[int]] = {}  # timestamp type index -> changes per code
        for code, count in observed.get(stage_codes(stage)) or ():
            kind, bucket = divmod(round(code), STAGE_CODES)
            changes.setdefault(kind, [0] * STAGE_CODES)[bucket] += round(count)
        for kind, per_code in sorted(changes.items()):
            timestamp_type = TIMESTAMP_TYPES[kind] if stage != "capture" else ""
            negative = per_code[NEGATIVE_CODE]
            cumulative, buckets = negative, []  # a negative latency counts as 0 s: in every bucket
            for count in per_code[:len(STAGE_LATENCY_BUCKETS)]:
                cumulative += count
                buckets.append(cumulative)
            state.stages.setdefault((stage, timestamp_type), Histogram()).add(
                buckets, sum(per_code), float(observed.get(stage_sum(stage, timestamp_type)) or 0.0) / 1e6, negative)


def _apply_stage(state: QueryState, progress: Mapping[str, Any], observed: Mapping[str, Any]) -> None:
    """Every change of the batch spent the batch's start (its current_timestamp) → its end (trigger start +
    triggerExecution) in apply."""
    changes, started = int(observed.get("changes") or 0), observed.get("batch_time")
    trigger_ms = (progress.get("durationMs") or {}).get("triggerExecution")
    stamp = progress.get("timestamp")
    if not changes or started is None or trigger_ms is None or not isinstance(stamp, str):
        return
    try:
        trigger_start = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return
    seconds = round(trigger_start + trigger_ms / 1000 - float(started), 6)  # ms timestamps: no float noise at a bound
    state.stages.setdefault(("apply", ""), Histogram()).observe(seconds, changes)


def _offsets_behind(sources: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Per topic: latest offsets the source saw minus the offsets the batch read up to."""
    behind: dict[str, float] = {}
    for source in sources:
        latest, end = _offsets(source.get("latestOffset")), _offsets(source.get("endOffset"))
        if latest is None or end is None:
            continue
        for topic, partitions in latest.items():
            done = end.get(topic, {})
            behind[topic] = behind.get(topic, 0.0) + float(sum(max(int(o) - int(done.get(p, 0)), 0)
                                                                for p, o in partitions.items()))
    return behind


def _offsets_skipped(sources: Iterable[Mapping[str, Any]]) -> int:
    """Offsets a batch covered but did not read: with failOnDataLoss=false, records the broker deleted
    before the query read them (compacted or transactional topics skip offsets too)."""
    skipped = 0
    for source in sources:
        start, end = _offsets(source.get("startOffset")), _offsets(source.get("endOffset"))
        if start is None or end is None or set(end) != set(start) or any(
                set(partitions) != set(start[topic]) for topic, partitions in end.items()):
            continue  # a first batch, or new topics/partitions: their start is not known here
        covered = sum(int(o) - int(start[topic][p]) for topic, partitions in end.items() for p, o in partitions.items())
        skipped += max(covered - int(source.get("numInputRows") or 0), 0)
    return skipped


def _offsets(value: Any) -> dict[str, dict[str, int]] | None:
    """Kafka offsets JSON (`{"topic": {"0": 12}}`), as a string or already parsed; None if not that shape."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        return None
    return value
