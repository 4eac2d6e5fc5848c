"""Lanes in the engine's transaction (issue 16): a backlog on a wide limit, admitted in
lanes that each hold one slot and travel as one message.

Real PostgreSQL and Redis, the engine's batch applier driven by hand (``Engine`` of
``test_flow_gate``); each test's key carries a fresh suffix.
"""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

import redis
from sqlalchemy import delete, select, text

from common.config import Settings
from common.messaging.claims import ClaimHolders
from common.messaging.epoch import current_epoch
from common.messaging.messages import EXECUTE_BUNDLE_TASK, EXECUTE_TASK, Activation, TaskResult
from common.persistence.models import FlowSlot, OutboxMessage, TaskRun
from scheduler.engine import repair
from scheduler.engine.incoming import Incoming
from tests.integration.engine.test_flow_gate import Engine, fan_out


def slots(engine: Engine, key: str) -> tuple[int, int]:
    """The key's slot rows, and its slots in use (lanes counted once)."""
    with engine.sessions() as session:
        rows, lanes = session.execute(text(
            "SELECT count(*), count(DISTINCT coalesce(lane, task_run_id)) FROM flow_slots "
            "WHERE key = :k"), {"k": key}).one()
    return int(rows), int(lanes)


def messages(engine: Engine, run_id: uuid.UUID) -> list[tuple[str, bool, list[str]]]:
    """The run's dispatch messages in the outbox: kind, lane or not, its tasks."""
    with engine.sessions() as session:
        rows = session.execute(select(OutboxMessage.task_name, OutboxMessage.payload).where(
            OutboxMessage.task_name.in_([EXECUTE_TASK, EXECUTE_BUNDLE_TASK]))).all()
    out = []
    for kind, payload in rows:
        items = payload["dispatches"] if kind == EXECUTE_BUNDLE_TASK else [payload]
        if str(run_id) in {item["run_id"] for item in items}:
            out.append((kind, bool(payload.get("lane")), [item["task"] for item in items]))
    return out


def first_lane(
    settings: Settings, size: int,
) -> tuple[Engine, str, uuid.UUID, list[str]]:
    """A started fan-out of ``size`` tasks on a fresh key of limit 8, its first lane's tasks."""
    engine = Engine(settings)
    key = f"db-{uuid.uuid4().hex[:8]}"
    run_id = engine.submit(fan_out("job", size, concurrency=[{"key": key, "limit": 8}]))
    engine.start(run_id)
    return engine, key, run_id, next(tasks for _, _, tasks in messages(engine, run_id))


def test_a_backlog_on_a_wide_limit_goes_in_lanes_that_each_take_one_slot(
    quiet_settings: Settings,
) -> None:
    engine = Engine(quiet_settings)
    key = f"db-{uuid.uuid4().hex[:8]}"
    run_id = engine.submit(fan_out("job", 100, concurrency=[{"key": key, "limit": 8}]))
    engine.start(run_id)
    waiting = Counter(engine.states([run_id]).values())
    assert waiting == {None: 64, f"concurrency {key} 8/8": 36}
    assert slots(engine, f"key:{key}") == (64, 8)
    sent = messages(engine, run_id)
    assert [(kind, lane, len(tasks)) for kind, lane, tasks in sent] == [
        (EXECUTE_BUNDLE_TASK, True, 8)] * 8
    laned = {task for _, _, tasks in sent for task in tasks}
    assert laned == {name for (_, name), w in engine.states([run_id]).items() if w is None}


def test_a_busy_batch_opens_only_the_slots_its_lanes_fill(quiet_settings: Settings) -> None:
    """600 waiting on 50 free slots, 256 of them read (the engine's most): eight full
    lanes, not seven and 43 attempts alone; the rest is the next batch's to fill."""
    engine = Engine(quiet_settings)
    key = f"db-{uuid.uuid4().hex[:8]}"
    run_id = engine.submit(fan_out("job", 600, concurrency=[{"key": key, "limit": 50}]))
    engine.start(run_id)
    assert slots(engine, f"key:{key}") == (256, 8)
    assert Counter(engine.states([run_id]).values()) == {
        None: 256, f"concurrency {key} 8/50": 344}


def test_a_quiet_batch_gives_every_free_slot_an_attempt(quiet_settings: Settings) -> None:
    """One attempt ended: the 34 waiters read take 34 of the 42 free slots, one each.

    Tasks that end one at a time may be long: a lane of them would run one after
    another (until given back), where the limit allows them side by side.
    """
    engine = Engine(quiet_settings)
    key = f"db-{uuid.uuid4().hex[:8]}"
    run_id = engine.submit(fan_out("job", 600, concurrency=[{"key": key, "limit": 50}]))
    engine.start(run_id)
    lane = next(tasks for _, _, tasks in messages(engine, run_id))
    engine.finish(run_id, lane[0])
    assert slots(engine, f"key:{key}") == (255 + 34, 8 + 34)


def test_a_lane_frees_its_slot_when_its_last_attempt_ends(quiet_settings: Settings) -> None:
    engine, key, run_id, lane = first_lane(quiet_settings, 80)
    for task in lane[:-1]:
        engine.finish(run_id, task)
    assert slots(engine, f"key:{key}") == (57, 8)
    assert sum(w is None for w in engine.states([run_id]).values()) == 57
    engine.finish(run_id, lane[-1])
    assert slots(engine, f"key:{key}") == (64, 8)  # a new lane of 8 took the slot
    assert Counter(engine.states([run_id]).values()) == {
        None: 64, f"concurrency {key} 8/8": 8}


