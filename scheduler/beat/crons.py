"""The beat's cron duty: turn due fires of cron jobs into runs, exactly once.

A job is due when ``jobs.next_fire_at`` (its next nominal fire, NULL when it has none)
is within :data:`LOOKAHEAD`. Due jobs are claimed with ``FOR UPDATE SKIP LOCKED`` on
the partial index of that column (cost O(due)); in the same transaction each fire gets
its row in ``fires`` (unique per job and time, ``ON CONFLICT DO NOTHING``), its run,
skip or wait, and ``next_fire_at`` moves on. Several beats therefore never fire one
time twice, and a crash loses none. Runs are created up to a second ahead, READY with
``scheduled_for`` at the nominal time, so the beat's precise timer starts them on time.

Convention: a job's fire rows change only under its job row lock.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from sqlalchemy import func, select
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
from common.messaging.messages import ACTIVATE_TASK, ACTIVATION_QUEUE, Activation, Event
from common.messaging.notify import notify_message
from common.messaging.publisher import Outgoing
from common.persistence.models import Fire, Job, Run
from common.persistence.outbox import enqueue
from scheduler.services.runs import create_run

log = logging.getLogger(__name__)
LOOKAHEAD = timedelta(seconds=1)
# A beat that cannot claim a due job (another beat holds it) retries after this pause
# instead of spinning.
RETRY_PAUSE = timedelta(milliseconds=50)
JOBS_PER_TICK = 200
FIRES_PER_JOB = 1000  # a long downtime is worked off over several ticks


def fire_due_crons(session: Session, now: datetime, lookahead: timedelta = LOOKAHEAD) -> list[int]:
    """Process every fire due by ``now + lookahead`` of the jobs claimed; return outbox ids."""
    due = (
        select(Job).where(Job.next_fire_at <= now + lookahead).order_by(Job.next_fire_at)
        .limit(JOBS_PER_TICK).with_for_update(skip_locked=True)
    )
    ids: list[int] = []
    for job in session.scalars(due).all():
        ids += _fire_job(session, job, now, now + lookahead)
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


def next_wakeup(session: Session, now: datetime, wake: datetime) -> datetime:
    """``wake``, or earlier if a fire falls due (within the lookahead) before it."""
    first = session.scalar(
        select(func.min(Job.next_fire_at)).where(Job.next_fire_at.is_not(None))
    )
    if first is None:
        return wake
    return min(wake, max(first - LOOKAHEAD, now + RETRY_PAUSE))


def _fire_job(session: Session, job: Job, now: datetime, horizon: datetime) -> list[int]:
    schedule = _schedule_of(job)
    if schedule is None or job.next_fire_at is None:
        job.next_fire_at = None
        return []
    due: list[datetime] = []
    following = job.next_fire_at
    while following <= horizon and len(due) < FIRES_PER_JOB:
        due.append(following)
        following = schedule.next_after(following)
    spec: dict[str, Any] = job.spec or {}
    decisions = catch_up(
        due, following, now, spec.get("catchup", "none"),
        window=_seconds(spec.get("catchup_window")),
    )
    job.next_fire_at = following
    firing = _JobFiring(session, job, now)
    for decision in decisions:
        firing.apply(decision)
    return firing.finish()


def _schedule_of(job: Job) -> CronSchedule | None:
    """The job's cron schedule if it fires at all (enabled, committed, valid)."""
    cron = (job.schedule or {}).get("cron")
    if not cron or not job.enabled or job.draft:
        return None
    try:
        return CronSchedule.parse(cron, (job.schedule or {}).get("timezone") or "UTC")
    except CronError:
        log.warning("job %s has an unusable cron schedule; it will not fire", job.id)
        return None


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
        """Write the ``run.skipped`` events; return every outbox id to relay."""
        if self.skipped:
            self.outbox_ids += enqueue(self.session, [notify_message(self.skipped)])
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
        fire.outcome, fire.run_id = "run", created.run.id
        self.outbox_ids += created.outbox_ids
        if self.unfinished is not None:
            self.unfinished[created.run.id] = RunState.READY

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
        messages = [_cancel(run_id) for run_id in runs]
        self.outbox_ids += enqueue(self.session, messages)
        for run_id in runs:
            (self.unfinished or {})[run_id] = RunState.CANCEL_REQUESTED

    def _event(self, fire_at: datetime, reason: str) -> Event:
        job = self.job
        return Event(
            event="run.skipped", at=self.now, job_id=job.id, job_name=job.name,
            job_type=job.type, application=job.application, tenant=job.tenant,
            reason=reason, scheduled_for=fire_at,
        )


def _cancel(run_id: UUID) -> Outgoing:
    message = Activation(run_id=run_id, signal="cancel")
    return Outgoing(ACTIVATION_QUEUE, ACTIVATE_TASK, message.model_dump(mode="json"),
                    str(message.message_id))
