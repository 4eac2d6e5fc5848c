"""Lanes (``common.domain.flow.lanes``): an admitted candidate's followers in its slot.

Properties over random candidates, admissions and depths:
- every candidate is in at most one lane, and every admitted one leads its own;
- followers share the lead's tenant, keys and group, and were not admitted;
- a lane is no longer than the lowest depth of its keys (1 with no key in ``depth``);
- within a pool (tenant, keys, group), followers are taken best first, so no one left
  behind is better than a follower of that pool;
- these hold whether the candidates are the ``whole`` backlog (dealt round the lanes,
  which then differ by one attempt at most) or part of it (each lane filled in turn);
- the admitted's room is untouched: the lanes are exactly as many as the admitted;
- ``lane_room`` (a backlog read in part) never adds a slot, cuts only keys with lanes,
  and leaves a key with room and a candidate at least one slot.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from common.domain.flow import Candidate, admit, fitted_depth, lane_room, lanes

KEYS = ["key:a", "key:b", "rate:r"]


@st.composite
def situations(draw: st.DrawFn) -> tuple[list[Candidate], list[Candidate], dict[str, int]]:
    n = draw(st.integers(0, 40))
    candidates = [
        Candidate(
            id=i, tenant=draw(st.sampled_from(["t1", "t2"])), priority=draw(st.integers(0, 3)),
            order=i, keys=tuple(sorted(draw(st.sets(st.sampled_from(KEYS), max_size=2)))),
            group=draw(st.sampled_from([None, "run-1", "run-2"])),
        )
        for i in range(n)
    ]
    admitted = draw(st.lists(st.sampled_from(candidates), unique_by=lambda c: c.id)
                    if candidates else st.just([]))
    depth = draw(st.dictionaries(st.sampled_from(["key:a", "key:b"]), st.integers(1, 5)))
    return candidates, admitted, {**depth, "rate:r": 1}


@given(situations(), st.booleans())
def test_each_candidate_is_in_one_lane_at_most_and_each_admitted_leads_one(
    situation: tuple[list[Candidate], list[Candidate], dict[str, int]], whole: bool,
) -> None:
    candidates, admitted, depth = situation
    result = lanes(admitted, candidates, depth, whole=whole)
    assert [lane[0] for lane in result] == admitted
    ids = [c.id for lane in result for c in lane]
    assert len(ids) == len(set(ids))


@given(situations(), st.booleans())
def test_followers_share_tenant_keys_and_group_and_were_not_admitted(
    situation: tuple[list[Candidate], list[Candidate], dict[str, int]], whole: bool,
) -> None:
    candidates, admitted, depth = situation
    chosen = {c.id for c in admitted}
    for lead, *followers in lanes(admitted, candidates, depth, whole=whole):
        for follower in followers:
            assert follower.id not in chosen
            assert lead.group is not None
            assert (follower.tenant, follower.keys, follower.group) == (
                lead.tenant, lead.keys, lead.group)


@given(situations(), st.booleans())
def test_a_lane_is_no_longer_than_its_keys_allow(
    situation: tuple[list[Candidate], list[Candidate], dict[str, int]], whole: bool,
) -> None:
    candidates, admitted, depth = situation
    for lane in lanes(admitted, candidates, depth, whole=whole):
        bound = min((depth[k] for k in lane[0].keys if k in depth), default=1)
        assert len(lane) <= bound
        if "rate:r" in lane[0].keys:
            assert len(lane) == 1


def left_behind(situation: tuple[list[Candidate], list[Candidate], dict[str, int]],
                whole: bool) -> list[tuple[list[Candidate], list[Candidate]]]:
    """Each lane with the candidates of its pool that no lane took."""
    candidates, admitted, depth = situation
    result = lanes(admitted, candidates, depth, whole=whole)
    laned = {c.id for lane in result for c in lane}
    return [(lane, [c for c in candidates if c.id not in laned and lane[0].group is not None
                    and (c.tenant, c.keys, c.group) == (lane[0].tenant, lane[0].keys,
                                                        lane[0].group)])
            for lane in result]


@given(situations(), st.booleans())
def test_followers_are_the_best_of_their_pool(
    situation: tuple[list[Candidate], list[Candidate], dict[str, int]], whole: bool,
) -> None:
    for (_, *followers), pool in left_behind(situation, whole):
        for follower in followers:
            assert all((c.priority, -c.order) <= (follower.priority, -follower.order)
                       for c in pool)


@given(situations())
def test_lanes_that_share_followers_end_together(
    situation: tuple[list[Candidate], list[Candidate], dict[str, int]],
) -> None:
    """Lanes of one pool (so of one depth) differ by one attempt at most."""
    candidates, admitted, depth = situation
    by_pool: dict[tuple[object, ...], list[int]] = {}
    for lane in lanes(admitted, candidates, depth):
        if lane[0].group is not None:
            pool = (lane[0].tenant, lane[0].keys, lane[0].group)
            by_pool.setdefault(pool, []).append(len(lane))
    assert all(max(lengths) - min(lengths) <= 1 for lengths in by_pool.values())


def test_a_backlog_on_one_key_is_dealt_round_its_lanes_best_first() -> None:
    backlog = [Candidate(id=i, tenant="t", priority=9 if i == 7 else 0, order=i,
                         keys=("key:db",), group="run") for i in range(10)]
    result = lanes(backlog[:2], backlog, {"key:db": 3})
    assert [[c.id for c in lane] for lane in result] == [[0, 7, 3], [1, 2, 4]]
    assert [len(lane) for lane in lanes(backlog[:4], backlog, {"key:db": 8})] == [3, 3, 2, 2]


def test_a_backlog_read_in_part_fills_each_lane_in_turn() -> None:
    """More wait beyond those read: full lanes cost the fewest messages."""
    backlog = [Candidate(id=i, tenant="t", priority=0, order=i, keys=("key:db",), group="r")
               for i in range(10)]
    result = lanes(backlog[:4], backlog, {"key:db": 5}, whole=False)
    assert [[c.id for c in lane] for lane in result] == [[0, 4, 5, 6, 7], [1, 8, 9], [2], [3]]


def test_without_a_group_or_a_bounded_key_a_candidate_goes_alone() -> None:
    alone = Candidate(id=1, tenant="t", priority=0, order=1, keys=("key:db",))
    other = Candidate(id=2, tenant="t", priority=0, order=2, keys=("key:db",))
    assert lanes([alone], [alone, other], {"key:db": 4}) == [[alone]]
    grouped = [Candidate(id=i, tenant="t", priority=0, order=i, keys=("type:x",), group="r")
               for i in range(3)]
    assert lanes(grouped[:1], grouped, {"key:db": 4}) == [grouped[:1]]


@given(situations(), st.dictionaries(st.sampled_from(KEYS), st.integers(0, 12)))
def test_lane_room_never_adds_a_slot_and_cuts_only_keys_with_lanes(
    situation: tuple[list[Candidate], list[Candidate], dict[str, int]], free: dict[str, int],
) -> None:
    candidates, _, depth = situation
    room = lane_room(candidates, free, depth)
    assert room.keys() == free.keys()
    for key, slots in room.items():
        assert slots <= free[key]
        if depth.get(key, 1) <= 1:
            assert slots == free[key]


@given(situations(), st.dictionaries(st.sampled_from(KEYS), st.integers(0, 12)))
def test_lane_room_leaves_a_key_with_room_and_a_candidate_a_slot(
    situation: tuple[list[Candidate], list[Candidate], dict[str, int]], free: dict[str, int],
) -> None:
    """Nobody starves: what the next pass would fill better still gets one slot now."""
    candidates, _, depth = situation
    room = lane_room(candidates, free, depth)
    for key, slots in free.items():
        if slots > 0 and any(key in c.keys for c in candidates):
            assert room[key] >= 1


def test_a_backlog_read_in_part_opens_only_the_lanes_it_fills() -> None:
    """34 slots free and 152 waiters read: five lanes (four full), not four and 30 alone.

    Each slot given to a lead with nobody left to follow it would run one attempt for a
    whole round trip; the next pass reads more and fills the 29 slots left with lanes.
    """
    backlog = [Candidate(id=i, tenant="t", priority=0, order=i, keys=("key:db",), group="r")
               for i in range(152)]
    room = lane_room(backlog, {"key:db": 34}, {"key:db": 32})
    assert room == {"key:db": 5}
    admitted = admit(backlog, room).admitted
    result = lanes(admitted, backlog, {"key:db": 32}, whole=False)
    assert [len(lane) for lane in result] == [32, 32, 32, 32, 24]
    alone = Candidate(id=999, tenant="t", priority=0, order=999, keys=("key:db",))
    assert lane_room([*backlog, alone], {"key:db": 34}, {"key:db": 32}) == {"key:db": 6}


def test_a_lane_holds_what_begins_before_the_give_back_time() -> None:
    assert fitted_depth(32, None, 0.2, untimed=32) == 32  # nothing measured yet
    assert fitted_depth(32, 0.0005, 0.2, untimed=32) == 32  # instant tasks: as long as allowed
    assert fitted_depth(32, 0.01, 0.2, untimed=32) == 20
    assert fitted_depth(32, 0.1003, 0.2, untimed=32) == 2  # the second begins at 100 ms of 200
    # a second would begin too near the give-back:
    assert fitted_depth(32, 0.15, 0.2, untimed=32) == 1
    assert fitted_depth(32, 0.5, 0.2, untimed=32) == 1  # slow tasks go alone: none is given back
    assert fitted_depth(64, None, 0.2, untimed=32) == 32  # a first guess, before any ends
    assert fitted_depth(64, 0.0005, 0.2, untimed=32) == 64
    assert fitted_depth(16, None, 0.2, untimed=32) == 16


@given(depth=st.integers(1, 64), duration_s=st.floats(1e-6, 100.0),
       give_back_s=st.floats(0.01, 10.0))
def test_a_fitted_lane_is_within_its_depth_and_its_last_attempt_begins_in_time(
    depth: int, duration_s: float, give_back_s: float,
) -> None:
    fitted = fitted_depth(depth, duration_s, give_back_s, untimed=depth)
    assert 1 <= fitted <= depth
    last_begins_s = (fitted - 1) * duration_s
    assert fitted == 1 or last_begins_s <= (give_back_s - duration_s / 2) * (1 + 1e-9)
    slower = fitted_depth(depth, duration_s * 2, give_back_s, untimed=depth)
    assert slower <= fitted  # slower: no longer
