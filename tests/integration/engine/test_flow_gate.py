"""Flow control in the engine's transaction (issue 16): held, released, admitted.

Real PostgreSQL and Redis, the engine's batch applier driven by hand: each test's keys
and types carry a fresh suffix, so nothing it checks depends on another test's rows.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from common.config import Settings
from common.domain.spec import JobSpec
from common.messaging.messages import ACTIVATE_TASK, Activation, TaskResult
from common.messaging.publisher import Publisher
from common.persistence.db import make_engine, make_sessions
from common.persistence.models import FlowLimit, OutboxMessage, TaskRun
from common.persistence.outbox import OutboxRelay
from scheduler.beat.flow import ENGINES_ADMIT_FOR, AdmitWaiting, adopt_for_new_limits
from scheduler.engine.batch import BatchApplier, BatchOutcome
from scheduler.engine.flow_gate import FlowGate
from scheduler.engine.incoming import Incoming
from scheduler.engine.loading import RunLoader
from scheduler.engine.structure import StructureCache
from scheduler.services.flow_admission import OperatorLimits
from scheduler.services.flow_limits import set_limit
from scheduler.services.jobs import create_job


def now() -> datetime:
    return datetime.now(UTC)


class Engine:
    """One batch applier with its own pool and caches, as an engine process has."""

    def __init__(self, settings: Settings, flow: FlowGate | None = None) -> None:
        database_url, redis_url = settings.require_urls()
        self.sessions: sessionmaker[Session] = make_sessions(make_engine(database_url))
        relay = OutboxRelay(self.sessions, Publisher(redis.Redis.from_url(redis_url)))
        self.applier = BatchApplier(self.sessions, RunLoader(StructureCache()), relay,
                                    settings.lease_ttl, clock=now,
                                    flow=flow or FlowGate(clock=lambda: 0.0))

    def submit(self, spec: dict[str, Any]) -> uuid.UUID:
        """A job of the spec, named apart from every other test's; its run's id."""
        spec = {**spec, "name": f"{spec['name']}-{uuid.uuid4().hex[:8]}"}
        with self.sessions.begin() as session:
            run_id = create_job(session, JobSpec.model_validate(spec), now()).run_id
        assert run_id is not None
        return run_id

    def start(self, run_id: uuid.UUID) -> None:
        self.send(Activation(run_id=run_id))

    def send(self, message: Activation | TaskResult) -> BatchOutcome:
        return self.applier.apply([Incoming(message.message_id, message.run_id, message)])

    def finish(self, run_id: uuid.UUID, task: str) -> BatchOutcome:
        return self.send(self.result(run_id, task))

    def result(self, run_id: uuid.UUID, task: str) -> TaskResult:
        row = self.task(run_id, task)
        return TaskResult(task_run_id=row.id, run_id=run_id, attempt=row.attempt,
                          kind="finished", outcome="COMPLETED", worker="w1")

    def task(self, run_id: uuid.UUID, name: str) -> TaskRun:
        with self.sessions() as session:
            return session.execute(select(TaskRun).where(
                TaskRun.run_id == run_id, TaskRun.name == name)).scalar_one()

    def states(self, run_ids: list[uuid.UUID]) -> dict[tuple[uuid.UUID, str], str | None]:
        """Each task's ``waiting_for`` (None: dispatched), READY ones only."""
        with self.sessions() as session:
            rows = session.execute(select(TaskRun.run_id, TaskRun.name, TaskRun.waiting_for)
                                   .where(TaskRun.run_id.in_(run_ids),
                                          TaskRun.state == "READY"))
            return {(run_id, name): waiting for run_id, name, waiting in rows}

    def usage(self, key: str) -> int:
        with self.sessions() as session:
            return int(session.scalar(text("SELECT count(*) FROM flow_slots WHERE key = :k"),
                                      {"k": key}) or 0)

    def redeliveries(self, run_ids: list[uuid.UUID]) -> list[tuple[str, str]]:
        """The ``redeliver`` signals in the outbox for these runs: (run id, task)."""
        with self.sessions() as session:
            rows = session.scalars(select(OutboxMessage.payload)
                                   .where(OutboxMessage.task_name == ACTIVATE_TASK))
            return [(p["run_id"], p["task"]) for p in rows
                    if p.get("signal") == "redeliver" and uuid.UUID(p["run_id"]) in run_ids]


