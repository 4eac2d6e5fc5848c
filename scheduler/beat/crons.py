"""The beat's cron duty: turn due fires of cron jobs into runs, exactly once.

A job is due when ``jobs.next_fire_at`` (its next nominal fire, NULL when it has none)
is within :data:`LOOKAHEAD`. Due jobs are claimed with ``FOR UPDATE SKIP LOCKED`` on
the partial index of that column (cost O(due)); in the same transaction each fire gets
its row in ``fires`` (unique per job and time, ``ON CONFLICT DO NOTHING``), its run,
skip or wait, and ``next_fire_at`` moves on. Several beats therefore never fire one
time twice, and a crash loses none. Runs are created up to the tick's lookahead ahead,
READY with ``scheduled_for`` at the nominal time; ``start_due_runs`` then writes their
activations as timed outbox rows, which the engine takes when due.

Convention: a job's fire rows change only under its job row lock. (Retention deletes
past fires that no longer wait without it: nothing here reads them again.)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any
from uuid import UUID, uuid4

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from common.domain.cron import CronError, CronSchedule
from common.domain.fire_policy import (
    Catch,
    FireTrigger,
    OverlapPlan,
    catch_up,
    plan_overlap,
)
from common.domain.states import RUN_UNFINISHED, RunState
from common.messaging.messages import Event
from common.messaging.signals import activation
from common.persistence.arrays import literals
from common.persistence.db import driver
from common.persistence.models import Fire, Job, Run
from common.persistence.notify_events import record_events
from common.persistence.outbox import enqueue
from common.persistence.queries import INSERT_FIRES, MOVE_NEXT_FIRES
from scheduler.services.runs import NewRun, create_run, create_runs

log = logging.getLogger(__name__)
LOOKAHEAD = timedelta(seconds=1)
JOBS_PER_TICK = 1000
FIRES_PER_JOB = 1000  # a long downtime is worked off over several ticks


def fire_due_crons(session: Session, now: datetime, lookahead: timedelta = LOOKAHEAD) -> list[int]:
    """Process every fire due by ``now + lookahead`` of the jobs claimed; return outbox ids.

    Jobs with ``overlap: allow`` (the default, and all a busy beat sees) are written
    together, a few statements for the whole tick (:class:`_FireBatch`); the others
    look at their unfinished runs one job at a time.
    """
    horizon = now + lookahead
    due = (
        select(Job).where(Job.next_fire_at <= horizon).order_by(Job.next_fire_at)
        .limit(JOBS_PER_TICK).with_for_update(skip_locked=True)
    )
    batch = _FireBatch(session, now)
    ids: list[int] = []
    for job in session.scalars(due).all():
        if (job.spec or {}).get("overlap", "allow") == "allow":
            batch.add(job, horizon)
        else:
            ids += _fire_job(session, job, now, horizon)
    batch.write()
    return ids


def release_buffered(session: Session, now: datetime) -> list[int]:
    """Run each waiting (buffered) fire whose job has no unfinished run left."""
    waiting = select(Fire.job_id).where(Fire.outcome == "buffered").distinct().limit(JOBS_PER_TICK)
    job_ids = list(session.scalars(waiting))
    if not job_ids:
        return []
    jobs = session.scalars(
        select(Job).where(Job.id.in_(job_ids)).with_for_update(skip_locked=True)
    ).all()
    ids: list[int] = []
    for job in jobs:
        firing = _JobFiring(session, job, now)
        ids += firing.release()
    return ids


def _fire_job(session: Session, job: Job, now: datetime, horizon: datetime) -> list[int]:
    decisions = _due_decisions(job, now, horizon)
    firing = _JobFiring(session, job, now)
    for decision in decisions:
        firing.apply(decision)
    return firing.finish()


def _due_decisions(job: Job, now: datetime, horizon: datetime) -> list[Catch]:
    """The job's fires due by ``horizon``, decided by its catchup; moves ``next_fire_at``."""
    decisions, job.next_fire_at = _decide(job, now, horizon)
    return decisions


def _decide(job: Job, now: datetime, horizon: datetime) -> tuple[list[Catch], datetime | None]:
    """The job's fires due by ``horizon`` decided by its catchup, and its next fire."""
    schedule = _schedule_of(job)
    if schedule is None or job.next_fire_at is None:
        return [], None
    due: list[datetime] = []
    following = job.next_fire_at
    while following <= horizon and len(due) < FIRES_PER_JOB:
        due.append(following)
        following = _next_fire(schedule, following)
    spec: dict[str, Any] = job.spec or {}
    decisions = catch_up(
        due, following, now, spec.get("catchup", "none"),
        window=_seconds(spec.get("catchup_window")),
    )
    return decisions, following


