"""A run's events so far, from its journal: what ``GET /events?run_id=`` replays first.

The live stream (Redis) holds what happens from now on and may have lost the past;
the journal is the record of every state change of the run. Each entry is announced
as the engine announced it (``common.domain.event_names``), in the live stream's JSON
form, so that a client that connects late sees the whole run, then what follows.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from sqlalchemy import select
from sqlalchemy.orm import Session

from common.domain.event_names import run_event_names, task_event_name
from common.domain.states import RUN_TERMINAL, RunState
from common.messaging.messages import Event
from common.persistence.models import Job, JournalEntry, Run, TaskRun
from scheduler.services.errors import NotFound

# Replayed events get ids derived from their journal entry: the same on every replay.
_IDS = uuid.UUID("6f1d3c2a-5b0e-4c8e-9a57-3d2f1b7c9e10")


@dataclass(frozen=True)
class RunHistory:
    """The run's events so far (JSON), and whether it has ended (nothing more will come)."""

    events: list[dict[str, Any]]
    finished: bool


def run_history(session: Session, run_id: UUID) -> RunHistory:
    """Every event of the run so far, oldest first."""
    head = session.execute(
        select(Run.state, Job.id, Job.name, Job.type, Job.application, Job.tenant)
        .join(Job, Job.id == Run.job_id).where(Run.id == run_id)).one_or_none()
    if head is None:
        raise NotFound("run", run_id)
    state, *job = head
    task_ids = {name: task_id for name, task_id in session.execute(
        select(TaskRun.name, TaskRun.id).where(TaskRun.run_id == run_id))}
    entries = session.scalars(select(JournalEntry).where(JournalEntry.run_id == run_id)
                              .order_by(JournalEntry.id))
    events = [
        event.model_dump(mode="json")
        for entry in entries for event in _events(entry, run_id, job, task_ids)
    ]
    return RunHistory(events, RunState(state) in RUN_TERMINAL)


def run_ended(session: Session, run_id: UUID) -> bool:
    """Whether the run has ended (no event of it will come), or :class:`NotFound`."""
    state = session.scalar(select(Run.state).where(Run.id == run_id))
    if state is None:
        raise NotFound("run", run_id)
    return RunState(state) in RUN_TERMINAL


def _events(
    entry: JournalEntry, run_id: UUID, job: list[Any], task_ids: dict[str, UUID],
) -> list[Event]:
    if entry.task is None:
        old = RunState(entry.from_state) if entry.from_state else None
        names = run_event_names(old, RunState(entry.to_state))
    else:
        names = [task_event_name(entry.to_state)]
    job_id, job_name, job_type, application, tenant = job
    return [
        Event(
            id=uuid.uuid5(_IDS, f"{entry.id}:{name}"), event=name, at=entry.at,
            job_id=job_id, job_name=job_name, job_type=job_type, application=application,
            tenant=tenant, run_id=run_id, task=entry.task,
            task_id=task_ids.get(entry.task) if entry.task else None, attempt=entry.attempt,
            previous=entry.from_state or None, state=entry.to_state, reason=entry.reason,
        )
        for name in names
    ]
