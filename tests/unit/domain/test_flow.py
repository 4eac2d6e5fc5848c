"""Admission of held tasks (``common.domain.flow``): limits, priorities, tenants' turns.

Properties over random candidates and limits:
- no key gets more starts than it has room for;
- the admission is work-conserving: every candidate left out has a full key;
- within a tenant, among candidates on the same keys, priority (then READY order) wins;
- tenants of equal weight competing for one key get turns within one of each other,
  and weighted ones in proportion;
- no starvation: over successive rounds every waiting tenant starts something.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from common.domain.flow import Candidate
from common.domain.flow import admit as admit_with_turn

KEYS = ["key:a", "key:b", "type:t"]
TENANTS = ["t1", "t2", "t3"]


@st.composite
def candidate_lists(draw: st.DrawFn) -> list[Candidate]:
    n = draw(st.integers(0, 40))
    return [
        Candidate(
            id=i, tenant=draw(st.sampled_from(TENANTS)), priority=draw(st.integers(0, 9)),
            order=i, keys=tuple(draw(st.sets(st.sampled_from(KEYS), max_size=2))),
        )
        for i in range(n)
    ]


def admit(candidates: list[Candidate], free: dict[str, int], weights: dict[str, int] | None = None,
          started: dict[str, int] | None = None) -> list[Candidate]:
    return admit_with_turn(candidates, free, weights, started).admitted


frees = st.dictionaries(st.sampled_from(KEYS), st.integers(0, 6))


@given(candidate_lists(), frees)
def test_no_key_gets_more_starts_than_it_has_room_for(
    candidates: list[Candidate], free: dict[str, int]
) -> None:
    used = Counter(key for c in admit(candidates, free) for key in c.keys)
    assert all(used[key] <= room for key, room in free.items())


@given(candidate_lists(), frees)
def test_every_candidate_left_out_waits_for_a_full_key(
    candidates: list[Candidate], free: dict[str, int]
) -> None:
    admitted = admit(candidates, free)
    used = Counter(key for c in admitted for key in c.keys)
    chosen = {c.id for c in admitted}
    for c in candidates:
        if c.id not in chosen:
            assert any(key in free and used[key] >= free[key] for key in c.keys), c


@given(candidate_lists(), frees)
def test_within_a_tenant_priority_then_ready_order_wins_on_the_same_keys(
    candidates: list[Candidate], free: dict[str, int]
) -> None:
    chosen = {c.id for c in admit(candidates, free)}
    for a in candidates:
        for b in candidates:
            same = a.tenant == b.tenant and a.keys == b.keys
            if same and a.id in chosen and b.id not in chosen:
                assert (a.priority, -a.order) > (b.priority, -b.order)


@given(st.integers(1, 30), st.integers(0, 40), st.integers(0, 40))
def test_tenants_of_equal_weight_take_turns_on_a_full_key(
    room: int, big: int, small: int
) -> None:
    candidates = [Candidate(i, "big", 5, i, ("key:a",)) for i in range(big)]
    candidates += [Candidate(100 + i, "small", 5, 100 + i, ("key:a",)) for i in range(small)]
    got = Counter(c.tenant for c in admit(candidates, {"key:a": room}))
    if big >= room and small >= room:
        assert abs(got["big"] - got["small"]) <= 1
    if small <= room // 2:
        assert got["small"] == small


@given(st.integers(1, 5), st.integers(1, 40))
def test_a_weighted_tenant_gets_turns_in_proportion(weight: int, room: int) -> None:
    candidates = [Candidate(i, t, 5, i, ("key:a",)) for t in ("heavy", "light")
                  for i in range(room)]
    got = Counter(c.tenant for c in admit(candidates, {"key:a": room}, {"heavy": weight}))
    assert abs(got["heavy"] - weight * got["light"]) <= weight


def test_what_a_tenant_already_runs_counts_against_its_turns() -> None:
    candidates = [Candidate(i, t, 5, i, ("key:a",)) for t in ("a", "b") for i in range(10)]
    got = Counter(c.tenant for c in admit(candidates, {"key:a": 4}, started={"a": 4}))
    assert got == {"b": 4}


def test_a_high_priority_task_behind_a_backlog_goes_first() -> None:
    backlog = [Candidate(i, "t1", 0, i, ("type:t",)) for i in range(500)]
    urgent = Candidate("urgent", "t1", 9, 500, ("type:t",))
    assert admit([*backlog, urgent], {"type:t": 1}) == [urgent]


def test_a_full_key_does_not_hold_back_work_on_another() -> None:
    blocked = Candidate(1, "t1", 9, 1, ("key:a",))
    free_to_go = Candidate(2, "t1", 0, 2, ("key:b",))
    assert admit([blocked, free_to_go], {"key:a": 0}) == [free_to_go]


@given(st.integers(1, 3), st.integers(2, 4))
def test_no_tenant_starves_with_one_slot_and_instant_tasks(room: int, tenants: int) -> None:
    """The first tenant's backlog is older; every tenant still starts once per turn.

    Each round frees ``room`` slots and everything started ends before the next one,
    so what tenants run says nothing: the turn, carried from round to round, decides.
    """
    names = [f"t{i}" for i in range(tenants)]
    waiting = {name: [Candidate((name, i), name, 5, 100 * k + i, ("key:a",)) for i in range(50)]
               for k, name in enumerate(names)}
    last: str | None = None
    started: Counter[str] = Counter()
    rounds = -(-tenants // room)  # enough rounds for one turn of every tenant
    for _ in range(rounds):
        pool = [c for queue in waiting.values() for c in queue]
        admission = admit_with_turn(pool, {"key:a": room}, last_turn=last)
        last = admission.last_turn
        for c in admission.admitted:
            waiting[c.tenant].remove(c)
            started[c.tenant] += 1
    assert set(started) == set(names)
    assert max(started.values()) - min(started.values()) <= 1
