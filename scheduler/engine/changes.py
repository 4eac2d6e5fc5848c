"""Turning transitions into rows: task-run updates, journal, events, outbox messages.

One :class:`ChangeSet` collects everything a batch decided as typed rows
(:mod:`scheduler.engine.rows`) and hands them over as :class:`Rows`; :mod:`writer` then
writes them in a handful of statements inside the batch's transaction. Callers go through
:class:`scheduler.engine.applying.Applying`, which keeps the order of the steps.
"""

from __future__ import annotations

import functools
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from common.domain.event_names import run_event_names, task_event_name
from common.domain.snapshot import Dispatch, RetryAt, RunChange, Stop, TaskChange, Transition
from common.domain.states import RUN_TERMINAL, TASK_TERMINAL, RunState, TaskState
from common.domain.timers import (
    Clock,
    RunTiming,
    attempt_timers,
    detached_timers,
    renewed_lease,
    run_timers,
)
from common.messaging.bundling import lane_message
from common.messaging.keys import attempt_key
from common.messaging.messages import EventFields, TaskResult, event_fields
from common.messaging.publisher import Outgoing
from scheduler.engine.dispatch import dispatch_message
from scheduler.engine.loading import RunRecord
from scheduler.engine.rows import (
    KEEP,
    JournalRow,
    Keep,
    LogRow,
    RunUpdate,
    TaskRunUpdate,
    detached,
    entered,
    lease_renewed,
    released,
    retry_scheduled,
)
from scheduler.engine.rows import held as held_back
from scheduler.services.flow_admission import Slots

T = TaskState
R = RunState
# An attempt holds its flow slots from its dispatch (READY) to its end.
IN_FLIGHT = frozenset({T.READY, T.ACTIVE})


@dataclass(frozen=True)
class Rows:
    """What a :class:`ChangeSet` built: every row its transaction writes."""

    now: datetime
    task_runs: dict[uuid.UUID, TaskRunUpdate]
    runs: dict[uuid.UUID, RunUpdate]
    journal: list[JournalRow]
    logs: list[LogRow]
    storage: dict[uuid.UUID, dict[str, Any]]
    successes: dict[uuid.UUID, tuple[datetime, datetime]]
    events: list[EventFields]
    flow: Slots


