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

import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg import Connection

from common.domain.flow import Candidate, admit
from common.domain.flow_spec import KEY, RATE, TENANT
from common.persistence.queries import (
    FLOW_CANDIDATES,
    FLOW_RATE_USAGE,
    FLOW_USAGE,
    HELD_FLOW_SLOTS,
    INSERT_FLOW_WAITERS,
    LOCK_FLOW_KEYS,
    READ_FLOW_LIMITS,
    RELEASE_FLOW,
    TAKE_FLOW_SLOTS,
    TRY_LOCK_FLOW_KEY,
)

# How many waiters of each tenant on a key the beat's pass looks at; the engine's looks
# at as many as it could admit (what it released and what it holds), and a few more.
PER_TENANT = 256
AT_LEAST = 8


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
    """A waiter that may go now: its slots are taken in this transaction."""

    task_run_id: uuid.UUID
    run_id: uuid.UUID
    task: str
    attempt: int


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
class Admission:
    """What a pass decided: who goes, and why each one looked at still waits."""

    admitted: list[Admitted]
    waiting_for: dict[uuid.UUID, str]


def hold(conn: Connection[Any], waiters: Iterable[Waiter], now: datetime) -> None:
    """Record the waiters (one row per key; one held again keeps its place)."""
    rows = [(need.key, w.task_run_id, w.run_id, w.task, w.attempt, w.tenant, w.priority,
             need.limit, need.per_s, now) for w in waiters for need in w.needs]
    if rows:
        conn.execute(INSERT_FLOW_WAITERS, [list(column) for column in zip(*rows, strict=True)])


def holding(
    conn: Connection[Any], attempts: Mapping[uuid.UUID, int]
) -> dict[uuid.UUID, set[str]]:
    """The keys each of these attempts (task run: attempt) holds a slot of."""
    held: dict[uuid.UUID, set[str]] = defaultdict(set)
    if attempts:
        for task_run_id, attempt, key in conn.execute(HELD_FLOW_SLOTS, (list(attempts),)):
            if attempts[task_run_id] == attempt:
                held[task_run_id].add(key)
    return held


def release(conn: Connection[Any], task_run_ids: list[uuid.UUID]) -> set[str]:
    """Free the slots and forget the waits of attempts that ended; the keys they had."""
    if not task_run_ids:
        return set()
    return {row[0] for row in conn.execute(RELEASE_FLOW, {"ids": task_run_ids})}


def admit_waiting(
    conn: Connection[Any], keys: Iterable[str], limits: OperatorLimits, now: datetime,
    turns: dict[str, str], *, per_tenant: int = PER_TENANT,
) -> Admission:
    """Admit the waiters of ``keys`` that fit, taking their slots; ``turns`` carries on.

    ``turns`` maps each key to the tenant served last on it (the caller keeps it);
    ``per_tenant`` bounds the waiters of each tenant and key looked at.
    """
    locked = sorted(set(keys))
    if not locked:
        return Admission([], {})
    conn.execute(LOCK_FLOW_KEYS, (locked,))
    rows = conn.execute(FLOW_CANDIDATES, (locked, per_tenant)).fetchall()
    if not rows:
        return Admission([], {})
    waiters = {row[1]: row for row in rows}
    needs = {tid: [KeyNeed(*need) for need in zip(row[8], row[9], row[10], strict=True)]
             for tid, row in waiters.items()}
    usable = set(locked) | _try_lock(conn, {n.key for ns in needs.values() for n in ns}
                                     - set(locked))
    candidates = [
        Candidate(id=tid, tenant=row[5], priority=row[6], order=row[7],
                  keys=tuple(n.key for n in needs[tid]))
        for tid, row in waiters.items() if all(n.key in usable for n in needs[tid])
    ]
    room, started = _room(conn, needs, limits, now)
    scope = ",".join(locked)
    decided = admit(candidates, {k: max(0, r.free) for k, r in room.items()},
                    limits.weights, started, turns.get(scope))
    if decided.last_turn is not None:
        turns[scope] = decided.last_turn
    chosen = [waiters[c.id] for c in decided.admitted]
    _take_slots(conn, chosen, needs, now)
    for candidate in decided.admitted:
        for key in candidate.keys:
            if key in room:
                room[key].used += 1
    return Admission(
        [Admitted(row[1], row[2], row[3], row[4]) for row in chosen],
        _reasons(waiters, needs, room, {row[1] for row in chosen}, usable),
    )


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


