"""The comparison of one table pair: passes of key-ordered chunks, narrowing, and confirmation by re-checks.

A pass walks the source's keys, then the target's (so rows only the target holds are found too), chunk by chunk.
For each chunk both sides give the count and checksum of their rows among the chunk's keys; a chunk that differs
is bisected (halves of its keys, digests again) down to a handful of keys, whose row hashes are fetched and
classified: **missing** in the target, **extra** in the target, **different**.

Such a row is only a *suspect*: on a moving pipeline it may simply not have been applied yet. It is re-checked
(both sides read again) every `settle_seconds`; it is dropped as soon as the sides agree, and it counts as
**diverged** once it still differs in `confirm_rechecks` re-checks in a row with neither side's row changed between
them. A row the source keeps changing is in flight and never confirmed; a row both sides leave alone for
`settle_seconds × confirm_rechecks` while they disagree is a divergence a pipeline with less lag than that would
have repaired. Re-deliveries (a replay after a crash) change the target and are settled the same way.

Where the pipeline's progress is measured (`freshness_url`), a re-check counts only once the target is known to hold
every change committed at the source up to the moment the source was read at the first check that found the two rows
as they are now (`Suspect.since`): the source row, unchanged since, was committed before then, so a target that still
differs is not waiting for it. `applied_through` is a source commit time (never a heartbeat's: see `freshness`), read
*before* the check's reads: a reading taken after the target's read could count a change applied in between, which
that read did not see. The moment compared with stays put while the rows do not change, so a pipeline lagging by more
than `settle_seconds` delays the confirmation (re-checks held back, `rechecks_held`) instead of preventing it, and a
stalled one delays it for as long as it stalls, without ever raising a false one.

Both catalogs are read again at the start of every pass: a column added or dropped on one side changes what is
compared from then on, and is reported as schema drift (`Drift`): columns only the source has (a sink that does not
evolve its table: their values never reach the target, and no row comparison can show it), columns only the target
has, and compared columns whose declared types differ (normalised to one text per type class, see `image`).

Every read is paid for from the side's row budget before the next read of that side.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, TypeVar

from cdcwatch.config import ReconcileConfig
from cdcwatch.tables.image import Column
from cdcwatch.tables.side import Digest, Key, Side, SideError

__all__ = ["DRIFT_KINDS", "KINDS", "LEAF_KEYS", "Budget", "Drift", "Reconciler", "State", "Stopped", "Suspect",
           "classify"]

log = logging.getLogger("cdcwatch.reconcile")

T = TypeVar("T")

Kind = Literal["missing", "extra", "different"]
KINDS: tuple[Kind, ...] = ("missing", "extra", "different")
LEAF_KEYS = 16
"""Bisection stops at this many keys and fetches their row hashes."""
DRIFT_KINDS = ("source_only", "target_only", "type_differs")


class Stopped(Exception):
    """The collector is closing: the pass ends where it is."""


def classify(source_hash: int | None, target_hash: int | None) -> Kind | None:
    """How a key's two row hashes (None: no such row) differ, or None when they agree."""
    if source_hash == target_hash:
        return None
    if target_hash is None:
        return "missing"
    if source_hash is None:
        return "extra"
    return "different"


class Budget:
    """A side's rows-per-second budget: each read is paid for by waiting before that side's next read."""

    def __init__(self, rows_per_second: float, wait: Callable[[float], bool], clock: Callable[[], float]) -> None:
        self.rows_per_second = rows_per_second
        self._wait = wait
        self._clock = clock
        self._free_at = clock()

    def before(self) -> None:
        delay = self._free_at - self._clock()
        if delay > 0 and self._wait(delay):
            raise Stopped

    def spend(self, rows: int) -> None:
        self._free_at = max(self._clock(), self._free_at) + rows / self.rows_per_second


@dataclass
class Suspect:
    """A key whose sides differed at the last check."""

    key: Key
    kind: Kind
    source_hash: int | None
    target_hash: int | None
    first_seen: float
    """Wall-clock time it was first found differing."""
    checked: float
    """Monotonic time of the last check."""
    since: float
    """Wall-clock time just after the source was read at the first check that found these two rows (source_hash,
    target_hash): the source row was committed before then. A re-check counts once the pipeline has applied every
    change committed up to this moment (`applied_through`)."""
    rechecks: int = 0
    """Re-checks in a row it still differed in, neither side changed."""
    confirmed: bool = False


@dataclass(frozen=True)
class Drift:
    """How the two tables' columns differ (`exclude_columns` left out), as of the last catalog read; None on a side
    without a catalog (the apply job's row images hold every source column)."""

    source_only: tuple[str, ...] = ()
    target_only: tuple[str, ...] = ()
    type_differs: tuple[str, ...] = ()
    """Compared columns whose declared types differ (`name: source type -> target type`)."""

    def counts(self) -> dict[str, int]:
        return {kind: len(getattr(self, kind)) for kind in DRIFT_KINDS}


