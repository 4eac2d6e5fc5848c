"""The beat's probes on a real database: each flag is set by a row its duty would claim.

The firing and watch duties run only when ``FIRING_DUE`` / ``WATCH_DUE`` say they have
work, so a predicate there that differs from its duty's would leave work undone.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from psycopg.rows import dict_row, tuple_row
from sqlalchemy import delete, event, select, update
from sqlalchemy.orm import Session, sessionmaker

from common.domain.spec import JobSpec
from common.messaging.claims import ClaimHolders
from common.messaging.publisher import Publisher
from common.persistence.db import HeldConnection, driver, make_engine, make_sessions
from common.persistence.models import (
    FlowLimit,
    FlowStart,
    Job,
    OutboxMessage,
    Run,
    TaskRun,
)
from common.persistence.outbox import OutboxRelay
from common.persistence.queries import FIRING_DUE, WATCH_DUE
from scheduler.beat import duties, flow, lateness, suspension, timers
from scheduler.beat.attempts import ExpiredLeases, LostClaims
from scheduler.beat.ticker import STEPS_PER_TICK, Duty, Ticker
from scheduler.services.jobs import create_job

NOW = datetime.now(UTC)
GRACE = timedelta(seconds=5)
PAST = NOW - timedelta(seconds=1)


def flags(session: Session) -> dict[str, bool]:
    firing = driver(session).cursor(row_factory=dict_row).execute(
        FIRING_DUE, {"horizon": NOW}).fetchone()
    assert firing is not None
    watch = session.execute(WATCH_DUE, {"now": NOW, "grace_over": NOW - GRACE,
                                        "limits_since": NOW - flow.REPAIR_FOR}).one()._mapping
    return {**firing, **watch}


def a_run(session: Session, run: Mapping[str, Any], task: Mapping[str, Any]) -> uuid.UUID:
    """A one-off job whose run has nothing due but what ``run`` and ``task`` columns say."""
    spec = JobSpec.model_validate({"name": f"probe-{uuid.uuid4().hex[:8]}",
                                   "tasks": [{"name": "a", "type": "noop"}]})
    created = create_job(session, spec, NOW)
    quiet = {"state": "ACTIVE", "scheduled_for": NOW + timedelta(hours=1), "late_at": None,
             "timeout_at": None, "suspend_due_at": None, "resume_due_at": None}
    session.execute(update(Run).where(Run.id == created.run_id).values({**quiet, **run}))
    if task:
        session.execute(update(TaskRun).where(TaskRun.run_id == created.run_id).values(task))
    return created.job_id


CASES: list[tuple[str, dict[str, Any], dict[str, Any], Duty]] = [
    ("runs", {"state": "READY", "scheduled_for": PAST, "activation_sent_at": None}, {},
     duties.start_due_runs),
    ("retries", {}, {"retry_at": PAST}, duties.fire_due_retries),
    ("cancel_grace", {"state": "CANCEL_REQUESTED", "cancel_requested_at": NOW - 2 * GRACE},
     {}, lambda s, now: timers.signal_cancel_grace(s, now, GRACE)),
    ("run_timeouts", {"timeout_at": PAST}, {}, timers.signal_run_timeouts),
    ("attempt_timeouts", {}, {"deadline_at": PAST}, duties.time_out_attempts),
    ("suspend", {"suspend_due_at": PAST}, {}, suspension.suspend_due_runs),
    ("resume", {"state": "PAUSED", "resume_due_at": PAST}, {}, suspension.resume_due_runs),
    ("late", {"state": "READY", "late_at": PAST}, {}, lateness.announce_late_runs),
]


def test_each_flag_is_set_by_a_row_its_duty_claims_and_only_then(
    sessions: sessionmaker[Session],
) -> None:
    with sessions() as session:
        assert not any(flags(session).values())
    for flag, run, task, duty in CASES:
        with sessions.begin() as session:
            job_id = a_run(session, run, task)
        with sessions.begin() as session:
            assert {name for name, on in flags(session).items() if on} >= {flag}, flag
            duty(session, NOW)  # the duty claims the row: due no more
            assert not flags(session)[flag], flag
            session.execute(delete(Job).where(Job.id == job_id))
        with sessions() as session:
            assert not any(flags(session).values()), flag


def test_a_passed_lease_and_a_due_claim_check_set_their_flags_until_judged(
    sessions: sessionmaker[Session], redis_url: str,
) -> None:
    """Attempts of no live worker: the lease's is requeued, the unclaimed one waits on."""
    holders = ClaimHolders(redis.Redis.from_url(redis_url))
    lease, settled = timedelta(seconds=30), lambda: timedelta(hours=1)
    cases: list[tuple[str, dict[str, Any], Duty]] = [
        ("leases", {"lease_expires_at": PAST}, ExpiredLeases(holders, lease, settled)),
        ("claims", {"claim_check_at": PAST}, LostClaims(holders, lease, settled)),
    ]
    for flag, task, duty in cases:
        with sessions.begin() as session:
            job_id = a_run(session, {}, task)
        with sessions.begin() as session:
            assert flags(session)[flag], flag
            sent = duty(session, NOW)
            assert not flags(session)[flag], flag
            session.execute(delete(OutboxMessage).where(OutboxMessage.id.in_(sent)))
            session.execute(delete(Job).where(Job.id == job_id))


