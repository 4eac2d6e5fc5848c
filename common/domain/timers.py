"""When the beat looks at an attempt or a run next: pure decisions, one per state change.

Every live attempt must have a timer, or a crash would leave it waiting forever: a
READY attempt is checked a lease after its dispatch (claimed by a worker that is no
longer live, it is lost), an ACTIVE one holds a lease its worker renews and a deadline
a lease past its timeout (so the worker's own TIMEOUT report comes first). A detached
attempt (a web service or an outside system completes it) has no lease: its deadline,
one timeout from its last report, is all that watches it. The engine writes what these
functions decide (``scheduler.engine.changes``); the property tests hold every state
the machine reaches to "nothing live without a timer".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypedDict

from common.domain.snapshot import RunChange
from common.domain.states import RUN_TERMINAL, RunState, TaskState


class AttemptTimers(TypedDict, total=False):
    """The attempt's timer columns; None clears one, one left out keeps its value."""

    lease_expires_at: datetime | None
    claim_check_at: datetime | None
    deadline_at: datetime | None


class RunTimers(TypedDict, total=False):
    """The run's timer columns a change sets; those left out keep their value."""

    cancel_requested_at: datetime | None
    cancel_grace_sent_at: datetime | None
    timeout_at: datetime | None
    suspend_due_at: datetime | None


@dataclass(frozen=True)
class Clock:
    """The transaction's time and the lease every attached attempt is held by."""

    now: datetime
    lease_ttl: timedelta


def attempt_timers(
    state: TaskState, clock: Clock, *, timeout: timedelta, started: datetime | None = None,
    detached: bool = False,
) -> AttemptTimers:
    """The timers of an attempt that has just entered ``state``."""
    if state == TaskState.READY:
        return AttemptTimers(lease_expires_at=None, claim_check_at=clock.now + clock.lease_ttl,
                             deadline_at=None)
    if state == TaskState.ACTIVE and detached:
        return AttemptTimers(claim_check_at=None, **detached_timers(clock, timeout))
    if state == TaskState.ACTIVE:
        deadline = (started or clock.now) + timeout + clock.lease_ttl
        return AttemptTimers(lease_expires_at=clock.now + clock.lease_ttl, claim_check_at=None,
                             deadline_at=deadline)
    return AttemptTimers(lease_expires_at=None, claim_check_at=None, deadline_at=None)


def detached_timers(clock: Clock, timeout: timedelta) -> AttemptTimers:
    """A detached attempt: no lease, a deadline one timeout after its last report.

    Without a lease a restart of whoever reported it never requeues it; the beat's
    timeout duty ends it at the deadline.
    """
    return AttemptTimers(lease_expires_at=None, deadline_at=clock.now + timeout)


def renewed_lease(clock: Clock) -> datetime:
    """An attached ACTIVE attempt's lease after a report of its worker."""
    return clock.now + clock.lease_ttl


@dataclass(frozen=True)
class RunTiming:
    """What of a job's definition sets a run's timers."""

    timeout: timedelta | None = None
    suspend_at: datetime | None = None
    suspend_after: timedelta | None = None


def run_timers(change: RunChange, now: datetime, timing: RunTiming) -> RunTimers:
    """The run's timers after ``change``.

    A run's timeout counts from its start, and again from a retry (else a retried run
    past its timeout would time out at once); a finished run has no timer left. A run
    that starts is suspended at the job's ``suspend_at``, or ``suspend_after`` its start.
    """
    if change.new == RunState.CANCEL_REQUESTED:
        return RunTimers(cancel_requested_at=now, cancel_grace_sent_at=None)
    if change.new in RUN_TERMINAL:
        return RunTimers(timeout_at=None)
    timers = RunTimers()
    restarted = change.old == RunState.READY or change.old in RUN_TERMINAL
    if change.new == RunState.ACTIVE and restarted and timing.timeout is not None:
        timers["timeout_at"] = now + timing.timeout
    if change.new == RunState.ACTIVE and change.old == RunState.READY:
        if timing.suspend_at is not None:
            timers["suspend_due_at"] = timing.suspend_at
        elif timing.suspend_after is not None:
            timers["suspend_due_at"] = now + timing.suspend_after
    return timers
