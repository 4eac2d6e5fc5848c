"""Flow control on the caller's transaction: hold, release and admit attempts (issue 16).

PostgreSQL is the record: an attempt holding a key has a ``flow_slots`` row, one
waiting for it a ``flow_waiters`` row, a start on a rated key a ``flow_starts`` row.
The engine holds the dispatches that need a key and releases the slots of attempts that
ended, in the transaction that decided them, then admits (:func:`admit_waiting`); the
beat admits once a tick whatever waits (a rate's window moves on, a limit was raised, a
run was deleted). Which waiters start is the pure core's decision
(``common.domain.flow.admit``).

Admissions on a key are serialized by a transaction-level advisory lock per key, taken
in key order; a candidate's other keys are only tried (``pg_try_advisory_xact_lock``),
so two passes never wait on each other in a cycle.
"""

from __future__ import annotations

import functools
import uuid
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

from psycopg import Connection

from common.domain.flow import Candidate, admit, lane_room, lanes
from common.domain.flow_spec import KEY, RATE, TENANT
from common.persistence.arrays import literal, literals
from common.persistence.pipelined import Executes, Rows
from common.persistence.queries import (
    FLOW_CANDIDATES,
    FLOW_RATE_USAGE,
    FLOW_USAGE,
    HELD_FLOW_SLOTS,
    INSERT_FLOW_WAITERS,
    LOCK_FLOW_KEYS,
    PIN_INDEX,
    PIN_ORDER,
    PIN_PLAN,
    READ_FLOW_LIMITS,
    RELEASE_FLOW,
    TAKE_FLOW_SLOTS,
    TRY_LOCK_FLOW_KEY,
    UNPIN_INDEX,
    UNPIN_ORDER,
    UNPIN_PLAN,
)

# How many waiters of each tenant on a key the beat's pass looks at; the engine's looks
# at as many as it could admit (what it released and what it holds), and a few more.
PER_TENANT = 256
AT_LEAST = 8
# Lanes (``common.domain.flow.lanes``): a concurrency limit of n >= LANES_FROM lets a
# lane take up to n attempts, at most LANE_DEPTH, fewer for a key whose attempts run
# long (``common.domain.flow.fitted_depth``), UNTIMED_LANE_DEPTH for a key none of whose
# attempts has ended yet (its tasks may be slow: a lane gives back what it has not begun
# within 200 ms). A lane is one broker message (a worker pays ~2 ms of CPU a message
# here, so a fan-out of short tasks needs long lanes: 8 made a limit of 50 run at 0.6 of
# no limit, 32 at 0.835, 64 at 0.855: docs/decisions.md), and it costs priority its
# length: an urgent task waits for a lane to end while the others go on, about as many
# starts as a lane is long, a round of the limit at most, and never more than the
# give-back time. Narrow limits, where one start matters, get none.
LANES_FROM = 8
LANE_DEPTH = 64
UNTIMED_LANE_DEPTH = 32
# How old a process's copy of the operators' limits may be (``FlowGate.limits``): a
# change takes effect within it.
LIMITS_TTL = timedelta(seconds=1)


@dataclass(frozen=True)
class KeyNeed:
    """A key an attempt needs, with the limit (and a rate's window) its task states."""

    key: str
    limit: int | None = None
    per_s: float | None = None


@dataclass(frozen=True)
class Waiter:
    """A READY attempt that needs keys before it may be dispatched."""

    task_run_id: uuid.UUID
    run_id: uuid.UUID
    task: str
    attempt: int
    tenant: str
    priority: int
    needs: tuple[KeyNeed, ...]


@dataclass(frozen=True)
class Admitted:
    """A waiter that may go now: its slots are taken in this transaction.

    ``lane``: its lane's lead, itself for the lead (a lane's attempts go in one message
    and run one after another); None for an attempt alone.
    """

    task_run_id: uuid.UUID
    run_id: uuid.UUID
    task: str
    attempt: int
    lane: uuid.UUID | None = None


# What may share a lane, for a waiter's run and task (``Candidate.group``); None: alone.
LaneGroup = Callable[[uuid.UUID, str], Hashable | None]
# How long a lane on a key may be, for the key (``common.domain.flow.fitted_depth``).
LaneDepth = Callable[[str], int]