def fan_out(name: str, tasks: int, **flow: Any) -> dict[str, Any]:
    return {"name": name, "tasks": [{"name": f"t{i}", "type": "noop", **flow}
                                    for i in range(tasks)]}


def test_a_key_with_limit_two_starts_two_attempts_across_three_runs(
    quiet_settings: Settings,
) -> None:
    engine = Engine(quiet_settings)
    key = f"db-{uuid.uuid4().hex[:8]}"
    limit = {"concurrency": [{"key": key, "limit": 2}]}
    runs = [engine.submit(fan_out(f"job{i}", 2, **limit)) for i in range(3)]
    for run_id in runs:
        engine.start(run_id)
    states = engine.states(runs)
    assert sorted(w is None for w in states.values()) == [False] * 4 + [True] * 2
    assert {w for w in states.values() if w} == {f"concurrency {key} 2/2"}
    assert engine.usage(f"key:{key}") == 2


def test_an_ended_attempt_lets_the_oldest_waiter_of_another_run_go(
    quiet_settings: Settings,
) -> None:
    engine = Engine(quiet_settings)
    key = f"db-{uuid.uuid4().hex[:8]}"
    limit = {"concurrency": [{"key": key, "limit": 1}]}
    first, second = (engine.submit(fan_out(f"job{i}", 1, **limit)) for i in range(2))
    engine.start(first)
    engine.start(second)
    assert engine.states([first, second]) == {
        (first, "t0"): None, (second, "t0"): f"concurrency {key} 1/1"}
    assert engine.task(second, "t0").claim_check_at is None  # no message, no claim
    engine.finish(first, "t0")
    assert engine.redeliveries([second]) == [(str(second), "t0")]
    assert engine.usage(f"key:{key}") == 1  # the slot passed on, not freed
    engine.send(Activation(run_id=second, signal="redeliver", task="t0", attempt=1))
    assert engine.states([second]) == {(second, "t0"): None}
    assert engine.task(second, "t0").claim_check_at is not None  # a lost dispatch is seen
    assert engine.usage(f"key:{key}") == 1


def test_a_canceled_run_gives_up_its_waits_and_slots(quiet_settings: Settings) -> None:
    engine = Engine(quiet_settings)
    key = f"db-{uuid.uuid4().hex[:8]}"
    run_id = engine.submit(fan_out("job", 3, concurrency=[{"key": key, "limit": 1}]))
    engine.start(run_id)
    engine.send(Activation(run_id=run_id, signal="cancel"))
    with engine.sessions() as session:
        waits = session.scalar(text("SELECT count(*) FROM flow_waiters AS w JOIN task_runs "
                                    "AS t ON t.id = w.task_run_id WHERE t.run_id = :r"),
                               {"r": run_id})
    assert waits == 0
    assert engine.usage(f"key:{key}") == 0


def test_an_operators_type_limit_holds_tasks_that_name_no_key(quiet_settings: Settings) -> None:
    engine = Engine(quiet_settings)
    kind = f"render{uuid.uuid4().hex[:8]}"
    with engine.sessions.begin() as session:
        session.add(FlowLimit(key=f"type:{kind}", limit=1, updated_at=now()))
    run_id = engine.submit({"name": "job", "tasks": [
        {"name": f"t{i}", "type": kind} for i in range(3)]})
    engine.start(run_id)
    waiting = sorted(w or "" for w in engine.states([run_id]).values())
    assert waiting == ["", f"concurrency type:{kind} 1/1", f"concurrency type:{kind} 1/1"]


