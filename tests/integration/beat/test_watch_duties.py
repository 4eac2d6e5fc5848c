"""Lost attempts, task timeouts, suspension and late runs on a real database and Redis.

Each duty is run with a chosen ``now`` (the clock is the test's) and its signals are
applied by a real engine batch, so a test sees the states the signals end in.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session, sessionmaker

from common.config import Settings
from common.domain.spec import JobSpec
from common.messaging.claims import ClaimHolders
from common.messaging.keys import claim_key
from common.messaging.liveness import LIVENESS_TTL, worker_key
from common.messaging.messages import Activation, TaskResult
from common.messaging.publisher import Publisher
from common.persistence.models import JournalEntry, OutboxMessage, Run, TaskRun
from common.persistence.notify_events import recorded_here
from common.persistence.outbox import OutboxRelay
from scheduler.beat import duties, lateness, suspension
from scheduler.beat.attempts import (
    RECHECK_LIVE,
    UNCLAIMED_RECHECK_LEASES,
    ExpiredLeases,
    LostClaims,
)
from scheduler.engine import repair
from scheduler.engine.batch import BatchApplier
from scheduler.engine.incoming import Incoming
from scheduler.services.jobs import create_job

from ..engine.test_concurrent_joins import applier

LEASE = timedelta(seconds=15)


@pytest.fixture
def client(quiet_settings: Settings) -> Iterator[redis.Redis]:
    with contextlib.closing(redis.Redis.from_url(quiet_settings.require_urls()[1])) as c:
        yield c


def start(engine: BatchApplier, sessions: sessionmaker[Session], spec: dict[str, Any]) -> uuid.UUID:
    """Create the job's run and apply its start."""
    with sessions.begin() as session:
        run_id = create_job(session, JobSpec.model_validate(spec), datetime.now(UTC)).run_id
    assert run_id is not None
    message = Activation(run_id=run_id)
    engine.apply([Incoming(message.message_id, run_id, message)])
    return run_id


def signals(session: Session, ids: list[int], run_id: uuid.UUID) -> list[Any]:
    """The activation payloads among the outbox rows ``ids`` that are about ``run_id``."""
    payloads = [session.get_one(OutboxMessage, i).payload for i in ids]
    return [p for p in payloads if p.get("run_id") == str(run_id) and "signal" in p]


def apply(engine: BatchApplier, payloads: list[Any]) -> None:
    for payload in payloads:
        message = Activation.model_validate(payload)
        engine.apply([Incoming(message.message_id, message.run_id, message)])


def tasks(sessions: sessionmaker[Session], run_id: uuid.UUID) -> dict[str, TaskRun]:
    with sessions() as session:
        rows = session.scalars(select(TaskRun).where(TaskRun.run_id == run_id)).all()
        session.expunge_all()
    return {row.name: row for row in rows}


def run_row(sessions: sessionmaker[Session], run_id: uuid.UUID) -> Run:
    with sessions() as session:
        run = session.get_one(Run, run_id)
        session.expunge(run)
    return run


def test_a_ready_attempt_claimed_by_a_dead_worker_is_requeued_and_no_other(
    quiet_settings: Settings, client: redis.Redis,
) -> None:
    engine, sessions = applier(quiet_settings)
    run_id = start(engine, sessions, {"name": "lost-claims", "tasks": [
        {"name": "dead", "type": "noop"}, {"name": "live", "type": "noop"},
        {"name": "queued", "type": "noop"}]})
    before = tasks(sessions, run_id)
    assert {t.state for t in before.values()} == {"READY"}
    assert all(t.claim_check_at is not None for t in before.values())
    client.set(claim_key(f"{before['dead'].id}:1"), "w-dead@host")
    client.set(claim_key(f"{before['live'].id}:1"), "w-live@host")
    client.set(worker_key("w-live@host"), "{}")
    now = max(t.claim_check_at for t in before.values() if t.claim_check_at) + timedelta(seconds=1)
    duty = LostClaims(ClaimHolders(client), LEASE)
    with sessions.begin() as session:
        sent = signals(session, duty(session, now), run_id)
    assert [(s["signal"], s["task"], s["attempt"]) for s in sent] == [("lease_expired", "dead", 1)]
    with sessions.begin() as session:
        assert signals(session, duty(session, now), run_id) == []  # nothing due twice
    apply(engine, sent)
    after = tasks(sessions, run_id)
    assert (after["dead"].state, after["dead"].attempt) == ("READY", 2)
    assert after["dead"].claim_check_at is not None  # the new attempt is watched too
    assert (after["live"].attempt, after["live"].claim_check_at) == (1, now + RECHECK_LIVE)
    assert (after["queued"].attempt, after["queued"].claim_check_at) == (
        1, now + LEASE * UNCLAIMED_RECHECK_LEASES)