@dataclass(frozen=True)
class OperatorLimits:
    """The ``flow_limits`` rows: limits (and rate windows) by key, tenants' weights."""

    limits: dict[str, tuple[int, float | None]] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def read(conn: Connection[Any]) -> OperatorLimits:
        """Read every row (a handful: one per limited type, tenant or key)."""
        limits: dict[str, tuple[int, float | None]] = {}
        weights: dict[str, int] = {}
        for key, limit, per_s, weight in conn.execute(READ_FLOW_LIMITS):
            if limit is not None:
                limits[key] = (limit, per_s)
            if weight is not None:
                weights[key.removeprefix(TENANT)] = weight
        return OperatorLimits(limits, weights)


@dataclass(frozen=True)
class Slots:
    """The rows an admission writes, in the transaction that decided it.

    A slot per key of each admitted attempt (rate keys too: they mark it admitted; one
    admitted in a lane names the lane's lead), a start per rated key, and their waits gone. The
    engine writes them in its batch's pipeline (``scheduler.engine.writer``), the beat at
    once (:meth:`write`).
    """

    slots: list[tuple[str, uuid.UUID, int, str, datetime, uuid.UUID | None]] = field(
        default_factory=list)
    starts: list[tuple[str, datetime]] = field(default_factory=list)
    admitted: list[uuid.UUID] = field(default_factory=list)

    def write(self, cur: Executes) -> None:
        """One statement, none when nothing was admitted."""
        if self.admitted:
            cur.execute(PIN_INDEX)
            cur.execute(TAKE_FLOW_SLOTS, literals([
                self.admitted, *_columns(self.slots, 6), *_columns(self.starts, 2)]))
            cur.execute(UNPIN_INDEX)

    def __add__(self, other: Slots) -> Slots:
        return Slots(self.slots + other.slots, self.starts + other.starts,
                     self.admitted + other.admitted)


@dataclass(frozen=True)
class Admission:
    """What a pass decided: who goes, why each one looked at still waits, what to write.

    ``waiting`` are the attempts of the pass's ``hold`` that wait (those already holding
    every key they need go at once); ``take`` must be written in the same transaction.
    """

    admitted: list[Admitted]
    waiting_for: dict[uuid.UUID, str]
    waiting: set[uuid.UUID] = field(default_factory=set)
    take: Slots = field(default_factory=Slots)


def admit_waiting(
    conn: Connection[Any], limits: OperatorLimits, now: datetime, turns: dict[str, str], *,
    keys: Iterable[str] = (), release: Mapping[uuid.UUID, Sequence[KeyNeed]] | None = None,
    hold: Sequence[Waiter] = (), per_tenant: int = PER_TENANT,
) -> Admission:
    """Release, hold and admit on ``keys`` and the keys of ``release`` and ``hold``.

    ``release`` maps attempts that left flight to the keys they needed: their slots and
    waits go. ``hold`` are dispatches that need keys: those not holding all of them wait.
    Then the waiters of every key at stake are admitted as far as there is room; the
    slots they take are in :attr:`Admission.take`, for the caller to write.

    All of it is read in one round trip (the keys' locks first, so that every read sees
    what the last admission on them committed); :class:`PendingAdmission` sends it in
    a pipeline the caller has open. Only what that read could not foresee costs another:
    a candidate's keys beyond those locked, a rate window nobody here stated, a released
    slot of a key no longer limited.

    ``turns`` maps each set of keys to the tenant served last on it (the caller keeps
    it); ``per_tenant`` bounds the waiters of each tenant and key looked at.
    """
    with conn.pipeline():
        pending = PendingAdmission.send(conn, limits, now, keys=keys, release=release,
                                        hold=hold, per_tenant=per_tenant)
    return pending.decide(conn, turns)