def _try_lock(conn: Connection[Any], keys: set[str]) -> set[str]:
    taken = set()
    for key in sorted(keys):
        row = conn.execute(TRY_LOCK_FLOW_KEY, (key,)).fetchone()
        if row is not None and row[0]:
            taken.add(key)
    return taken


def _room(
    conn: Connection[Any], needs: Mapping[uuid.UUID, list[KeyNeed]], limits: OperatorLimits,
    now: datetime,
) -> tuple[dict[str, _Room], dict[str, int]]:
    """Each limited key's room, and each tenant's slots on the keys at stake.

    A key's limit is the operator's, else the lowest a waiting task states for it.
    """
    stated: dict[str, tuple[int, float | None]] = {}
    for need in (n for ns in needs.values() for n in ns):
        if need.limit is not None and (need.key not in stated or need.limit < stated[need.key][0]):
            stated[need.key] = (need.limit, need.per_s)
    at_stake = sorted({n.key for ns in needs.values() for n in ns})
    bounds = {**stated, **{k: v for k, v in limits.limits.items() if k in at_stake}}
    used: dict[str, int] = defaultdict(int)
    started: dict[str, int] = defaultdict(int)
    for key, tenant, count in conn.execute(FLOW_USAGE, (at_stake,)):
        started[tenant] += count
        used[key] += count
    rated = {k: v for k, v in bounds.items() if v[1] is not None}
    if rated:
        names = sorted(rated)
        per = [rated[k][1] for k in names]
        used.update(conn.execute(FLOW_RATE_USAGE, (now, names, per)).fetchall())
    return {k: _Room(v[0], int(used[k]), v[1]) for k, v in bounds.items()}, dict(started)


def _take_slots(
    conn: Connection[Any], chosen: list[Any], needs: Mapping[uuid.UUID, list[KeyNeed]],
    now: datetime,
) -> None:
    """Slots for every key of the admitted (rate keys mark them admitted), their starts."""
    if not chosen:
        return
    slots = [(n.key, row[1], row[4], row[5], now) for row in chosen for n in needs[row[1]]]
    starts = [(n.key, now) for row in chosen for n in needs[row[1]] if n.key.startswith(RATE)]
    conn.execute(TAKE_FLOW_SLOTS, [
        *_columns(slots, 5), *_columns(starts, 2), [row[1] for row in chosen]])


def _columns(rows: list[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """Rows as one list per column (``width`` empty lists for no rows)."""
    return [list(column) for column in zip(*rows, strict=True)] if rows else [[]] * width


def _reasons(
    waiters: Mapping[uuid.UUID, Any], needs: Mapping[uuid.UUID, list[KeyNeed]],
    room: Mapping[str, _Room], admitted: set[uuid.UUID], usable: set[str],
) -> dict[uuid.UUID, str]:
    """Why each waiter looked at and not admitted waits: its first full (or busy) key."""
    reasons = {}
    for task_run_id in waiters:
        if task_run_id in admitted:
            continue
        for need in needs[task_run_id]:
            if need.key not in usable:
                reasons[task_run_id] = f"{need.key} (another admission holds it)"
                break
            key_room = room.get(need.key)
            if key_room is not None and key_room.free <= 0:
                reasons[task_run_id] = key_room.describe(need.key)
                break
        else:
            reasons[task_run_id] = "its turn (tenants take turns)"
    return reasons