@dataclass
class ChangeSet:
    """Every write a batch of messages causes, merged per row."""

    now: datetime
    lease_ttl: timedelta
    task_runs: dict[uuid.UUID, TaskRunUpdate] = field(default_factory=dict)
    runs: dict[uuid.UUID, RunUpdate] = field(default_factory=dict)
    journal: list[JournalRow] = field(default_factory=list)
    logs: list[LogRow] = field(default_factory=list)
    storage: dict[uuid.UUID, dict[str, Any]] = field(default_factory=dict)
    events: dict[uuid.UUID, list[EventFields]] = field(default_factory=lambda: defaultdict(list))
    dispatches: list[tuple[RunRecord, Dispatch]] = field(default_factory=list)
    stops: list[str] = field(default_factory=list)
    successes: dict[uuid.UUID, tuple[datetime, datetime]] = field(default_factory=dict)
    # Attempts that left flight (READY or ACTIVE), whose flow slots are freed (issue 16).
    ended: list[tuple[RunRecord, str]] = field(default_factory=list)
    # Messages besides the dispatches: ``redeliver`` signals of attempts flow control let go.
    signals: list[Outgoing] = field(default_factory=list)
    # The flow slots the attempts it let go take (``flow_gate``).
    flow: Slots = field(default_factory=Slots)
    # Attempts admitted in lanes, by lead, in the order they run: each lane's dispatches
    # go in one message (``common.messaging.bundling.lane_message``).
    lanes: dict[uuid.UUID, list[uuid.UUID]] = field(default_factory=dict)
    # Finished attempts' run times (the worker's, seconds): flow control fits its lanes
    # to them (``flow_gate``).
    durations: list[tuple[RunRecord, str, float]] = field(default_factory=list)
    # Who the journal names: the engine, or the person whose action the API applied.
    actor: str = "engine"
    # The row a let-through dispatch writes, by its task's timeout (``_released``).
    _released_by_timeout: dict[timedelta, TaskRunUpdate] = field(
        default_factory=dict, repr=False)

    def record(self, run: RunRecord, tr: Transition, result: TaskResult | None) -> None:
        """Add one applied transition (and the result that caused it, if any)."""
        for change in tr.task_changes:
            self._task_change(run, change, result)
        for run_change in tr.run_changes:
            self._run_change(run, run_change)
        for effect in tr.effects:
            if isinstance(effect, Dispatch):
                self.dispatches.append((run, effect))
            elif isinstance(effect, Stop):
                self.stops.append(attempt_key(run.task_run_ids[effect.task], effect.attempt))
            elif isinstance(effect, RetryAt):
                retry_at = self.now + effect.delay
                self._update(run.task_run_ids[effect.task], retry_scheduled(retry_at))

    def record_result(self, run: RunRecord, task: str, result: TaskResult) -> None:
        """Keep a result's log lines, storage and lease renewal, state change or not.

        A detached report (``TaskResult.detached``) holds the attempt by its timeout
        instead of a lease, renewed by each such report. Detached is for good, for that
        attempt: an ordinary heartbeat applied later (an earlier message of the worker
        that accepted it, taken by another engine) renews nothing, else it would tie the
        attempt to a lease nobody renews and have it requeued.
        """
        task_id = run.task_run_ids[task]
        self.logs.extend(LogRow(task_id, result.attempt, line.at, line.stream, line.line)
                         for line in result.logs)
        if result.storage is not None:
            self.storage[run.job.id] = result.storage
        if result.kind == "finished":
            if result.started_at is not None:
                self.durations.append(
                    (run, task, (result.at - result.started_at).total_seconds()))
            return
        if result.detached:
            run.detached.add(task)
            self._update(task_id, detached(detached_timers(self._clock, _timeout(run, task))))
        elif task not in run.detached and run.snapshot.tasks[task].state == T.ACTIVE:
            self._update(task_id, lease_renewed(renewed_lease(self._clock)))

    def hold(self, held: dict[uuid.UUID, str], gated: set[uuid.UUID]) -> None:
        """Flow control's answer: ``held`` attempts wait (why), the rest of ``gated`` go."""
        kept = []
        for run, effect in self.dispatches:
            task_id = run.task_run_ids[effect.task]
            if task_id in held:
                self._update(task_id, held_back(held[task_id]))
                continue
            if task_id in gated:
                self._update(task_id, self._released(run, effect.task))
            kept.append((run, effect))
        self.dispatches = kept

    def dispatch_admitted(self, run: RunRecord, effect: Dispatch) -> None:
        """Send an attempt flow control held before and has now let go."""
        self.dispatches.append((run, effect))
        self._update(run.task_run_ids[effect.task], self._released(run, effect.task))

    def _released(self, run: RunRecord, task: str) -> TaskRunUpdate:
        """A dispatch flow control let through: its claim is checked a lease from now.

        A held attempt had no claim check (no message of it was sent); without one a
        dispatch lost with Redis would leave it READY for good.
        """
        timeout = _timeout(run, task)
        update = self._released_by_timeout.get(timeout)
        if update is None:  # a fan-out admits hundreds a batch: one (immutable) row each
            update = released(attempt_timers(T.READY, self._clock, timeout=timeout))
            self._released_by_timeout[timeout] = update
        return update

    def rows(self) -> Rows:
        """Every row built so far, for the writer."""
        events = [event for run_events in self.events.values() for event in run_events]
        return Rows(self.now, self.task_runs, self.runs, self.journal, self.logs,
                    self.storage, self.successes, events, self.flow)

    @functools.cached_property
    def _clock(self) -> Clock:
        return Clock(self.now, self.lease_ttl)

    def _update(self, task_id: uuid.UUID, update: TaskRunUpdate) -> None:
        earlier = self.task_runs.get(task_id)
        self.task_runs[task_id] = update if earlier is None else earlier.then(update)

    def _task_change(self, run: RunRecord, change: TaskChange, result: TaskResult | None) -> None:
        task_id = run.task_run_ids[change.task]
        if change.new in (T.READY, T.WAITING):
            run.detached.discard(change.task)  # a new attempt starts attached
        if change.old in IN_FLIGHT and (change.new not in IN_FLIGHT or change.new == T.READY):
            self.ended.append((run, change.task))
        self._update(task_id, _entered(change, result, self._clock, _timeout(run, change.task),
                                       detached=change.task in run.detached))
        self.journal.append(JournalRow(
            run.id, change.task, change.attempt, self.now, change.old.value, change.new.value,
            change.reason, self.actor,
        ))
        self.events[run.id].append(self._event(
            run, task_event_name(change.new), change.old, change.new, change.reason,
            task=change.task, task_id=task_id, attempt=change.attempt,
        ))

    def _run_change(self, run: RunRecord, change: RunChange) -> None:
        job = run.job
        columns: dict[str, Any] = dict(run_timers(
            change, self.now, RunTiming(job.timeout, job.suspend_at, job.suspend_after)))
        if change.new == R.ACTIVE and run.started_at is None:
            run.started_at = columns["started_at"] = self.now
        if change.new in RUN_TERMINAL or change.old in RUN_TERMINAL:
            columns["finished_at"] = self.now if change.new in RUN_TERMINAL else None
        if change.new == R.COMPLETED and run.started_at is not None:
            self.successes[job.id] = (run.started_at, self.now)
        update = RunUpdate(state=change.new.value, **columns)
        earlier = self.runs.get(run.id)
        self.runs[run.id] = update if earlier is None else earlier.then(update)
        self.journal.append(JournalRow(
            run.id, None, None, self.now, change.old.value, change.new.value, change.reason,
            self.actor,
        ))
        for name in run_event_names(change.old, change.new):
            self.events[run.id].append(
                self._event(run, name, change.old, change.new, change.reason)
            )

    def _event(
        self, run: RunRecord, name: str, old: TaskState | RunState, new: TaskState | RunState,
        reason: str, **task: Any,
    ) -> EventFields:
        job = run.job
        return event_fields(
            name, self.now, job_id=job.id, job_name=job.name, job_type=job.type,
            application=job.application, tenant=job.tenant, run_id=run.id,
            previous=old.value, state=new.value, reason=reason, traceparent=run.traceparent,
            **task,
        )

    def dispatch_messages(self) -> list[Outgoing]:
        """The outbox messages of the batch: its signals, then its dispatches in order.

        A dispatch carries the job storage: as a result of this batch saved it, or as
        the run's lock query read it.
        """
        known = dict(self.storage)
        messages = list(self.signals)
        laned = {tid for lane in self.lanes.values() for tid in lane}
        in_lanes: dict[uuid.UUID, Outgoing] = {}
        for run, effect in self.dispatches:
            if run.job.id not in known:
                known[run.job.id] = run.stored_storage()
            message = dispatch_message(run, effect, known[run.job.id])
            task_run_id = run.task_run_ids[effect.task]
            if task_run_id in laned:
                in_lanes[task_run_id] = message
            else:
                messages.append(message)
        for lane in self.lanes.values():
            sent = [in_lanes[tid] for tid in lane if tid in in_lanes]
            if sent:
                messages.append(lane_message(sent))
        return messages


def _entered(
    change: TaskChange, result: TaskResult | None, clock: Clock, timeout: timedelta, *,
    detached: bool,
) -> TaskRunUpdate:
    """The row an attempt's entry into ``change.new`` writes, with its timers."""
    new, now = change.new, clock.now
    started = None
    if new == T.ACTIVE:
        at = result.started_at if result and result.started_at else now
        started = (at, result.worker if result else None)
    reported = result is not None and result.kind == "finished"
    finished_at: datetime | Keep = KEEP
    if new in TASK_TERMINAL or new in (T.CONFIRM, T.SOFT_FAILED):
        # The worker's own finishing time, when it reported one: the engine may apply
        # the result a little later, and that delay belongs to the successor's wait.
        finished_at = result.at if reported and result is not None else now
    outcome = (result.output, result.message) if reported and result is not None else None
    detached = detached and new == T.ACTIVE
    timers = attempt_timers(new, clock, timeout=timeout,
                            started=started[0] if started else None, detached=detached)
    return entered(new, change.attempt, change.base, started=started, finished_at=finished_at,
                   outcome=outcome, timers=timers, detached=detached)


def _timeout(run: RunRecord, task: str) -> timedelta:
    return timedelta(seconds=run.job.tasks[task].timeout_s)
