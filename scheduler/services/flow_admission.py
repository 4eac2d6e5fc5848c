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
from common.domain.flow_spec import KEY, RATE
from common.persistence.queries import (
    FLOW_CANDIDATE_KEYS,
    FLOW_CANDIDATES,
    FLOW_KEY_USAGE,
    FLOW_RATE_USAGE,
    FLOW_TENANT_USAGE,
    FORGET_FLOW_WAITERS,
    HELD_FLOW_SLOTS,
    INSERT_FLOW_SLOTS,
    INSERT_FLOW_STARTS,
    INSERT_FLOW_WAITERS,
    LOCK_FLOW_KEYS,
    READ_FLOW_LIMITS,
    RELEASE_FLOW_SLOTS,
    TRY_LOCK_FLOW_KEY,
)

# How many waiters of each tenant on a key one pass looks at: more than any pass admits.
PER_TENANT = 256


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
                weights[key.removeprefix("tenant:")] = weight
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
    keys = {row[0] for row in conn.execute(RELEASE_FLOW_SLOTS, (task_run_ids,))}
    return keys | {row[0] for row in conn.execute(FORGET_FLOW_WAITERS, (task_run_ids,))}


def admit_waiting(
    conn: Connection[Any], keys: Iterable[str], limits: OperatorLimits, now: datetime,
    turns: dict[str, str],
) -> Admission:
    """Admit the waiters of ``keys`` that fit, taking their slots; ``turns`` carries on.

    ``turns`` maps each key to the tenant served last on it (the caller keeps it).
    """
    locked = sorted(set(keys))
    if not locked:
        return Admission([], {})
    conn.execute(LOCK_FLOW_KEYS, (locked,))
    rows = conn.execute(FLOW_CANDIDATES, (locked, PER_TENANT)).fetchall()
    if not rows:
        return Admission([], {})
    waiters = {row[1]: row for row in rows}
    needs = _needs_of(conn, list(waiters))
    usable = set(locked) | _try_lock(conn, {n.key for ns in needs.values() for n in ns}
                                     - set(locked))
    candidates = [
        Candidate(id=tid, tenant=row[5], priority=row[6], order=row[7],
                  keys=tuple(n.key for n in needs[tid]))
        for tid, row in waiters.items() if all(n.key in usable for n in needs[tid])
    ]
    room = _room(conn, needs, limits, now)
    scope = ",".join(locked)
    started = _tenant_usage(conn, sorted({k for c in candidates for k in c.keys}))
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


def _needs_of(conn: Connection[Any], ids: list[uuid.UUID]) -> dict[uuid.UUID, list[KeyNeed]]:
    needs: dict[uuid.UUID, list[KeyNeed]] = defaultdict(list)
    for task_run_id, key, limit, per_s in conn.execute(FLOW_CANDIDATE_KEYS, (ids,)):
        needs[task_run_id].append(KeyNeed(key, limit, per_s))
    return needs


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
) -> dict[str, _Room]:
    """Each limited key's room: the operator's limit, else the lowest a task states."""
    stated: dict[str, tuple[int, float | None]] = {}
    for need in (n for ns in needs.values() for n in ns):
        if need.limit is not None and (need.key not in stated or need.limit < stated[need.key][0]):
            stated[need.key] = (need.limit, need.per_s)
    bounds = {**stated, **{k: v for k, v in limits.limits.items() if k in _all_keys(needs)}}
    rated = {k: v for k, v in bounds.items() if v[1] is not None}
    held = sorted(set(bounds) - set(rated))
    used = dict(conn.execute(FLOW_KEY_USAGE, (held,)).fetchall()) if held else {}
    if rated:
        names = sorted(rated)
        per = [rated[k][1] for k in names]
        used.update(conn.execute(FLOW_RATE_USAGE, (now, names, per)).fetchall())
    return {k: _Room(v[0], int(used.get(k, 0)), v[1]) for k, v in bounds.items()}


def _all_keys(needs: Mapping[uuid.UUID, list[KeyNeed]]) -> set[str]:
    return {n.key for ns in needs.values() for n in ns}


def _tenant_usage(conn: Connection[Any], keys: list[str]) -> dict[str, int]:
    if not keys:
        return {}
    return {tenant: int(n) for tenant, n in conn.execute(FLOW_TENANT_USAGE, (keys,))}


def _take_slots(
    conn: Connection[Any], chosen: list[Any], needs: Mapping[uuid.UUID, list[KeyNeed]],
    now: datetime,
) -> None:
    """Slots for every key of the admitted (rate keys mark them admitted), their starts."""
    if not chosen:
        return
    slots = [(n.key, row[1], row[4], row[5], now) for row in chosen for n in needs[row[1]]]
    conn.execute(INSERT_FLOW_SLOTS, [list(c) for c in zip(*slots, strict=True)])
    starts = [(n.key, now) for row in chosen for n in needs[row[1]] if n.key.startswith(RATE)]
    if starts:
        conn.execute(INSERT_FLOW_STARTS, [list(c) for c in zip(*starts, strict=True)])
    conn.execute(FORGET_FLOW_WAITERS, ([row[1] for row in chosen],))


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