def _schedule_of(job: Job) -> CronSchedule | None:
    """The job's cron schedule if it fires at all (enabled, committed, valid)."""
    cron = (job.schedule or {}).get("cron")
    if not cron or not job.enabled or job.draft:
        return None
    try:
        return _parse(cron, (job.schedule or {}).get("timezone") or "UTC")
    except CronError:
        log.warning("job %s has an unusable cron schedule; it will not fire", job.id)
        return None


def _next_fire(schedule: CronSchedule, after: datetime) -> datetime:
    """``schedule.next_after(after)``, shared by the jobs of one schedule and minute.

    A call costs ~15 µs, more for a wild schedule that scans for clock changes up to a
    distant fire; jobs on the same expression firing in the same minute ask the same
    question. The first fire after the whole minute is also the
    first after ``after`` when it lies beyond it (nothing can fire in between).
    """
    candidate = _next_after_minute(schedule, after.replace(second=0, microsecond=0))
    return candidate if candidate > after else schedule.next_after(after)


@lru_cache(maxsize=65536)
def _next_after_minute(schedule: CronSchedule, minute: datetime) -> datetime:
    return schedule.next_after(minute)


@lru_cache(maxsize=4096)
def _parse(expression: str, timezone: str) -> CronSchedule:
    """Parsing checks that some day can match, a measurable cost per fire; schedules repeat."""
    return CronSchedule.parse(expression, timezone)


def _seconds(value: Any) -> timedelta | None:
    return None if value is None else timedelta(seconds=float(value))


@dataclass
class _JobFiring:
    """The fires of one locked job in one transaction, and the messages they cause."""

    session: Session
    job: Job
    now: datetime
    unfinished: dict[UUID, str] | None = None
    buffered: Fire | None = None
    skipped: list[Event] = field(default_factory=list)
    outbox_ids: list[int] = field(default_factory=list)

    def apply(self, decision: Catch) -> None:
        """Skip, run or buffer one due fire, as the job's catchup and overlap say."""
        if decision.trigger is None:
            self._skip(decision.fire_at, "schedule", decision.reason)
            return
        overlap = (self.job.spec or {}).get("overlap", "allow")
        plan = OverlapPlan("run") if overlap == "allow" else plan_overlap(overlap, *self._busy())
        if plan.action == "skip":
            self._skip(decision.fire_at, decision.trigger, plan.reason)
            return
        if plan.cancel_unfinished:
            self._cancel_unfinished()
        if plan.drop_buffered and self.buffered is not None:
            self.buffered.outcome, self.buffered.reason = "skipped", "superseded by a later fire"
            self.skipped.append(self._event(self.buffered.fire_at, self.buffered.reason))
            self.buffered = None
        if plan.action == "buffer":
            fire_id = self._record(decision.fire_at, "buffered", decision.trigger)
            if fire_id is not None:
                self.buffered = self.session.get_one(Fire, fire_id)
            return
        fire_id = self._record(decision.fire_at, "run", decision.trigger)
        if fire_id is not None:
            self._run(self.session.get_one(Fire, fire_id))

    def release(self) -> list[int]:
        """Run the job's buffered fire once nothing of the job is unfinished."""
        unfinished, buffered = self._busy()
        if buffered and not unfinished and self.buffered is not None:
            fire, self.buffered = self.buffered, None
            if _schedule_of(self.job) is None:
                fire.outcome, fire.reason = "skipped", "the job no longer fires"
                self.skipped.append(self._event(fire.fire_at, fire.reason))
            else:
                self._run(fire)
        return self.finish()

    def finish(self) -> list[int]:
        """Record the ``run.skipped`` events; return every outbox id to relay."""
        if self.skipped:
            record_events(self.session, self.skipped)
            self.skipped = []
        return self.outbox_ids

    def _busy(self) -> tuple[bool, bool]:
        """(an unfinished run exists, a fire is waiting), loaded once per job."""
        if self.unfinished is None:
            rows = self.session.execute(
                select(Run.id, Run.state)
                .where(Run.job_id == self.job.id, Run.state.in_(list(RUN_UNFINISHED)))
            ).all()
            self.unfinished = {row.id: row.state for row in rows}
            self.buffered = self.session.scalars(
                select(Fire).where(Fire.job_id == self.job.id, Fire.outcome == "buffered")
                .order_by(Fire.fire_at)
            ).first()
        return bool(self.unfinished), self.buffered is not None

    def _run(self, fire: Fire) -> None:
        trigger: FireTrigger = "catchup" if fire.trigger == "catchup" else "schedule"
        created = create_run(self.session, self.job.id, trigger, fire.fire_at, self.now)
        fire.outcome, fire.run_id = "run", created.run_id
        self.outbox_ids += created.outbox_ids
        if self.unfinished is not None:
            self.unfinished[created.run_id] = RunState.READY

    def _skip(self, fire_at: datetime, trigger: str, reason: str) -> None:
        if self._record(fire_at, "skipped", trigger, reason) is not None:
            self.skipped.append(self._event(fire_at, reason))

    def _record(
        self, fire_at: datetime, outcome: str, trigger: str, reason: str = ""
    ) -> int | None:
        """Insert the fire's row; None if the fire was already processed."""
        row = {
            "job_id": self.job.id, "fire_at": fire_at, "outcome": outcome, "trigger": trigger,
            "reason": reason, "recorded_at": self.now,
        }
        statement = insert(Fire).values(row).on_conflict_do_nothing().returning(Fire.id)
        return self.session.scalar(statement)

    def _cancel_unfinished(self) -> None:
        """Ask the engine to cancel the job's unfinished runs (not those already canceling)."""
        runs = [i for i, s in (self.unfinished or {}).items() if s != RunState.CANCEL_REQUESTED]
        messages = [activation(run_id, "cancel") for run_id in runs]
        self.outbox_ids += enqueue(self.session, messages)
        for run_id in runs:
            (self.unfinished or {})[run_id] = RunState.CANCEL_REQUESTED

    def _event(self, fire_at: datetime, reason: str) -> Event:
        return _skipped_event(self.job, self.now, fire_at, reason)