def test_a_rate_admits_its_limit_per_window(quiet_settings: Settings) -> None:
    engine = Engine(quiet_settings)
    key = f"github-{uuid.uuid4().hex[:8]}"
    run_id = engine.submit(fan_out("job", 5, rate={"key": key, "limit": 3, "per": 60}))
    engine.start(run_id)
    waiting = sorted(w or "" for w in engine.states([run_id]).values())
    assert waiting == ["", "", "", f"rate {key} 3/60s", f"rate {key} 3/60s"]
    for task in ("t0", "t1", "t2"):  # ending frees no start: the window counts them
        if engine.task(run_id, task).waiting_for is None:
            engine.finish(run_id, task)
    assert sum(w is not None for w in engine.states([run_id]).values()) == 2


def test_priority_decides_which_waiter_goes_first(quiet_settings: Settings) -> None:
    engine = Engine(quiet_settings)
    key = f"db-{uuid.uuid4().hex[:8]}"
    limit = [{"key": key, "limit": 1}]
    busy = engine.submit(fan_out("busy", 1, concurrency=limit))
    engine.start(busy)
    low = engine.submit(fan_out("low", 3, concurrency=limit, priority=1))
    engine.start(low)
    high = engine.submit(fan_out("high", 1, concurrency=limit, priority=9))
    engine.start(high)
    engine.finish(busy, "t0")
    assert engine.redeliveries([low, high]) == [(str(high), "t0")]


def test_the_beat_leaves_a_key_to_the_engines_while_they_take_its_slots(
    quiet_settings: Settings,
) -> None:
    """A slot freed with no release (its run deleted) is the beat's to fill, but not
    while an engine took a slot of the key lately: the engines admit as the key's slots
    are released, in lanes the beat cannot make."""
    engine = Engine(quiet_settings)
    key = f"db-{uuid.uuid4().hex[:8]}"
    limit = [{"key": key, "limit": 2}]
    gone, running, waiting = (engine.submit(fan_out(f"job{i}", 1, concurrency=limit))
                              for i in range(3))
    for run_id in (gone, running, waiting):
        engine.start(run_id)
    with engine.sessions.begin() as session:
        session.execute(text("DELETE FROM runs WHERE id = :r"), {"r": gone})
    assert engine.usage(f"key:{key}") == 1
    with engine.sessions.begin() as session:
        AdmitWaiting()(session, now())  # ``running``'s slot is a moment old
    assert engine.redeliveries([waiting]) == []
    with engine.sessions.begin() as session:
        AdmitWaiting()(session, now() + ENGINES_ADMIT_FOR + timedelta(seconds=1))
    assert engine.redeliveries([waiting]) == [(str(waiting), "t0")]


def stale_engine(
    settings: Settings, limits: dict[str, tuple[int, float | None]] | None = None,
) -> Engine:
    """An engine whose copy of the operators' limits is ``limits``, never read again: one
    whose copy was read just before a limit was set."""
    frozen = FlowGate(clock=lambda: 0.0, _limits=OperatorLimits(limits or {}), _read_at=0.0)
    return Engine(settings, frozen)


def limited_type(engine: Engine, running: int, limit: int) -> tuple[str, uuid.UUID]:
    """A fresh type with ``running`` attempts dispatched, then limited to ``limit``."""
    kind = f"render{uuid.uuid4().hex[:8]}"
    run_id = engine.submit({"name": "early", "tasks": [
        {"name": f"t{i}", "type": kind} for i in range(running)]})
    engine.start(run_id)
    assert set(engine.states([run_id]).values()) == {None}  # no limit yet: all go
    with engine.sessions.begin() as session:
        set_limit(session, f"type:{kind}", limit=limit, per_s=None, weight=None, now=now())
    return f"type:{kind}", run_id


def test_a_type_limit_counts_attempts_dispatched_before_it(quiet_settings: Settings) -> None:
    """Set while 3 run: they take its slots; one ended by an engine that did not know the
    limit yet is freed by the beat's next pass; the held attempt goes when room is made."""
    stale = stale_engine(quiet_settings)
    key, early = limited_type(stale, running=3, limit=2)
    assert stale.usage(key) == 3
    fresh = Engine(quiet_settings)
    later = fresh.submit({"name": "later", "tasks": [
        {"name": "t0", "type": key.removeprefix("type:")}]})
    fresh.start(later)
    assert fresh.states([later]) == {(later, "t0"): f"concurrency {key} 3/2"}
    stale.finish(early, "t0")  # no limit in its copy: no release
    assert stale.usage(key) == 3
    with stale.sessions.begin() as session:  # the beat's tick, as it runs its duties
        adopt_for_new_limits(session, now())
        AdmitWaiting()(session, now())
    assert stale.usage(key) == 2 and not stale.redeliveries([later])  # 2 of 2: still full
    fresh.finish(early, "t1")
    assert fresh.redeliveries([later]) == [(str(later), "t0")]
    assert fresh.usage(key) == 2  # t2 and the admitted one


