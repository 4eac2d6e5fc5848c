"""The timers of attempts and runs, decided in the pure core (``common.domain.timers``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from common.domain.snapshot import RunChange
from common.domain.states import RunState, TaskState
from common.domain.timers import (
    Clock,
    RunTiming,
    attempt_timers,
    detached_timers,
    renewed_lease,
    run_timers,
)

NOW = datetime(2027, 3, 1, 12, tzinfo=UTC)
CLOCK = Clock(NOW, timedelta(seconds=6))
TIMEOUT = timedelta(minutes=10)


def test_a_ready_attempt_is_checked_a_lease_after_its_dispatch() -> None:
    assert attempt_timers(TaskState.READY, CLOCK, timeout=TIMEOUT) == {
        "lease_expires_at": None, "claim_check_at": NOW + timedelta(seconds=6),
        "deadline_at": None}


def test_an_active_attempt_holds_a_lease_and_a_deadline_a_lease_past_its_timeout() -> None:
    started = NOW - timedelta(seconds=30)
    assert attempt_timers(TaskState.ACTIVE, CLOCK, timeout=TIMEOUT, started=started) == {
        "lease_expires_at": NOW + timedelta(seconds=6), "claim_check_at": None,
        "deadline_at": started + TIMEOUT + timedelta(seconds=6)}
    assert renewed_lease(CLOCK) == NOW + timedelta(seconds=6)


def test_a_detached_attempt_has_no_lease_only_its_timeout_from_the_last_report() -> None:
    assert attempt_timers(TaskState.ACTIVE, CLOCK, timeout=TIMEOUT, detached=True) == {
        "lease_expires_at": None, "claim_check_at": None, "deadline_at": NOW + TIMEOUT}
    # A report renews the deadline and leaves a READY attempt's claim check alone.
    assert detached_timers(CLOCK, TIMEOUT) == {"lease_expires_at": None,
                                               "deadline_at": NOW + TIMEOUT}


def test_a_run_times_out_from_each_start_and_is_suspended_as_its_job_says() -> None:
    timing = RunTiming(timeout=TIMEOUT, suspend_at=NOW + timedelta(hours=1))
    started = RunChange(RunState.READY, RunState.ACTIVE, "started")
    retried = RunChange(RunState.FAILED, RunState.ACTIVE, "retried")
    resumed = RunChange(RunState.PAUSED, RunState.ACTIVE, "resumed")
    assert run_timers(started, NOW, timing) == {
        "timeout_at": NOW + TIMEOUT, "suspend_due_at": NOW + timedelta(hours=1)}
    assert run_timers(retried, NOW, timing) == {"timeout_at": NOW + TIMEOUT}
    assert run_timers(resumed, NOW, timing) == {}
    assert run_timers(RunChange(RunState.ACTIVE, RunState.CANCEL_REQUESTED, ""), NOW,
                      timing) == {"cancel_requested_at": NOW, "cancel_grace_sent_at": None}
    assert run_timers(RunChange(RunState.ACTIVE, RunState.COMPLETED, ""), NOW, timing) == {
        "timeout_at": None}
    after = RunTiming(suspend_after=timedelta(minutes=3))
    assert run_timers(started, NOW, after) == {"suspend_due_at": NOW + timedelta(minutes=3)}