def started_by(engine: BatchApplier, sessions: sessionmaker[Session], run_id: uuid.UUID,
               workers: dict[str, str]) -> dict[str, TaskRun]:
    """Report each task started by its worker; return the ACTIVE task runs."""
    for name, worker in workers.items():
        task = tasks(sessions, run_id)[name]
        result = TaskResult(task_run_id=task.id, run_id=run_id, attempt=1, kind="started",
                            worker=worker)
        engine.apply([Incoming(result.message_id, run_id, result)])
    return tasks(sessions, run_id)


def test_an_expired_lease_requeues_only_the_attempt_of_a_dead_worker(
    quiet_settings: Settings, client: redis.Redis,
) -> None:
    engine, sessions = applier(quiet_settings)
    run_id = start(engine, sessions, {"name": "expired-leases", "tasks": [
        {"name": "dead", "type": "sleep"}, {"name": "live", "type": "sleep"}]})
    live_worker = f"w-live-{uuid.uuid4().hex[:6]}@host"
    active = started_by(engine, sessions, run_id, {"dead": "w-gone@host", "live": live_worker})
    client.set(worker_key(live_worker), "{}")
    now = max(t.lease_expires_at for t in active.values() if t.lease_expires_at)
    duty = ExpiredLeases(ClaimHolders(client), LEASE, lambda: timedelta(minutes=5))
    with sessions.begin() as session:
        sent = signals(session, duty(session, now), run_id)
    assert [(s["signal"], s["task"], s["attempt"]) for s in sent] == [("lease_expired", "dead", 1)]
    renewed = tasks(sessions, run_id)
    assert {name: t.lease_expires_at for name, t in renewed.items()} == {
        "dead": now + LEASE,  # the signal goes again if it is lost
        "live": now + RECHECK_LIVE}  # the worker may die any moment
    apply(engine, sent)
    after = tasks(sessions, run_id)
    assert {name: (t.state, t.attempt) for name, t in after.items()} == {
        "dead": ("READY", 2), "live": ("ACTIVE", 1)}


def test_no_worker_is_taken_for_dead_while_redis_is_young(
    quiet_settings: Settings, client: redis.Redis,
) -> None:
    """Right after Redis restarted empty no liveness key exists yet: nothing is requeued."""
    engine, sessions = applier(quiet_settings)
    run_id = start(engine, sessions, {"name": "young-epoch", "tasks": [
        {"name": "a", "type": "sleep"}]})
    active = started_by(engine, sessions, run_id, {"a": "w-not-back-yet@host"})["a"]
    assert active.lease_expires_at is not None
    now = active.lease_expires_at + timedelta(seconds=1)
    duty = ExpiredLeases(ClaimHolders(client), LEASE, lambda: timedelta(seconds=2))
    with sessions.begin() as session:
        assert duty(session, now) == []
    later = tasks(sessions, run_id)["a"]
    wait_for_keys = LIVENESS_TTL - timedelta(seconds=2)
    assert (later.state, later.lease_expires_at) == ("ACTIVE", now + wait_for_keys)