def test_an_engine_that_does_not_know_a_new_limit_yet_admits_nothing_past_it(
    quiet_settings: Settings,
) -> None:
    """Its release of a slot of the key makes it admit that key's waiters: as unlimited,
    had it not read the limits again on meeting a key it knew no bound for."""
    stale = stale_engine(quiet_settings, {"type:unrelated": (5, None)})  # it releases slots
    key, early = limited_type(stale, running=3, limit=1)
    fresh = Engine(quiet_settings)
    later = fresh.submit({"name": "later", "tasks": [
        {"name": "t0", "type": key.removeprefix("type:")}]})
    fresh.start(later)
    assert fresh.states([later]) == {(later, "t0"): f"concurrency {key} 3/1"}
    stale.finish(early, "t0")
    assert stale.usage(key) == 2 and not stale.redeliveries([later])


def test_a_batch_of_a_cached_limited_run_is_applied_ahead_of_its_lock(
    quiet_settings: Settings,
) -> None:
    """Its flow read goes with the lock; a message applied before sends it back to the
    ordinary way (applied after the lock), which then changes nothing, for a while."""
    engine = Engine(quiet_settings)
    key = f"db-{uuid.uuid4().hex[:8]}"
    run_id = engine.submit(fan_out("job", 3, concurrency=[{"key": key, "limit": 1}]))
    assert not engine.send(Activation(run_id=run_id)).ahead  # not cached yet
    done = engine.result(run_id, "t0")
    first = engine.send(done)
    assert first.ahead and first.applied == 1
    after = engine.states([run_id])
    assert sorted(w or "" for w in after.values()) == ["", f"concurrency {key} 1/1"]
    again = engine.send(done)  # redelivered: seen before, so applied after the lock
    assert (again.ahead, again.applied, again.duplicates) == (False, 0, 1)
    assert again.outcomes == {"w1": [str(done.message_id)]}  # acknowledged all the same
    assert engine.states([run_id]) == after and engine.usage(f"key:{key}") == 1
    running = next(name for (_, name), waiting in after.items() if waiting is None)
    assert not engine.finish(run_id, running).ahead  # the run is locked first for a while
    assert list(engine.states([run_id]).values()) == [None]


def test_a_run_another_engine_changed_is_applied_after_its_lock(
    quiet_settings: Settings,
) -> None:
    """Engine A's cached copy is a version behind: its batch goes the ordinary way and is
    applied once, on what engine B committed."""
    one, two = Engine(quiet_settings), Engine(quiet_settings)
    key = f"db-{uuid.uuid4().hex[:8]}"
    run_id = one.submit(fan_out("job", 3, concurrency=[{"key": key, "limit": 1}]))
    one.start(run_id)
    assert one.finish(run_id, "t0").ahead  # t1 or t2 goes
    running = [name for (_, name), waiting in one.states([run_id]).items() if waiting is None]
    two.finish(run_id, running[0])  # the last one goes
    last = next(name for (_, name) in one.states([run_id]))
    outcome = one.finish(run_id, last)
    assert (outcome.ahead, outcome.applied) == (False, 1)
    with one.sessions() as session:
        state = session.scalar(text("SELECT state FROM runs WHERE id = :r"), {"r": run_id})
        completions = session.scalar(text(
            "SELECT count(*) FROM journal WHERE run_id = :r AND task IS NOT NULL "
            "AND to_state = 'COMPLETED'"), {"r": run_id})
    assert (state, completions) == ("COMPLETED", 3)
    assert one.usage(f"key:{key}") == 0