@dataclass
class PendingAdmission:
    """An admission's read, sent in the caller's pipeline and not yet decided.

    The engine sends it with its runs' lock when it applied a batch to runs it had
    cached (``scheduler.engine.batch``), which saves the read its own round trip.
    """

    limits: OperatorLimits
    now: datetime
    per_tenant: int
    locked: list[str]
    sent: _Sent

    @staticmethod
    def send(
        conn: Executes, limits: OperatorLimits, now: datetime, *,
        keys: Iterable[str] = (), release: Mapping[uuid.UUID, Sequence[KeyNeed]] | None = None,
        hold: Sequence[Waiter] = (), per_tenant: int = PER_TENANT,
    ) -> PendingAdmission:
        """Send the locks, release, hold and reads of :func:`admit_waiting`; read nothing."""
        release = release or {}
        known = [n for ns in release.values() for n in ns] + [n for w in hold for n in w.needs]
        locked = sorted(set(keys) | {n.key for n in known})
        sent = _Sent.send(conn, locked, release, hold, windows=_windows(known, limits),
                          now=now, per_tenant=per_tenant)
        return PendingAdmission(limits, now, per_tenant, locked, sent)

    def decide(
        self, conn: Connection[Any], turns: dict[str, str], lane_group: LaneGroup | None = None,
        lane_depth: LaneDepth | None = None,
    ) -> Admission:
        """Read what was sent and decide; released keys not locked get a pass of their own.

        With ``lane_group``, a backlog on a wide concurrency limit is admitted in lanes
        (``common.domain.flow.lanes``) among the waiters it groups together, each at most
        ``lane_depth`` of its key long (else ``LANE_DEPTH``).
        """
        read = self.sent.read()
        admission = _decide(conn, read, self.limits, self.now, turns, lane_group=lane_group,
                            lane_depth=lane_depth,
                            whole=len(read.rows) < self.per_tenant,
                            busy=self.per_tenant >= PER_TENANT,
                            unread={w.task_run_id: w.needs for w in self.sent.hold})
        extra = read.released - set(self.locked)
        if not extra:
            return admission
        more = admit_waiting(conn, self.limits, self.now, turns, keys=extra,
                             per_tenant=self.per_tenant)
        return Admission(admission.admitted + more.admitted,
                         {**admission.waiting_for, **more.waiting_for}, admission.waiting,
                         admission.take + more.take)


@dataclass
class _Read:
    """What the pipelined read of an admission found."""

    locked: list[str]
    released: set[str]
    waiting: set[uuid.UUID]
    rows: list[Any]
    used: dict[str, int]
    started: dict[str, int]
    rated: dict[tuple[str, float], int]


@dataclass
class _Sent:
    """The cursors of an admission's read, answered when the pipeline syncs."""

    locked: list[str]
    hold: Sequence[Waiter]
    attempts: dict[uuid.UUID, int]
    released: Rows | None
    holding: Rows | None
    candidates: Rows | None
    usage: Rows | None
    rates: Rows | None

    @staticmethod
    def send(
        conn: Executes, locked: list[str], release: Mapping[uuid.UUID, Sequence[KeyNeed]],
        hold: Sequence[Waiter], *, windows: set[tuple[str, float]], now: datetime,
        per_tenant: int,
    ) -> _Sent:
        """Lock, release, hold, then read candidates and usage, in the open pipeline."""
        attempts = {w.task_run_id: w.attempt for w in hold}
        keys = literal(locked)
        if locked:
            conn.execute(LOCK_FLOW_KEYS, (keys,))
        released = None
        if release:
            conn.execute(PIN_INDEX)
            released = conn.execute(RELEASE_FLOW, {"ids": literal(release)})
            conn.execute(UNPIN_INDEX)
        holding = conn.execute(HELD_FLOW_SLOTS, {"ids": literal(attempts)}) if hold else None
        if hold:
            conn.execute(INSERT_FLOW_WAITERS, literals(_waiter_columns(hold, now)))
        candidates = usage = None
        if locked:
            candidates, usage = in_key_order(
                conn, (FLOW_CANDIDATES, (keys, per_tenant)), (FLOW_USAGE, (keys,)))
        return _Sent(locked, hold, attempts, released, holding, candidates, usage,
                     _rate_usage(conn, windows, now))

    def read(self) -> _Read:
        """What the server answered (the pipeline has synced)."""
        held: dict[uuid.UUID, set[str]] = defaultdict(set)
        for task_run_id, attempt, key in _rows(self.holding):
            if self.attempts[task_run_id] == attempt:
                held[task_run_id].add(key)
        used, started = _usage(_rows(self.usage))
        return _Read(
            self.locked, {row[0] for row in _rows(self.released)},
            {w.task_run_id for w in self.hold
             if not {n.key for n in w.needs} <= held[w.task_run_id]},
            _rows(self.candidates), used, started, _rated(self.rates),
        )