def test_an_active_task_past_its_timeout_ends_timeout_without_its_worker(
    quiet_settings: Settings,
) -> None:
    engine, sessions = applier(quiet_settings)
    run_id = start(engine, sessions, {"name": "backstop", "tasks": [
        {"name": "a", "type": "sleep", "timeout": 30}]})
    task = tasks(sessions, run_id)["a"]
    started = TaskResult(task_run_id=task.id, run_id=run_id, attempt=1, kind="started",
                         worker="w@host")
    engine.apply([Incoming(started.message_id, run_id, started)])
    active = tasks(sessions, run_id)["a"]
    assert active.state == "ACTIVE" and active.claim_check_at is None
    assert active.started_at is not None and active.deadline_at is not None
    margin = quiet_settings.lease_ttl  # the engine's lease
    assert active.deadline_at - active.started_at == timedelta(seconds=30) + margin
    with sessions.begin() as session:
        assert signals(session, duties.time_out_attempts(session, active.started_at), run_id) == []
    with sessions.begin() as session:
        sent = signals(session, duties.time_out_attempts(session, active.deadline_at), run_id)
    assert [(s["signal"], s["task"], s["attempt"]) for s in sent] == [("task_timeout", "a", 1)]
    message = Activation.model_validate(sent[0])
    outcome = engine.apply([Incoming(message.message_id, run_id, message)])
    assert outcome.stops == [f"{task.id}:1"]  # told to stop, in case its worker lives
    assert tasks(sessions, run_id)["a"].state == "TIMEOUT"
    assert run_row(sessions, run_id).state == "TIMEOUT"


def test_suspension_pauses_the_run_and_auto_resume_moves_the_window_a_day(
    quiet_settings: Settings,
) -> None:
    engine, sessions = applier(quiet_settings)
    run_id = start(engine, sessions, {
        "name": "suspended", "suspend_after": 60, "auto_resume": True,
        "tasks": [{"name": "a", "type": "noop"}]})
    run = run_row(sessions, run_id)
    assert run.started_at is not None
    assert run.suspend_due_at == run.started_at + timedelta(seconds=60)
    suspend_at = run.suspend_due_at
    with sessions.begin() as session:
        early = suspension.suspend_due_runs(session, suspend_at - timedelta(seconds=1))
        assert signals(session, early, run_id) == []
        sent = signals(session, suspension.suspend_due_runs(session, suspend_at), run_id)
    assert [s["signal"] for s in sent] == ["suspend"]
    apply(engine, sent)
    run = run_row(sessions, run_id)
    assert run.state == "PAUSED" and tasks(sessions, run_id)["a"].state == "PAUSED"
    # the same time of day as the window's start, on the next day
    assert run.started_at is not None
    assert run.resume_due_at == run.started_at + timedelta(days=1)
    with sessions() as session:
        reasons = session.scalars(select(JournalEntry.reason).where(
            JournalEntry.run_id == run_id, JournalEntry.to_state == "PAUSE_REQUESTED")).all()
    assert reasons == ["suspended"]
    resume_at = run.resume_due_at
    with sessions.begin() as session:
        sent = signals(session, suspension.resume_due_runs(session, resume_at), run_id)
    assert [s["signal"] for s in sent] == ["auto_resume"]
    apply(engine, sent)
    run = run_row(sessions, run_id)
    assert run.state == "ACTIVE" and tasks(sessions, run_id)["a"].state == "READY"
    assert run.resume_due_at is None
    assert run.suspend_due_at == suspend_at + timedelta(days=1)  # the window moved


def test_a_run_not_started_late_after_its_time_is_announced_once(
    quiet_settings: Settings,
) -> None:
    engine, sessions = applier(quiet_settings)
    at = datetime.now(UTC) + timedelta(hours=1)
    spec = JobSpec.model_validate({"name": "late", "late_after": 10,
                                   "schedule": {"at": at.isoformat()},
                                   "tasks": [{"name": "a", "type": "noop"}]})
    with sessions.begin() as session:
        run_id = create_job(session, spec, datetime.now(UTC)).run_id
    assert run_id is not None
    assert run_row(sessions, run_id).late_at == at + timedelta(seconds=10)
    on_time = start(engine, sessions, {"name": "on-time", "late_after": 0,
                                       "tasks": [{"name": "a", "type": "noop"}]})
    now = at + timedelta(seconds=11)
    with sessions.begin() as session:
        assert lateness.announce_late_runs(session, now) == []  # nothing to relay
        events = recorded_here(session, {"event": "run.late"})
    mine = [(e.event, e.run_id, e.state) for e in events if e.run_id in (run_id, on_time)]
    assert mine == [("run.late", run_id, "READY")]
    with sessions.begin() as session:
        assert lateness.announce_late_runs(session, now) == []
        assert recorded_here(session, {"event": "run.late"}) == []
    assert run_row(sessions, on_time).late_at is None