@dataclass(frozen=True)
class State:
    """What a scrape reports, read at once under the lock."""

    diverged: dict[str, int]
    suspects: int
    oldest_divergence: float | None
    chunks_checked: int
    rows_read: dict[str, int]
    last_pass_end: float | None
    last_pass_seconds: float | None
    rechecks_held: int = 0
    """Re-checks of rows still differing, neither side changed, that did not count: the pipeline was not known to
    have applied the source's row yet."""
    applied_through: float | None = None
    """Source commit time up to which the target is known to hold every change (None: unknown; inf: not measured)."""
    gate_open: bool = True
    """Whether a re-check falling due now counts: the target is known to hold every change committed up to
    `settle_seconds` ago."""
    drift: Drift | None = None
    """The columns' drift (None before the catalogs were read, or on a target without a catalog)."""
    oldest_missing_column: float | None = None
    """Wall-clock time the longest-missing source column was first found missing in the target."""


class Reconciler:
    """One table pair's comparison state; `run_pass` and `recheck_due` run on the pair's thread, `state` anywhere."""

    def __init__(self, config: ReconcileConfig, source: Side, target: Side, wait: Callable[[float], bool],
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 applied_through: Callable[[], float | None] = lambda: float("inf")) -> None:
        self.config = config
        self.name = config.name
        self.sides = {"source": source, "target": target}
        self.budgets = {"source": Budget(config.source.rows_per_second, wait, clock),
                        "target": Budget(config.target.rows_per_second, wait, clock)}
        self.clock, self.wall = clock, wall
        self.both_answered: Callable[[], None] = lambda: None
        """Called whenever both sides have answered (a chunk compared, suspects re-read, a pass ended)."""
        self.applied_through = applied_through
        """Source commit time up to which the target holds every source change (None: unknown, so no re-check counts).
        Never waits long: it is asked before every round of re-checks and by every scrape."""
        self.suspects: dict[Key, Suspect] = {}
        self.chunks_checked = 0
        self.rechecks_held = 0
        self.rows_read_before = {"source": 0, "target": 0}
        """Rows read by the collector this one replaced at a reload (counters carry on)."""
        self.last_pass_end: float | None = None
        self.last_pass_seconds: float | None = None
        self.prepared = False
        self._compared: tuple[Column, tuple[Column, ...], Column, tuple[Column, ...]] | None = None
        self.shape_current = False
        """Whether the catalogs were read since the current pass began (they are read again at each pass's start)."""
        self.drift: Drift | None = None
        self.missing_since: dict[str, float] = {}
        """Source column → wall-clock time it was first found missing in the target."""
        self.asking: str | None = None
        """The side whose catalog `prepare` is reading (None: neither): the one a scrape names while it waits."""
        self.overflow_said = False
        self._lock = threading.Lock()

    # --- reads, each paid from its side's budget -------------------------------------------------------------------
    def _read(self, side: str, call: Callable[[], T]) -> T:
        self.budgets[side].before()
        reader = self.sides[side]
        before = reader.rows_read
        try:
            return call()
        finally:
            self.budgets[side].spend(reader.rows_read - before)

    def _digests(self, keys: Sequence[Key]) -> tuple[Digest, Digest]:
        both = (self._read("source", lambda: self.sides["source"].digest(keys)),
                self._read("target", lambda: self.sides["target"].digest(keys)))
        self.both_answered()
        return both

    def _hashes(self, keys: Sequence[Key]) -> tuple[dict[Key, int], dict[Key, int], float]:
        """Both sides' row hashes of `keys`, and the wall-clock time just after the source's were read."""
        source = self._read("source", lambda: self.sides["source"].row_hashes(keys))
        source_read = self.wall()
        target = self._read("target", lambda: self.sides["target"].row_hashes(keys))
        self.both_answered()
        return source, target, source_read

    # --- set-up -----------------------------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Read both catalogs; compare on the key and the columns both sides have (less `exclude_columns`), and note
        how the columns drift apart."""
        self.asking = "source"
        source_shape = self.sides["source"].describe()
        if source_shape is None:
            raise SideError("source", "the source must be a table")
        self.asking = "target"
        target_shape = self.sides["target"].describe()
        self.asking = None
        key_name = self.config.key or source_shape.key
        if key_name is None:
            raise SideError("source", f"{self.config.source.table} has no single-column primary key: set `key`")
        key = source_shape.columns.get(key_name)
        if key is None or key.type_class not in ("integer", "text"):
            raise SideError("source", f"key {key_name!r} is no integer or text column of {self.config.source.table}")
        excluded = set(self.config.exclude_columns) - {key_name}
        columns = [c for c in source_shape.columns.values() if c.name not in excluded]
        target_key: Column = key
        target_columns = columns
        drift: Drift | None = None
        if target_shape is not None:
            if key_name not in target_shape.columns:
                raise SideError("target", f"the target table has no key column {key_name!r}")
            target_key = target_shape.columns[key_name]
            drift = Drift(
                source_only=tuple(c.name for c in columns if c.name not in target_shape.columns),
                target_only=tuple(n for n in target_shape.columns if n not in source_shape.columns and n not in excluded),
                type_differs=tuple(f"{c.name}: {c.data_type} -> {target_shape.columns[c.name].data_type}" for c in columns
                                   if c.name in target_shape.columns and self._types_differ(c, target_shape.columns[c.name])))
            columns = [c for c in columns if c.name in target_shape.columns]
            target_columns = [target_shape.columns[c.name] for c in columns]
        compared = (key, tuple(columns), target_key, tuple(target_columns))
        if compared != self._compared:  # the first pass, or a column added, dropped or retyped on either side
            self.sides["source"].use(key, columns)
            self.sides["target"].use(target_key, target_columns)
            log.info("%s: comparing on key %s, columns %s", self.name, key_name, ", ".join(c.name for c in columns))
        self._compared = compared
        self._note_drift(drift)
        self.prepared = self.shape_current = True

    def _types_differ(self, source: Column, target: Column) -> bool:
        """Different type classes; on one engine, any other declared type too (across engines each names its types its
        own way: `integer` and `int` compare as one class, see the reference's table of type classes)."""
        if source.type_class != target.type_class:
            return True
        return self.config.source.engine == self.config.target.engine and source.data_type != target.data_type

    def _note_drift(self, drift: Drift | None) -> None:
        now = self.wall()
        with self._lock:
            before, self.drift = self.drift, drift
            missing = drift.source_only if drift is not None else ()
            self.missing_since = {name: self.missing_since.get(name, now) for name in missing}
        if drift is not None and drift != before and any(drift.counts().values()):
            log.warning("%s: the tables' columns differ (compared on the columns both have): source only %s; target "
                        "only %s; types differ %s", self.name, ", ".join(drift.source_only) or "-",
                        ", ".join(drift.target_only) or "-", "; ".join(drift.type_differs) or "-")
        elif before is not None and drift is not None and not any(drift.counts().values()) and any(before.counts().values()):
            log.info("%s: the tables' columns agree again", self.name)

    # --- a pass -----------------------------------------------------------------------------------------------------
    def run_pass(self) -> None:
        """One full pass: the source's keys, then the target's, re-checking due suspects between chunks."""
        if not self.shape_current:
            self.prepare()
        started_clock, chunk = self.clock(), self.config.chunk_rows
        for walker in ("source", "target"):
            after: Key | None = None
            while True:
                keys = self._read(walker, lambda: self.sides[walker].keys_after(after, chunk))  # noqa: B023
                if not keys:
                    break
                self.compare(keys)
                self.recheck_due()
                after = keys[-1]
                if len(keys) < chunk:
                    break
        self._end_pass(started_clock)

    def _end_pass(self, started_clock: float) -> None:
        self.recheck_due()
        self.both_answered()
        with self._lock:
            self.last_pass_end = self.wall()
            self.last_pass_seconds = self.clock() - started_clock
        self.shape_current = False  # the next pass reads the catalogs again
        self._log_confirmed()

    def compare(self, keys: Sequence[Key]) -> None:
        """Compare one chunk; narrow it down when the sides differ."""
        source, target = self._digests(keys)
        with self._lock:
            self.chunks_checked += 1
        if source != target:
            self._narrow(keys)

    def _narrow(self, keys: Sequence[Key]) -> None:
        if len(keys) <= LEAF_KEYS:
            source, target, source_read = self._hashes(keys)
            for key in keys:
                kind = classify(source.get(key), target.get(key))
                if kind is not None:
                    self._suspect(key, kind, source.get(key), target.get(key), source_read)
            return
        middle = len(keys) // 2
        for half in (keys[:middle], keys[middle:]):
            source_digest, target_digest = self._digests(half)
            if source_digest != target_digest:
                self._narrow(half)

    def _suspect(self, key: Key, kind: Kind, source_hash: int | None, target_hash: int | None,
                 source_read: float) -> None:
        with self._lock:
            if key in self.suspects:
                return  # already being re-checked
            if len(self.suspects) >= self.config.max_suspects:
                if not self.overflow_said:
                    log.warning("%s: more than %d differing rows: the rest are left for later passes (max_suspects)",
                                self.name, self.config.max_suspects)
                    self.overflow_said = True
                return
            self.suspects[key] = Suspect(key, kind, source_hash, target_hash, self.wall(), self.clock(), source_read)

    # --- confirmation -----------------------------------------------------------------------------------------------
    def recheck_due(self) -> None:
        """Read both sides again for the suspects last checked `settle_seconds` ago or more."""
        now = self.clock()
        with self._lock:
            due = [s.key for s in self.suspects.values() if now - s.checked >= self.config.settle_seconds]
        if not due:
            self.applied_through()  # keeps the pipeline's reading fresh for the gate (and the scrape) meanwhile
            return
        for start in range(0, len(due), self.config.chunk_rows):
            keys = due[start:start + self.config.chunk_rows]
            through = self.applied_through()  # before the reads: what the target held by then, it holds at its read
            source, target, source_read = self._hashes(keys)
            checked = self.clock()
            with self._lock:
                for key in keys:
                    suspect = self.suspects[key]
                    self._recheck(suspect, source.get(key), target.get(key), through, source_read)
                    suspect.checked = checked

    def _recheck(self, suspect: Suspect, source_hash: int | None, target_hash: int | None, through: float | None,
                 source_read: float) -> None:
        kind = classify(source_hash, target_hash)
        if kind is None:
            if suspect.confirmed:
                log.info("%s: key %s agrees again (was %s)", self.name, suspect.key, suspect.kind)
            del self.suspects[suspect.key]
            return
        if (source_hash, target_hash) != (suspect.source_hash, suspect.target_hash):  # a side changed: in flight
            suspect.kind, suspect.source_hash, suspect.target_hash = kind, source_hash, target_hash
            suspect.rechecks, suspect.confirmed, suspect.since = 0, False, source_read
        elif through is not None and through >= suspect.since:
            suspect.rechecks += 1
            suspect.confirmed = suspect.confirmed or suspect.rechecks >= self.config.confirm_rechecks
        else:  # the pipeline may still be delivering the source's row: the re-check neither counts nor starts over
            self.rechecks_held += 1

    def _log_confirmed(self) -> None:
        """The confirmed divergences' key range per kind and their first keys, for the on-call to find the rows."""
        with self._lock:
            confirmed = [s for s in self.suspects.values() if s.confirmed]
        for kind in KINDS:
            keys = sorted((s.key for s in confirmed if s.kind == kind), key=lambda k: (isinstance(k, str), k))
            if keys:
                shown = ", ".join(map(str, keys[:self.config.max_logged_keys]))
                more = f" (+{len(keys) - self.config.max_logged_keys} more)" if len(keys) > self.config.max_logged_keys else ""
                log.warning("%s: %d rows diverged (%s in the target), keys %s..%s: %s%s", self.name, len(keys), kind,
                            keys[0], keys[-1], shown, more)

    def carry_on(self, previous: Reconciler) -> None:
        """Continue from where `previous` (the same pair's comparison before a reload) is: its suspects, confirmed
        or still being re-checked, its counters and its last pass."""
        with previous._lock:  # one consistent copy: the suspects and the counters as of the same moment
            suspects = {key: replace(suspect) for key, suspect in previous.suspects.items()}
            overflow_said, chunks_checked, rechecks_held = previous.overflow_said, previous.chunks_checked, previous.rechecks_held
            rows_read = {side: previous.rows_read_before[side] + reader.rows_read for side, reader in previous.sides.items()}
            last_pass_end, last_pass_seconds = previous.last_pass_end, previous.last_pass_seconds
            missing_since, drift = dict(previous.missing_since), previous.drift
        with self._lock:
            self.missing_since, self.drift = missing_since, drift
            self.suspects = suspects
            self.overflow_said = overflow_said
            self.chunks_checked, self.rechecks_held = chunks_checked, rechecks_held
            self.rows_read_before = rows_read
            self.last_pass_end, self.last_pass_seconds = last_pass_end, last_pass_seconds

    def state(self) -> State:
        through = self.applied_through()
        gate_open = through is not None and through >= self.wall() - self.config.settle_seconds
        with self._lock:
            confirmed = [s for s in self.suspects.values() if s.confirmed]
            return State(
                diverged={kind: sum(s.kind == kind for s in confirmed) for kind in KINDS},
                suspects=len(self.suspects) - len(confirmed),
                oldest_divergence=min((s.first_seen for s in confirmed), default=None),
                chunks_checked=self.chunks_checked,
                rows_read={side: self.rows_read_before[side] + reader.rows_read for side, reader in self.sides.items()},
                last_pass_end=self.last_pass_end, last_pass_seconds=self.last_pass_seconds,
                rechecks_held=self.rechecks_held, applied_through=through, gate_open=gate_open, drift=self.drift,
                oldest_missing_column=min(self.missing_since.values(), default=None))