class _FireBatch:
    """The fires of many ``overlap: allow`` jobs, written with a few statements."""

    def __init__(self, session: Session, now: datetime) -> None:
        self._session = session
        self._now = now
        self._jobs: dict[UUID, Job] = {}
        self._fires: list[tuple[Any, ...]] = []  # in the column order of INSERT_FIRES
        self._runs: dict[tuple[UUID, datetime], NewRun] = {}
        self._reasons: dict[tuple[UUID, datetime], str] = {}
        self._next: dict[UUID, datetime | None] = {}

    def add(self, job: Job, horizon: datetime) -> None:
        """Decide the job's due fires; nothing is written before :meth:`write`."""
        self._jobs[job.id] = job
        decisions, self._next[job.id] = _decide(job, self._now, horizon)
        for decision in decisions:
            key = (job.id, decision.fire_at)
            trigger = decision.trigger or "schedule"
            run_id = None
            if decision.trigger is None:
                self._reasons[key] = decision.reason
            else:
                run = NewRun(uuid4(), job, decision.trigger, decision.fire_at)
                self._runs[key] = run
                run_id = run.id
            self._fires.append((job.id, decision.fire_at, "run" if run_id else "skipped",
                                trigger, decision.reason, run_id, self._now))

    def write(self) -> None:
        """Insert the fires not yet recorded (another beat may have), their runs, events.

        Nothing to relay: the runs' activations are left to ``start_due_runs``.
        """
        conn = driver(self._session)
        if self._next:  # one statement, not an ORM flush of every job
            conn.execute(MOVE_NEXT_FIRES, literals((list(self._next), list(self._next.values()))))
        if not self._fires:
            return
        columns = literals(list(column) for column in zip(*self._fires, strict=True))
        inserted = set(conn.execute(INSERT_FIRES, columns).fetchall())
        runs = [run for key, run in self._runs.items() if key in inserted]
        create_runs(self._session, runs, self._now)
        record_events(self._session, [
            _skipped_event(self._jobs[job_id], self._now, fire_at, reason)
            for (job_id, fire_at), reason in self._reasons.items() if (job_id, fire_at) in inserted
        ])


def _skipped_event(job: Job, now: datetime, fire_at: datetime, reason: str) -> Event:
    return Event(
        event="run.skipped", at=now, job_id=job.id, job_name=job.name, job_type=job.type,
        application=job.application, tenant=job.tenant, reason=reason, scheduled_for=fire_at,
    )
