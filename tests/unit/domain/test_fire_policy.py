"""Catchup after downtime and overlap with an unfinished run: pure decisions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from common.domain.fire_policy import OverlapPlan, catch_up, plan_overlap

NOW = datetime(2027, 5, 1, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
# The beat was down: fires at 11:50 ... 11:58 are missed, the one at 12:00 is on time.
FIRES = [*(NOW - MINUTE * k for k in range(10, 1, -1)), NOW]


def runs(policy: str, **kwargs: timedelta) -> list[tuple[datetime, str | None]]:
    decisions = catch_up(FIRES, NOW + MINUTE, NOW, policy, **kwargs)  # type: ignore[arg-type]
    assert [d.fire_at for d in decisions] == FIRES
    assert all(d.reason for d in decisions if d.trigger is None)
    return [(d.fire_at, d.trigger) for d in decisions if d.trigger is not None]


def test_none_skips_missed_fires_and_runs_the_one_on_time() -> None:
    assert runs("none") == [(NOW, "schedule")]


def test_latest_runs_one_catchup_for_all_missed_fires() -> None:
    assert runs("latest") == [(NOW - MINUTE * 2, "catchup"), (NOW, "schedule")]


def test_latest_with_every_fire_missed_runs_the_last() -> None:
    decisions = catch_up(FIRES[:5], FIRES[5], NOW, "latest")
    assert [(d.fire_at, d.trigger) for d in decisions if d.trigger] == []
    decisions = catch_up(FIRES[:9], NOW, NOW, "latest")
    assert [(d.fire_at, d.trigger) for d in decisions if d.trigger] == [(FIRES[8], "catchup")]


def test_all_runs_every_missed_fire_inside_the_window() -> None:
    assert runs("all", window=MINUTE * 4) == [
        (NOW - MINUTE * 4, "catchup"), (NOW - MINUTE * 3, "catchup"),
        (NOW - MINUTE * 2, "catchup"), (NOW, "schedule"),  # 11:56 is 4 minutes late: inside
    ]
    assert len(runs("all")) == len(FIRES)  # default window: a day


def test_a_fire_less_than_a_minute_late_is_not_missed() -> None:
    decisions = catch_up([NOW - MINUTE, NOW], NOW + MINUTE, NOW, "none")
    assert [d.trigger for d in decisions] == ["schedule", "schedule"]


def test_overlap() -> None:
    assert plan_overlap("allow", unfinished=True, buffered=True) == OverlapPlan("run")
    for policy in ("skip", "buffer_one", "cancel_previous"):
        assert plan_overlap(policy, unfinished=False, buffered=False) == OverlapPlan("run")
    assert plan_overlap("skip", unfinished=True, buffered=False).action == "skip"
    assert plan_overlap("buffer_one", unfinished=True, buffered=False) == OverlapPlan("buffer")
    assert plan_overlap("buffer_one", unfinished=True, buffered=True).action == "skip"
    assert plan_overlap("buffer_one", unfinished=False, buffered=True).action == "skip"
    assert plan_overlap("cancel_previous", unfinished=True, buffered=False) == OverlapPlan(
        "buffer", cancel_unfinished=True)
    assert plan_overlap("cancel_previous", unfinished=True, buffered=True) == OverlapPlan(
        "buffer", cancel_unfinished=True, drop_buffered=True)