def _rows(cursor: Rows | None) -> list[Any]:
    return cursor.fetchall() if cursor is not None else []


def in_key_order(conn: Executes, *statements: tuple[str, Any]) -> list[Rows]:
    """Run ``statements`` (each with its parameters), reads of a flow queue by key.

    Between ``PIN_ORDER`` and ``UNPIN_ORDER`` (``common.persistence.queries`` says why:
    the key's order index), and on their generic plans (``PIN_PLAN``). In a pipeline,
    the cursors' rows come with the pipeline's others.
    """
    conn.execute(PIN_ORDER)
    conn.execute(PIN_PLAN)
    cursors: list[Rows] = [conn.execute(query, params) for query, params in statements]
    conn.execute(UNPIN_PLAN)
    conn.execute(UNPIN_ORDER)
    return cursors


def _decide(
    conn: Connection[Any], read: _Read, limits: OperatorLimits, now: datetime,
    turns: dict[str, str], *, lane_group: LaneGroup | None = None,
    lane_depth: LaneDepth | None = None, whole: bool = True, busy: bool = False,
    unread: Mapping[uuid.UUID, Sequence[KeyNeed]] | None = None,
) -> Admission:
    """Which of the candidates read go (the pure core's answer), and why the rest wait.

    Lanes open only the slots they fill (``lane_room``) when the pass read part of a
    backlog and the engine is ``busy`` (its batch released so many that the read hit
    ``PER_TENANT``): then the next batch, which fills the slots left, is milliseconds
    away. A quiet batch gives every free slot an attempt: its tasks may run long (a
    lane of them would be given back), and the next batch may be as far off.

    ``unread`` are the needs of the batch's held dispatches: those beyond what the pass
    read wait too, and say why as those read do.
    """
    if not read.rows:
        return Admission([], {}, read.waiting)
    waiters = list({row[1]: row for row in read.rows}.values())
    needs = {row[1]: _row_needs(row) for row in waiters}
    usable = set(read.locked) | _more_keys(conn, read, {n.key for ns in needs.values()
                                                        for n in ns} - set(read.locked))
    candidates = _candidates(waiters, needs, usable, lane_group)
    limits = _known_to_bound(conn, limits, needs)
    room = _room(conn, read, needs, limits, now)
    scope = ",".join(read.locked)
    free, depths, laning = _giving(room, candidates, lane_depth,
                                   fill_lanes=lane_group is not None and not whole and busy)
    decided = admit(candidates, free, limits.weights, read.started, turns.get(scope))
    if decided.last_turn is not None:
        turns[scope] = decided.last_turn
    for candidate in decided.admitted:
        for key in candidate.keys:
            if key in room:
                room[key].used += 1
    def row_of(candidate: Candidate) -> Any:
        return waiters[cast(int, candidate.id)]  # its place in ``waiters`` (``_candidates``)

    chosen = [(row_of(c), row_of(lane[0])[1] if len(lane) > 1 else None)
              for lane in lanes(decided.admitted, candidates, depths, whole=whole)
              for c in lane]
    return Admission(
        [Admitted(row[1], row[2], row[3], row[4], lane) for row, lane in chosen],
        _reasons({**(unread or {}), **needs}, room, {row[1] for row, _ in chosen}, usable,
                 laning=laning),
        read.waiting, _slots(chosen, needs, now),
    )


# A waiter row's needs: its keys, stated limits and windows (a pass's rows share a few).
_key_need = functools.lru_cache(maxsize=1024)(KeyNeed)


def _row_needs(row: Sequence[Any]) -> tuple[KeyNeed, ...]:
    return tuple(_key_need(key, limit, per_s)
                 for key, limit, per_s in zip(row[8], row[9], row[10], strict=True))