def timed_result(engine: Engine, run_id: uuid.UUID, task: str, ran_s: float) -> TaskResult:
    """The task's attempt finished now, having run ``ran_s`` by the worker's clock."""
    ended = datetime.now(UTC)
    return engine.result(run_id, task).model_copy(
        update={"at": ended, "started_at": ended - timedelta(seconds=ran_s)})


def test_a_key_whose_attempts_run_long_gets_no_lane_to_give_back(
    quiet_settings: Settings,
) -> None:
    """Attempts of half a second each: a lane of them would run one and give the rest
    back after 200 ms, to wait and be admitted again; the freed slot takes one."""
    engine, key, run_id, lane = first_lane(quiet_settings, 80)
    for task in lane:
        engine.send(timed_result(engine, run_id, task, 0.5))
    assert slots(engine, f"key:{key}") == (57, 8)  # one attempt took the freed slot
    assert messages(engine, run_id)[-1][:2] == (EXECUTE_TASK, False)


def lane_lengths_after_a_lane_ends(quiet_settings: Settings, ran_s: float | None) -> list[int]:
    """A fan-out of 600 on a limit of 50, its first lane's 32 attempts ended in one batch
    (each run ``ran_s`` by the worker's clock, None: not said): the lanes sent since."""
    engine = Engine(quiet_settings)
    key = f"db-{uuid.uuid4().hex[:8]}"
    run_id = engine.submit(fan_out("job", 600, concurrency=[{"key": key, "limit": 50}]))
    engine.start(run_id)
    sent = len(messages(engine, run_id))
    ended = []
    for task in next(tasks for _, _, tasks in messages(engine, run_id)):
        result = engine.result(run_id, task) if ran_s is None else timed_result(
            engine, run_id, task, ran_s)
        ended.append(Incoming(result.message_id, run_id, result))
    engine.applier.apply(ended)
    return sorted(len(tasks) for _, _, tasks in messages(engine, run_id)[sent:])


def test_a_key_whose_attempts_are_instant_gets_lanes_as_long_as_its_limit(
    quiet_settings: Settings,
) -> None:
    """Until one of a key's attempts has ended its lanes are 32 long at most (its tasks
    may be slow); once they are known to take a millisecond, as long as the limit."""
    assert max(lane_lengths_after_a_lane_ends(quiet_settings, None)) == 32
    assert max(lane_lengths_after_a_lane_ends(quiet_settings, 0.001)) == 50


def test_an_attempt_of_a_lane_sent_again_leaves_it_and_waits(quiet_settings: Settings) -> None:
    """A ``redeliver`` (its message lost with Redis) must not send it alone beside its lane."""
    engine, key, run_id, lane = first_lane(quiet_settings, 70)
    attempt = engine.task(run_id, lane[3]).attempt
    engine.send(Activation(run_id=run_id, signal="redeliver", task=lane[3], attempt=attempt))
    assert engine.task(run_id, lane[3]).waiting_for == f"concurrency {key} 8/8"
    assert slots(engine, f"key:{key}") == (63, 8)


def test_narrow_limits_and_rates_admit_no_lanes(quiet_settings: Settings) -> None:
    engine = Engine(quiet_settings)
    narrow, rated = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("db", "api"))
    first = engine.submit(fan_out("narrow", 20, concurrency=[{"key": narrow, "limit": 7}]))
    second = engine.submit(fan_out("rated", 20, concurrency=[{"key": narrow + "w", "limit": 8}],
                                   rate={"key": rated, "limit": 8, "per": 60}))
    engine.start(first)
    engine.start(second)
    assert slots(engine, f"key:{narrow}") == (7, 7)
    assert slots(engine, f"key:{narrow}w") == (8, 8)
    assert not any(lane for run in (first, second) for _, lane, _ in messages(engine, run))


def test_repair_sends_a_lane_again_only_once_redis_lost_its_message(
    quiet_settings: Settings,
) -> None:
    """An engine's start finds a lane's attempts unclaimed while their message waits in
    Redis: sent again alone they would run beside the lane's others. Only attempts
    admitted before Redis's data began (their message lost with it) go again."""
    engine = Engine(quiet_settings)
    key = f"db-{uuid.uuid4().hex[:8]}"
    run_id = engine.submit(fan_out("job", 24, concurrency=[{"key": key, "limit": 8}]))
    client = redis.Redis.from_url(quiet_settings.require_urls()[1])
    began = datetime.fromtimestamp(current_epoch(client).began_s, UTC)
    engine.start(run_id)
    with engine.sessions() as session:
        laned = set(session.scalars(select(TaskRun.name).join(
            FlowSlot, FlowSlot.task_run_id == TaskRun.id).where(
            TaskRun.run_id == run_id, FlowSlot.lane.is_not(None))))
    assert len(laned) == 24  # 8 lanes of 3
    assert redelivered(engine, run_id, ClaimHolders(client), began) == set()
    lost = datetime.now(UTC) + timedelta(seconds=1)  # Redis began again after the dispatch
    assert redelivered(engine, run_id, ClaimHolders(client), lost) == laned


def redelivered(engine: Engine, run_id: uuid.UUID, claims: ClaimHolders,
                began: datetime) -> set[str]:
    with engine.sessions.begin() as session:
        ids = repair.redeliver_unclaimed(session, claims, began)
        payloads = session.scalars(select(OutboxMessage.payload).where(
            OutboxMessage.id.in_(ids))).all()
        session.execute(delete(OutboxMessage).where(OutboxMessage.id.in_(ids)))
    return {p["task"] for p in payloads if p["run_id"] == str(run_id)}
