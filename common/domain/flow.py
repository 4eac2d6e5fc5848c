"""Which held tasks may start now: limits, priorities and tenants' turns (issue 16).

Pure: the engine reads how much of each limit is free and which READY attempts wait for
one, asks :func:`admit`, and dispatches what it answers in the same transaction. A
concurrency limit and a rate limit look the same from here: a number of starts still
allowed on a key (its limit less the attempts holding it, or less the starts in its
window). Keys are namespaced by the caller (``key:db-eu``, ``type:render``,
``tenant:acme``, ``rate:github``).

The order:

- **Tenants take turns**, weighted: the next start goes to the waiting tenant with the
  fewest starts for its weight (counting the ones it already has running, ``started``),
  so a small tenant's tasks start while a big one's backlog drains.
- **Within a tenant, priority decides** (9 first, 0 last), then the order in which the
  attempts became READY.
- **A blocked key blocks only its own tasks**: a candidate whose key is full is passed
  over for the next one, so work on other keys is not held behind it.

Each candidate is looked at once (a key's free count only falls while admitting), so a
call costs O(n log t) for n candidates of t tenants.

**Lanes** (:func:`lanes`): with a backlog on a wide concurrency limit, an admitted
candidate takes a few of its tenant's next ones with it, to run one after another in
its slot (a lane): the key's usage counts lanes, not attempts, so the limit holds, and
the engine admits a lane per few completions instead of an attempt per completion.
A lane is only as long as its attempts fit in the time after which a worker gives back
what a slow lane has not begun (:func:`fitted_depth`).
"""

from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

DEFAULT_WEIGHT = 1


@dataclass(frozen=True, order=False)
class Candidate:
    """A READY attempt waiting for its keys, as the admission sees it."""

    id: Hashable
    tenant: str
    priority: int
    # When it became READY (any increasing number): earlier goes first at equal priority.
    order: int
    keys: tuple[str, ...] = ()
    # Which candidates may share a lane (the caller's: a run and queue); None: none.
    group: Hashable | None = None


@dataclass(frozen=True)
class Admission:
    """The candidates that may start, in dispatch order, and whose turn was last."""

    admitted: list[Candidate]
    last_turn: str | None


def admit(
    candidates: Sequence[Candidate], free: Mapping[str, int],
    weights: Mapping[str, int] | None = None, started: Mapping[str, int] | None = None,
    last_turn: str | None = None,
) -> Admission:
    """The candidates that may start now, in the order they should be dispatched.

    ``free`` is the starts each key still allows (a key not in it is unlimited);
    ``weights`` a tenant's share (default 1); ``started`` what each tenant already runs
    on the keys at stake, which its turns count from. Between tenants with as many
    starts for their weight, the turn goes round: first to the tenant after
    ``last_turn`` (the one served last by the previous call), so that even with one
    slot and tasks that end before the next call no tenant waits behind another's
    backlog.
    """
    weights = weights or {}
    left = dict(free)
    queues = _by_tenant(candidates)
    turns = [(_share(started, tenant, 0, weights), rank, tenant)
             for rank, tenant in enumerate(_rotation(queues, last_turn))]
    heapq.heapify(turns)
    admitted: list[Candidate] = []
    given: dict[str, int] = defaultdict(int)
    served = len(turns)
    while turns:
        _, _, tenant = heapq.heappop(turns)
        chosen = _first_admissible(queues[tenant], left)
        if chosen is None:
            continue  # nothing of this tenant can start: it leaves the turns
        for key in chosen.keys:
            if key in left:
                left[key] -= 1
        admitted.append(chosen)
        given[tenant] += 1
        served += 1
        heapq.heappush(turns, (_share(started, tenant, given[tenant], weights), served, tenant))
    return Admission(admitted, admitted[-1].tenant if admitted else last_turn)


def _rotation(tenants: Iterable[str], last_turn: str | None) -> list[str]:
    """The tenants in name order, starting after ``last_turn``."""
    names = sorted(tenants)
    after = bisect.bisect_right(names, last_turn) if last_turn is not None else 0
    return names[after:] + names[:after]


def _by_tenant(candidates: Sequence[Candidate]) -> dict[str, list[Candidate]]:
    """Each tenant's candidates, best last (so the next is popped from the end)."""
    queues: dict[str, list[Candidate]] = defaultdict(list)
    for candidate in candidates:
        queues[candidate.tenant].append(candidate)
    for queue in queues.values():
        queue.sort(key=lambda c: (c.priority, -c.order), reverse=False)
    return queues


def _first_admissible(queue: list[Candidate], left: Mapping[str, int]) -> Candidate | None:
    """Pop the tenant's best candidate whose keys all have room.

    One passed over stays out: within a call a key's room only shrinks.
    """
    while queue:
        candidate = queue.pop()
        if all(left.get(key, 1) > 0 for key in candidate.keys):
            return candidate
    return None