def _candidates(
    waiters: Sequence[Any], needs: Mapping[uuid.UUID, Sequence[KeyNeed]], usable: set[str],
    lane_group: LaneGroup | None,
) -> list[Candidate]:
    """The waiters read whose keys are all at hand, as the pure core sees them.

    Each is named by its place in ``waiters``, and its lane group by a number: the core
    hashes ids and groups a dozen times a waiter, and a UUID's hash is Python code (a
    pass over 256 waiters took 3.1 ms with the UUIDs, 2.6 with places).
    """
    groups: dict[Hashable, int] = {}
    out = []
    for place, row in enumerate(waiters):
        keys = tuple([need.key for need in needs[row[1]]])
        if not usable.issuperset(keys):
            continue
        group = lane_group(row[2], row[3]) if lane_group is not None else None
        out.append(Candidate(
            id=place, tenant=row[5], priority=row[6], order=row[7], keys=keys,
            group=None if group is None else groups.setdefault(group, len(groups))))
    return out


@dataclass
class _Room:
    """A key's limit, its usage and its free starts; ``per_s`` for a rate."""

    limit: int
    used: int
    per_s: float | None = None

    @property
    def free(self) -> int:
        return self.limit - self.used

    def describe(self, key: str) -> str:
        name = key.removeprefix(KEY).removeprefix(RATE)
        if self.per_s is not None:
            return f"rate {name} {self.limit}/{self.per_s:g}s"
        return f"concurrency {name} {self.used}/{self.limit}"


def _giving(
    room: Mapping[str, _Room], candidates: Sequence[Candidate], lane_depth: LaneDepth | None,
    *, fill_lanes: bool,
) -> tuple[dict[str, int], dict[str, int], set[str]]:
    """The slots each key gives now, its lanes' depth, and the keys cut.

    With ``fill_lanes`` a key gives only the slots its candidates fill as lanes
    (``lane_room``); the keys so cut say their usage to those left waiting.
    """
    free, depths = {k: max(0, r.free) for k, r in room.items()}, _depths(room, lane_depth)
    if fill_lanes:
        free = lane_room(candidates, free, depths)
    return free, depths, {k for k, r in room.items() if free[k] < r.free}


def _depths(room: Mapping[str, _Room], lane_depth: LaneDepth | None) -> dict[str, int]:
    """How long a lane each limited key allows.

    A rate none (its starts are counted at admission, in the window then); a concurrency
    limit of n up to n (and ``lane_depth`` of the key, else LANE_DEPTH), none under
    LANES_FROM.
    """
    return {key: 1 if r.per_s is not None or r.limit < LANES_FROM
            else min(lane_depth(key) if lane_depth else LANE_DEPTH, r.limit)
            for key, r in room.items()}


def _known_to_bound(
    conn: Connection[Any], limits: OperatorLimits, needs: Mapping[uuid.UUID, Sequence[KeyNeed]],
) -> OperatorLimits:
    """``limits``, read again if a waiter needs a key nobody here knows a bound for.

    Such a waiter was held by a process that knew an operator's limit on the key (only
    operators limit types and tenants); this one's copy is older. Admitting it as
    unlimited would run past the limit for up to a second; reading the small table once
    more settles it (after a ``limit delete``, to admit it).
    """
    unbounded = any(n.limit is None and n.key not in limits.limits
                    for ns in needs.values() for n in ns)
    return OperatorLimits.read(conn) if unbounded else limits


def _windows(known: Iterable[KeyNeed], limits: OperatorLimits) -> set[tuple[str, float]]:
    """The rate windows to count starts in, as far as they are known before reading."""
    windows = set()
    for need in known:
        per = limits.limits[need.key][1] if need.key in limits.limits else need.per_s
        if per is not None:
            windows.add((need.key, per))
    return windows


def _rate_usage(
    conn: Executes, windows: set[tuple[str, float]], now: datetime
) -> Rows | None:
    if not windows:
        return None
    names, pers = zip(*sorted(windows), strict=True)
    rows: Rows = conn.execute(FLOW_RATE_USAGE, (now, literal(names), literal(pers)))
    return rows


def _rated(cursor: Rows | None) -> dict[tuple[str, float], int]:
    """Starts in each window read: (key, window in seconds) to count."""
    return {} if cursor is None else {(k, per): n for k, per, n in cursor.fetchall()}


