"""Turning transitions into rows: task-run columns, journal, events, outbox messages.

One :class:`ChangeSet` collects everything a batch decided; :mod:`writer` then writes
it in a handful of statements inside the batch's transaction. Callers go through
:class:`scheduler.engine.applying.Applying`, which keeps the order of the steps.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

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
from common.messaging.messages import Event, TaskResult
from common.messaging.publisher import Outgoing
from scheduler.engine.dispatch import dispatch_message
from scheduler.engine.loading import RunRecord

T = TaskState
R = RunState
RUN_EVENTS = {
    R.CONFIRM: "run.confirm", R.PAUSED: "run.paused", R.COMPLETED: "run.completed",
    R.FAILED: "run.failed", R.TIMEOUT: "run.timeout", R.CANCELED: "run.canceled",
}


@dataclass
class ChangeSet:
    """Every write a batch of messages causes, merged per row."""

    now: datetime
    lease_ttl: timedelta
    tasks: dict[uuid.UUID, dict[str, Any]] = field(default_factory=lambda: defaultdict(dict))
    runs: dict[uuid.UUID, dict[str, Any]] = field(default_factory=lambda: defaultdict(dict))
    journal: list[dict[str, Any]] = field(default_factory=list)
    logs: list[dict[str, Any]] = field(default_factory=list)
    storage: dict[uuid.UUID, dict[str, Any]] = field(default_factory=dict)
    events: dict[uuid.UUID, list[Event]] = field(default_factory=lambda: defaultdict(list))
    dispatches: list[tuple[RunRecord, Dispatch]] = field(default_factory=list)
    stops: list[str] = field(default_factory=list)
    successes: dict[uuid.UUID, tuple[datetime, datetime]] = field(default_factory=dict)
    # Who the journal names: the engine, or the person whose action the API applied.
    actor: str = "engine"

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
                self.stops.append(f"{run.task_run_ids[effect.task]}:{effect.attempt}")
            elif isinstance(effect, RetryAt):
                task_id = run.task_run_ids[effect.task]
                self.tasks[task_id]["retry_at"] = self.now + effect.delay

    def record_result(self, run: RunRecord, task: str, result: TaskResult) -> None:
        """Keep a result's log lines, storage and lease renewal, state change or not.

        A detached report (``TaskResult.detached``) holds the attempt by its timeout
        instead of a lease, renewed by each such report (see :meth:`_detach`). Detached
        is for good, for that attempt: an ordinary heartbeat applied later (an earlier
        message of the worker that accepted it, taken by another engine) renews nothing,
        else it would tie the attempt to a lease nobody renews and have it requeued.
        """
        task_id = run.task_run_ids[task]
        for line in result.logs:
            self.logs.append({
                "task_run_id": task_id, "attempt": result.attempt, "at": line.at,
                "stream": line.stream, "line": line.line,
            })
        if result.storage is not None:
            self.storage[run.job.id] = result.storage
        if result.kind == "finished":
            return
        if result.detached:
            run.detached.add(task)
            timers = detached_timers(self._clock, _timeout(run, task))
            self.tasks[task_id].update(detached=True, **timers)
        elif task not in run.detached and run.snapshot.tasks[task].state == T.ACTIVE:
            self.tasks[task_id]["lease_expires_at"] = renewed_lease(self._clock)

    @property
    def _clock(self) -> Clock:
        return Clock(self.now, self.lease_ttl)

    def _task_change(self, run: RunRecord, change: TaskChange, result: TaskResult | None) -> None:
        task_id = run.task_run_ids[change.task]
        cols = self.tasks[task_id]
        cols.update(state=change.new.value, attempt=change.attempt, base=change.base)
        cols.update(_columns_for(change.new, result, self.now))
        if change.new in (T.READY, T.WAITING):
            run.detached.discard(change.task)  # a new attempt starts attached
        detached = change.new == T.ACTIVE and change.task in run.detached
        cols.update(attempt_timers(
            change.new, self._clock, timeout=_timeout(run, change.task),
            started=cols.get("started_at"), detached=detached,
        ))
        if detached:
            cols["detached"] = True
        self.journal.append({
            "run_id": run.id, "task": change.task, "attempt": change.attempt, "at": self.now,
            "from_state": change.old.value, "to_state": change.new.value,
            "reason": change.reason, "actor": self.actor,
        })
        self.events[run.id].append(self._event(
            run, f"task.{change.new.lower()}", change.old, change.new, change.reason,
            task=change.task, task_id=task_id, attempt=change.attempt,
        ))

    def _run_change(self, run: RunRecord, change: RunChange) -> None:
        cols = self.runs[run.id]
        cols["state"] = change.new.value
        if change.new == R.ACTIVE and run.started_at is None:
            cols["started_at"] = run.started_at = self.now
        if change.new in RUN_TERMINAL:
            cols["finished_at"] = self.now
        elif change.old in RUN_TERMINAL:
            cols["finished_at"] = None
        if change.new == R.COMPLETED and run.started_at is not None:
            self.successes[run.job.id] = (run.started_at, self.now)
        job = run.job
        cols.update(run_timers(change, self.now,
                               RunTiming(job.timeout, job.suspend_at, job.suspend_after)))
        self.journal.append({
            "run_id": run.id, "task": None, "attempt": None, "at": self.now,
            "from_state": change.old.value, "to_state": change.new.value,
            "reason": change.reason, "actor": self.actor,
        })
        for name in _run_event_names(change):
            self.events[run.id].append(
                self._event(run, name, change.old, change.new, change.reason)
            )

    def _event(
        self, run: RunRecord, name: str, old: TaskState | RunState, new: TaskState | RunState,
        reason: str, **task: Any,
    ) -> Event:
        job = run.job
        return Event(
            event=name, at=self.now, job_id=job.id, job_name=job.name, job_type=job.type,
            application=job.application, tenant=job.tenant, run_id=run.id,
            previous=old.value, state=new.value, reason=reason, **task,
        )

    def dispatch_messages(self) -> list[Outgoing]:
        """The outbox messages of the batch's dispatch effects, in order.

        A dispatch carries the job storage: as a result of this batch saved it, or as
        the run's lock query read it.
        """
        known = dict(self.storage)
        messages = []
        for run, effect in self.dispatches:
            if run.job.id not in known:
                known[run.job.id] = run.stored_storage()
            messages.append(dispatch_message(run, effect, known[run.job.id]))
        return messages


def _columns_for(new: TaskState, result: TaskResult | None, now: datetime) -> dict[str, Any]:
    """Task-run columns that follow from entering ``new`` (its timers apart)."""
    if new == T.ACTIVE:
        started = result.started_at if result and result.started_at else now
        worker = result.worker if result else None
        return {"started_at": started, "worker": worker, "finished_at": None}
    if new in (T.READY, T.WAITING):
        return {"started_at": None, "finished_at": None, "worker": None, "output": None,
                "message": "", "retry_at": None, "detached": False}
    cols: dict[str, Any] = {}
    reported = result is not None and result.kind == "finished"
    if new in TASK_TERMINAL or new in (T.CONFIRM, T.SOFT_FAILED):
        # The worker's own finishing time, when it reported one: the engine may apply
        # the result a little later, and that delay belongs to the successor's wait.
        cols["finished_at"] = result.at if reported and result is not None else now
    if reported and result is not None:
        cols["output"] = result.output
        cols["message"] = result.message
    return cols


def _timeout(run: RunRecord, task: str) -> timedelta:
    return timedelta(seconds=run.job.tasks[task].timeout_s)


def _run_event_names(change: RunChange) -> list[str]:
    if change.new == R.ACTIVE:
        return ["run.started" if change.old == R.READY else "run.resumed"]
    name = RUN_EVENTS.get(change.new)
    if name is None:
        return []
    return [name, "run.done"] if change.new in RUN_TERMINAL else [name]