def test_flow_control_in_use_sets_its_flag(sessions: sessionmaker[Session]) -> None:
    """A rate's recent starts keep the admission (and its pruning) running."""
    key = f"key:probe-{uuid.uuid4().hex[:8]}"
    with sessions.begin() as session:
        session.add(FlowStart(key=key, at=NOW))
    with sessions.begin() as session:
        assert flags(session)["flow"]
        session.execute(delete(FlowStart).where(FlowStart.key == key))
    with sessions() as session:
        assert not flags(session)["flow"]


def test_a_cron_due_and_a_buffered_fire_set_their_flags(sessions: sessionmaker[Session]) -> None:
    spec = JobSpec.model_validate({"name": f"probe-{uuid.uuid4().hex[:8]}", "draft": True,
                                   "tasks": [{"name": "a", "type": "noop"}]})
    with sessions.begin() as session:
        job_id = create_job(session, spec, NOW).job_id
        session.execute(update(Job).where(Job.id == job_id).values(next_fire_at=PAST))
    with sessions.begin() as session:
        assert flags(session)["crons"]
        session.execute(delete(Job).where(Job.id == job_id))


def test_a_type_or_tenant_limit_set_lately_sets_its_flag(
    sessions: sessionmaker[Session],
) -> None:
    """Only a type's or tenant's limit set within ``REPAIR_FOR`` (what may run unslotted)."""
    name = uuid.uuid4().hex[:8]
    rows = [FlowLimit(key=f"type:{name}", limit=1, updated_at=NOW),
            FlowLimit(key=f"key:{name}", limit=1, updated_at=NOW),
            FlowLimit(key=f"tenant:{name}", limit=1, updated_at=NOW - 2 * flow.REPAIR_FOR)]
    for row in rows:
        with sessions.begin() as session:
            session.add(row)
        with sessions() as session:
            assert flags(session)["new_limits"] == row.key.startswith("type:"), row.key
        with sessions.begin() as session:
            session.execute(delete(FlowLimit).where(FlowLimit.key == row.key))


def test_an_idle_step_opens_no_transaction_and_a_due_retry_is_fired_by_the_next(
    sessions: sessionmaker[Session], redis_url: str,
) -> None:
    in_transaction: list[bool] = []  # per statement: sent inside a transaction?

    def record(conn: Any, cursor: Any, *_: Any) -> None:
        in_transaction.append(not cursor.connection.autocommit)

    engine = sessions.kw["bind"]
    event.listen(engine, "before_cursor_execute", record)
    relay = OutboxRelay(sessions, Publisher(redis.Redis.from_url(redis_url)))
    ticker = Ticker(sessions, relay, timedelta(seconds=1), clock=lambda: NOW)
    job_id = None
    try:
        ticker.tick()  # the full step: the watch duties' transaction
        in_transaction.clear()
        for _ in range(STEPS_PER_TICK - 2):
            ticker.tick()
        assert in_transaction == []  # the probe alone, on its own connection
        with sessions.begin() as session:
            job_id = a_run(session, {}, {"retry_at": PAST})
        in_transaction.clear()
        ticker.tick()
        assert in_transaction and all(in_transaction)
        with sessions() as session:
            signals = [m.payload.get("signal") for m in session.scalars(select(OutboxMessage))]
            assert "retry_due" in signals
    finally:
        event.remove(engine, "before_cursor_execute", record)
        with sessions.begin() as session:
            session.execute(delete(Job).where(Job.id == job_id))
            session.execute(delete(OutboxMessage))


def test_the_probes_connection_reads_outside_any_transaction(
    sessions: sessionmaker[Session],
) -> None:
    held = HeldConnection(sessions)
    try:
        first = held.execute("SELECT transaction_timestamp()", None, tuple_row)
        second = held.execute("SELECT transaction_timestamp()", None, tuple_row)
        assert first != second  # a transaction of its own each: autocommit
    finally:
        held.close()


def test_a_stopped_ticker_gives_back_its_probes_connection(
    own_database: str, redis_url: str,
) -> None:
    """The probe holds one connection across ticks; a beat that stops closes it."""
    engine = make_engine(own_database)
    sessions = make_sessions(engine)
    relay = OutboxRelay(sessions, Publisher(redis.Redis.from_url(redis_url)))
    ticker = Ticker(sessions, relay, timedelta(seconds=1), clock=lambda: NOW)
    stepped = threading.Event()
    real_tick = ticker.tick

    def tick_then_stop() -> datetime:
        wake = real_tick()
        assert engine.pool.checkedout() == 1  # type: ignore[attr-defined]  # the probe's
        stepped.set()
        ticker.stopping.set()
        return wake

    ticker.tick = tick_then_stop  # type: ignore[method-assign]
    try:
        runner = threading.Thread(target=ticker.run)
        runner.start()
        runner.join(timeout=30)
        assert stepped.is_set() and not runner.is_alive()
        assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    finally:
        engine.dispose()