def test_repair_on_start_finishes_half_done_transitions_idempotently(
    quiet_settings: Settings, client: redis.Redis,
) -> None:
    engine, sessions = applier(quiet_settings)
    one_task = [{"name": "a", "type": "noop"}]
    pausing = start(engine, sessions, {"name": "repair-pause", "tasks": one_task})
    canceling = start(engine, sessions, {"name": "repair-cancel", "tasks": one_task})
    ready = start(engine, sessions, {"name": "repair-ready", "tasks": [
        {"name": "x", "type": "noop"}, {"name": "y", "type": "noop"}]})
    with sessions.begin() as session:  # a crash wrote the request, not its conclusion
        for run_id, run_state, task_state in ((pausing, "PAUSE_REQUESTED", "PAUSED"),
                                              (canceling, "CANCEL_REQUESTED", "CANCELED")):
            session.execute(update(Run).where(Run.id == run_id)
                            .values(state=run_state, version=Run.version + 1))
            session.execute(update(TaskRun).where(TaskRun.run_id == run_id)
                            .values(state=task_state))
    claimed = tasks(sessions, ready)["y"]
    client.set(claim_key(f"{claimed.id}:1"), "w@host")
    engine, sessions = applier(quiet_settings)  # a fresh engine, as after the crash
    for _ in range(2):  # the second pass changes nothing more
        with sessions.begin() as session:
            sent = [*signals(session, repair.settle_stopping_runs(session), pausing),
                    *signals(session, repair.settle_stopping_runs(session), canceling),
                    *signals(session, repair.redeliver_unclaimed(session, ClaimHolders(client)),
                             ready)]
        assert sorted((s["signal"], s["task"]) for s in sent) in (
            [("reconcile", None), ("reconcile", None), ("redeliver", "x")],  # first pass
            [("redeliver", "x")],  # the attempt is still READY and unclaimed
        )
        dispatched = []
        for message in map(Activation.model_validate, sent):
            ids = engine.apply([Incoming(message.message_id, message.run_id, message)]).outbox_ids
            with sessions() as session:  # read before the next batch deletes them
                dispatched += [session.get_one(OutboxMessage, i) for i in ids]
        assert run_row(sessions, pausing).state == "PAUSED"
        assert run_row(sessions, canceling).state == "CANCELED"
        assert {t.name: (t.state, t.attempt) for t in tasks(sessions, ready).values()} == {
            "x": ("READY", 1), "y": ("READY", 1)}
        assert [(m.queue, m.payload["task"], m.payload["attempt"]) for m in dispatched
                if m.queue == "tasks.noop"] == [("tasks.noop", "x", 1)]
    relay = OutboxRelay(sessions, Publisher(client), quiet_settings.dispatch_bundle_size)
    stopped: list[str] = []
    assert repair.resend_lost(sessions, relay, client, stopped.extend,
                              lambda: datetime.now(UTC)) >= 1


def test_repair_sends_a_start_marked_sent_ahead_of_its_time_timed(
    quiet_settings: Settings, client: redis.Redis,
) -> None:
    """A lost start that was relayed early (the lookahead) goes again, due at its time."""
    _, sessions = applier(quiet_settings)
    now = datetime.now(UTC)
    due = now + timedelta(seconds=1)
    spec = {"name": f"repair-timed-{uuid.uuid4().hex[:6]}", "schedule": {"at": due.isoformat()},
            "tasks": [{"name": "a", "type": "noop"}]}
    with sessions.begin() as session:
        run_id = create_job(session, JobSpec.model_validate(spec), now).run_id
        sent = duties.start_due_runs(session, now, horizon=due)  # marked sent, timed
        session.execute(delete(OutboxMessage).where(OutboxMessage.id.in_(sent)))  # relayed
    with sessions.begin() as session:  # ... and lost with Redis's data
        ids = repair.resend_marked_signals(session, now)
        rows = [session.get_one(OutboxMessage, i) for i in ids]
        assert [(r.payload["signal"], r.due_at) for r in rows
                if r.payload["run_id"] == str(run_id)] == [("start", due)]
        session.execute(delete(OutboxMessage).where(OutboxMessage.id.in_(ids)))
