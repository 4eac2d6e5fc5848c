"""The run control timers on a real database: due runs are signalled once, others not."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from common.domain.spec import JobSpec
from common.persistence.db import make_engine, make_sessions
from common.persistence.models import OutboxMessage, Run
from scheduler.beat import timers
from scheduler.services.jobs import create_job

NOW = datetime.now(UTC)
GRACE = timedelta(seconds=5)


def _run(sessions: sessionmaker[Session], name: str, **columns: object) -> uuid.UUID:
    spec = JobSpec.model_validate({"name": name, "tasks": [{"name": "a", "type": "noop"}]})
    with sessions.begin() as session:
        run_id = create_job(session, spec, NOW - timedelta(minutes=1)).run_id
        assert run_id is not None
        session.execute(update(Run).where(Run.id == run_id).values(**columns))
    return run_id


def _signals(sessions: sessionmaker[Session], run_ids: set[uuid.UUID]) -> list[tuple[str, str]]:
    with sessions.begin() as session:
        ids = (timers.signal_cancel_grace(session, NOW, GRACE)
               + timers.signal_run_timeouts(session, NOW))
        payloads = [session.get_one(OutboxMessage, i).payload for i in ids]
    return sorted((p["run_id"], p["signal"]) for p in payloads
                  if uuid.UUID(p["run_id"]) in run_ids)


def test_cancel_grace_and_run_timeout_are_signalled_once_when_due(own_database: str) -> None:
    sessions = make_sessions(make_engine(own_database))
    graced = _run(sessions, "grace-over", state="CANCEL_REQUESTED",
                  cancel_requested_at=NOW - GRACE - timedelta(seconds=1))
    young = _run(sessions, "grace-running", state="CANCEL_REQUESTED",
                 cancel_requested_at=NOW - GRACE + timedelta(seconds=1))
    late = _run(sessions, "timed-out", state="ACTIVE", timeout_at=NOW - timedelta(seconds=1))
    early = _run(sessions, "in-time", state="ACTIVE", timeout_at=NOW + timedelta(seconds=5))
    mine = {graced, young, late, early}
    assert _signals(sessions, mine) == sorted(
        [(str(graced), "cancel_grace_over"), (str(late), "run_timeout")]
    )
    assert _signals(sessions, mine) == []  # marked in the same transaction
    with sessions() as session:
        rows = {r.id: r for r in session.execute(
            select(Run.id, Run.cancel_grace_sent_at, Run.timeout_at).where(Run.id.in_(mine))
        )}
    assert rows[graced].cancel_grace_sent_at == NOW
    assert rows[young].cancel_grace_sent_at is None
    assert rows[late].timeout_at is None
    assert rows[early].timeout_at is not None
