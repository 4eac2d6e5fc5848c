"""A finished attempt's claim is shortened once its end is committed (issue 18, capacity).

Workers claim each attempt in Redis for a day (``CLAIM_TTL``); kept that long for every
attempt, the claims alone took ~130 GB at 10,000 attempts a second. Once the engine has
committed an attempt's end, the claim only has to outlast a late second delivery of the
same dispatch, so the round trip that acknowledges the outcome sets it to an hour.
"""

from __future__ import annotations

import uuid

import redis

from common.config import Settings
from common.messaging.keys import CLAIM_TTL, FINISHED_CLAIM_TTL, claim_key
from common.messaging.messages import TaskResult
from scheduler.engine.batch import BatchApplier
from scheduler.engine.incoming import Incoming

from .test_detached import started_run


def sent(engine: BatchApplier, client: redis.Redis, result: TaskResult) -> None:
    """Commit the result and send what the batch sends, as the engine's consumer does."""
    outcome = engine.commit([Incoming(result.message_id, result.run_id, result)])
    assert outcome.applied == 1
    with client.pipeline(transaction=False) as pipe:
        engine.send(pipe, outcome)
        pipe.execute()


def result(run_id: uuid.UUID, task_id: uuid.UUID, kind: str, **fields: object) -> TaskResult:
    return TaskResult.model_validate({"task_run_id": task_id, "run_id": run_id, "attempt": 1,
                                      "kind": kind, "worker": "w1", **fields})


def test_a_claim_lives_a_day_while_its_attempt_runs_and_an_hour_after_it_ends(
    quiet_settings: Settings,
) -> None:
    engine, _, run_id, task_id = started_run(quiet_settings)
    assert quiet_settings.redis_url is not None
    client = redis.Redis.from_url(quiet_settings.redis_url)
    key = claim_key(f"{task_id}:1")
    client.set(key, "w1", ex=CLAIM_TTL)
    hour_s = FINISHED_CLAIM_TTL.total_seconds()
    try:
        sent(engine, client, result(run_id, task_id, "started"))
        assert client.ttl(key) > hour_s

        sent(engine, client, result(run_id, task_id, "finished", outcome="COMPLETED"))
        assert 0 < client.ttl(key) <= hour_s
        assert client.get(key) == b"w1"
    finally:
        client.delete(key)


def test_a_detached_attempt_keeps_its_claim_a_day(quiet_settings: Settings) -> None:
    """A detached ``started`` is an outcome the worker hands over, not the attempt's end."""
    engine, _, run_id, task_id = started_run(quiet_settings)
    assert quiet_settings.redis_url is not None
    client = redis.Redis.from_url(quiet_settings.redis_url)
    key = claim_key(f"{task_id}:1")
    client.set(key, "w1", ex=CLAIM_TTL)
    try:
        sent(engine, client, result(run_id, task_id, "started", detached=True))
        assert client.ttl(key) > FINISHED_CLAIM_TTL.total_seconds()
    finally:
        client.delete(key)