def _share(
    started: Mapping[str, int] | None, tenant: str, given: int, weights: Mapping[str, int]
) -> Fraction:
    """A tenant's starts for its weight: the lowest has the next turn."""
    running = (started or {}).get(tenant, 0)
    return Fraction(running + given, max(1, weights.get(tenant, DEFAULT_WEIGHT)))


def lanes(
    admitted: Sequence[Candidate], candidates: Sequence[Candidate], depth: Mapping[str, int],
    *, whole: bool = True,
) -> list[list[Candidate]]:
    """Each admitted candidate, followed by those that run after it in its slot.

    Followers are candidates not admitted of the same tenant, keys and ``group``, best
    first (priority, then READY order). When ``candidates`` are the ``whole`` backlog
    they are dealt round the lanes that share them, so that those lanes end together
    (24 waiters on 8 slots: 3 each, not 8, 8, 3 and five alone); when more wait beyond
    them, each lane is filled in turn (full lanes cost the fewest messages, and the
    next admission has more to give). A lane is at most as long as the lowest ``depth``
    of its keys (a key not in ``depth`` does not bound it, and a candidate with no key
    in it, or no group, goes alone). A rated key must have depth 1: a follower starts
    later than it is admitted, outside the window that counted it.
    """
    taken = {candidate.id for candidate in admitted}
    pools: dict[tuple[Hashable, ...], list[Candidate]] = defaultdict(list)
    for candidate in candidates:
        if candidate.group is not None and candidate.id not in taken:
            pools[_lane_of(candidate)].append(candidate)
    for pool in pools.values():
        pool.sort(key=lambda c: (c.priority, -c.order))
    out = [[lead] for lead in admitted]
    rooms = [_lane_depth(lead, depth) for lead in admitted]
    per_turn = 1 if whole else max(rooms, default=1)
    dealing = True
    while dealing:
        dealing = False
        for lane, room in zip(out, rooms, strict=True):
            shared = pools.get(_lane_of(lane[0])) if lane[0].group is not None else None
            for _ in range(per_turn):
                if shared and len(lane) < room:
                    lane.append(shared.pop())
                    dealing = True
    return out


def lane_room(
    candidates: Sequence[Candidate], free: Mapping[str, int], depth: Mapping[str, int],
) -> dict[str, int]:
    """``free`` cut to the slots the ``candidates`` can fill as lanes.

    For a pass that read only part of a backlog: a slot given to a lead with no follower
    left runs one attempt for a whole round trip, where the next pass, reading more,
    would fill it with a lane. So a key with lanes (``depth`` over 1) opens no more
    slots than its candidates fill: a full lane per ``depth`` of a pool (tenant, keys,
    group; one more for the pool's rest), a slot for each candidate that goes alone.
    A key with any candidate keeps at least one slot if it had one: nobody starves.
    """
    pools: dict[tuple[Hashable, ...], list[Candidate]] = defaultdict(list)
    fill: dict[str, int] = defaultdict(int)
    for candidate in candidates:
        if candidate.group is not None and _lane_depth(candidate, depth) > 1:
            pools[_lane_of(candidate)].append(candidate)
        else:
            for key in candidate.keys:
                fill[key] += 1
    for pool in pools.values():
        lead = pool[0]
        for key in lead.keys:
            fill[key] += -(-len(pool) // _lane_depth(lead, depth))
    return {key: min(slots, fill[key]) if depth.get(key, 1) > 1 and key in fill else slots
            for key, slots in free.items()}


def fitted_depth(depth: int, duration_s: float | None, give_back_s: float, *, untimed: int) -> int:
    """How long a lane of attempts lasting ``duration_s`` each may be, at most ``depth``.

    A worker gives back what a lane has not begun ``give_back_s`` after it took it, and
    each attempt given back waits and is admitted again: a lane of one-second tasks
    would run one and send the rest back. So a lane holds about what runs in that
    time, its last attempt beginning at least half a duration before the give-back (the
    margin for the durations' spread): attempts of two thirds of the give-back time or
    more go alone. An unknown duration (None) gets ``untimed`` (at most ``depth``): the
    key's first lanes go before any of its attempts has ended, and a shorter guess sends
    fewer back if its tasks turn out slow.
    """
    if duration_s is None or duration_s <= 0:
        return max(1, min(depth, untimed))
    return max(1, min(depth, int(give_back_s / duration_s + 0.5)))


def _lane_depth(candidate: Candidate, depth: Mapping[str, int]) -> int:
    """How long a lane led by ``candidate`` may be (1: it goes alone)."""
    return min((depth[k] for k in candidate.keys if k in depth), default=1)


def _lane_of(candidate: Candidate) -> tuple[Hashable, ...]:
    return (candidate.tenant, candidate.keys, candidate.group)