def _usage(rows: Iterable[tuple[str, str, int]]) -> tuple[dict[str, int], dict[str, int]]:
    """Slots held by key, and by tenant on the keys read."""
    used: dict[str, int] = defaultdict(int)
    started: dict[str, int] = defaultdict(int)
    for key, tenant, count in rows:
        started[tenant] += count
        used[key] += count
    return used, started


def _more_keys(conn: Connection[Any], read: _Read, keys: set[str]) -> set[str]:
    """Candidates' keys beyond those locked: taken if free now, with their usage.

    Never a wait (``pg_try_advisory_xact_lock``), so never a deadlock between passes;
    a candidate with a key another pass holds is left for a later pass.
    """
    taken = set()
    for key in sorted(keys):
        row = conn.execute(TRY_LOCK_FLOW_KEY, (key,)).fetchone()
        if row is not None and row[0]:
            taken.add(key)
    if taken:
        used, started = _usage(conn.execute(FLOW_USAGE, (literal(sorted(taken)),)).fetchall())
        read.used.update(used)
        for tenant, count in started.items():
            read.started[tenant] = read.started.get(tenant, 0) + count
    return taken


def _room(
    conn: Connection[Any], read: _Read, needs: Mapping[uuid.UUID, Sequence[KeyNeed]],
    limits: OperatorLimits, now: datetime,
) -> dict[str, _Room]:
    """Each limited key's room: its limit less its slots (a rate's: less its starts).

    A key's limit is the operator's, else the lowest a waiting task states for it.
    """
    stated: dict[str, tuple[int, float | None]] = {}
    for need in (n for ns in needs.values() for n in ns):
        if need.limit is not None and (need.key not in stated or need.limit < stated[need.key][0]):
            stated[need.key] = (need.limit, need.per_s)
    at_stake = {n.key for ns in needs.values() for n in ns}
    bounds = {**stated, **{k: v for k, v in limits.limits.items() if k in at_stake}}
    windows = {(k, per) for k, (_, per) in bounds.items() if per is not None}
    unread = windows - read.rated.keys()
    if unread:
        read.rated.update(_rated(_rate_usage(conn, unread, now)))
    return {k: _Room(limit, read.rated[(k, per)] if per is not None else read.used.get(k, 0),
                     per) for k, (limit, per) in bounds.items()}


def _slots(
    chosen: list[tuple[Any, uuid.UUID | None]], needs: Mapping[uuid.UUID, Sequence[KeyNeed]],
    now: datetime,
) -> Slots:
    """The rows the admitted take (``Slots``), each with its lane's lead if it follows one."""
    return Slots(
        [(n.key, row[1], row[4], row[5], now, lane) for row, lane in chosen
         for n in needs[row[1]]],
        [(n.key, now) for row, _ in chosen for n in needs[row[1]] if n.key.startswith(RATE)],
        [row[1] for row, _ in chosen],
    )


def _waiter_columns(waiters: Iterable[Waiter], now: datetime) -> list[list[Any]]:
    """The waiters' rows (one per key) as one list per column."""
    rows = [(need.key, w.task_run_id, w.run_id, w.task, w.attempt, w.tenant, w.priority,
             need.limit, need.per_s, now) for w in waiters for need in w.needs]
    return _columns(rows, 10)


def _columns(rows: list[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """Rows as one list per column (``width`` empty lists for no rows)."""
    return [list(column) for column in zip(*rows, strict=True)] if rows else [[]] * width


def _reasons(
    needs: Mapping[uuid.UUID, Sequence[KeyNeed]], room: Mapping[str, _Room],
    admitted: set[uuid.UUID], usable: set[str], *, laning: set[str],
) -> dict[uuid.UUID, str]:
    """Why each waiter looked at and not admitted waits: its first full (or busy) key.

    A key whose free slots wait to be filled with lanes (``lane_room``) counts as full.
    """
    reasons = {}
    for task_run_id in needs:
        if task_run_id in admitted:
            continue
        for need in needs[task_run_id]:
            if need.key not in usable:
                reasons[task_run_id] = f"{need.key} (another admission holds it)"
                break
            key_room = room.get(need.key)
            if key_room is not None and (key_room.free <= 0 or need.key in laning):
                reasons[task_run_id] = key_room.describe(need.key)
                break
        else:
            reasons[task_run_id] = "its turn (tenants take turns)"
    return reasons
