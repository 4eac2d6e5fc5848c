"""Claiming attempts before running them: at most one run per idempotency key.

Every consumer of ``tasks.<type>`` (the workers, the connector) claims an attempt in
Redis before it runs it. A relay may deliver a dispatch twice, and the broker
redelivers a message whose consumer died; either way the attempt must not run again.
The engine requeues a lost attempt under a new attempt number, which is a new key.
The claim's value names the claimant, which the beat compares with the liveness
records (``scheduler.beat.attempts``), so a claimant must keep one.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import redis

from common.messaging.keys import CLAIM_TTL, cancel_key, claim_key
from common.messaging.liveness import worker_key
from common.messaging.messages import EXECUTE_TASK, TaskDispatch
from common.messaging.publisher import Outgoing
from common.messaging.signals import activation
from common.messaging.wire import envelope

logger = logging.getLogger(__name__)

# Claim and cancel check of several attempts in one call: for each, whether this
# claimant is the first to claim it and whether it was cancelled. A pipeline object
# costs more CPU to build in redis-py than the round trips it saves.
CLAIM_SCRIPT = """
local answers = {}
for i = 1, #KEYS, 2 do
  answers[#answers + 1] = redis.call('SET', KEYS[i], ARGV[1], 'NX', 'EX', ARGV[2]) and 1 or 0
  answers[#answers + 1] = redis.call('EXISTS', KEYS[i + 1])
end
return answers
"""


# Hand attempts back to their queue: each claim is dropped (if this claimant holds it)
# and its dispatch pushed, together, so an attempt is never both unclaimed and unqueued.
# KEYS: the claim keys, then the queues; ARGV: the claimant, then the messages.
HAND_BACK_SCRIPT = """
local n = #ARGV - 1
for i = 1, n do
  if redis.call('GET', KEYS[i]) == ARGV[1] then redis.call('DEL', KEYS[i]) end
  redis.call('LPUSH', KEYS[n + i], ARGV[i + 1])
end
return n
"""


def claim(client: redis.Redis, dispatches: Sequence[TaskDispatch], worker: str) -> list[bool]:
    """For each attempt, whether ``worker`` may run it: first to claim it, not cancelled.

    One Redis call for all of them. An attempt cancelled before it started stays
    claimed, so that no other consumer runs it either.
    """
    if not dispatches:
        return []
    keys: list[str] = []
    for dispatch in dispatches:
        keys += [claim_key(dispatch.idempotency_key), cancel_key(dispatch.idempotency_key)]
    script = client.register_script(CLAIM_SCRIPT)
    answers = script(keys=keys, args=[worker, int(CLAIM_TTL.total_seconds())])
    allowed = []
    for i, dispatch in enumerate(dispatches):
        claimed, cancelled = answers[2 * i], answers[2 * i + 1]
        label = f"run {dispatch.run_id} task {dispatch.task!r} attempt {dispatch.attempt}"
        if not claimed:
            logger.info("%s: already claimed (%s), skipped", label, dispatch.idempotency_key)
        elif cancelled:
            logger.info("%s: cancelled before it started, skipped", label)
        allowed.append(bool(claimed and not cancelled))
    return allowed


def hand_back(
    client: redis.Redis, queue: str, dispatches: Sequence[TaskDispatch], worker: str
) -> None:
    """Give up ``worker``'s claims of ``dispatches`` and queue each again, atomically."""
    _drop_claims_and_send(client, dispatches, worker, [
        Outgoing(queue, EXECUTE_TASK, d.model_dump(mode="json"), d.idempotency_key)
        for d in dispatches
    ])


def give_back(client: redis.Redis, dispatches: Sequence[TaskDispatch], worker: str) -> None:
    """Give up ``worker``'s claims of a lane's ``dispatches``; have the engine send them again.

    A ``redeliver`` for each, atomically with the claims: it puts an attempt of a lane
    back among the waiters. Queued again as they are, they could run beside the lane's
    others.
    """
    _drop_claims_and_send(client, dispatches, worker, [
        activation(d.run_id, "redeliver", d.task, d.attempt) for d in dispatches
    ])


def _drop_claims_and_send(
    client: redis.Redis, dispatches: Sequence[TaskDispatch], worker: str,
    messages: Sequence[Outgoing],
) -> None:
    """Drop ``worker``'s claim of each attempt and push its message, in one Lua call."""
    if not dispatches:
        return
    keys = [claim_key(d.idempotency_key) for d in dispatches] + [m.queue for m in messages]
    bodies = [envelope(m.queue, m.task_name, m.payload, m.task_id) for m in messages]
    client.eval(HAND_BACK_SCRIPT, len(keys), *keys, worker, *bodies)


class ClaimHolders:
    """Reads who holds attempts' claims and whether those workers are alive (Redis)."""

    def __init__(self, client: redis.Redis) -> None:
        self._redis = client

    def holders(self, idempotency_keys: Sequence[str]) -> list[str | None]:
        """The worker holding each attempt's claim; None where nobody has claimed it."""
        if not idempotency_keys:
            return []
        values = self._redis.mget([claim_key(key) for key in idempotency_keys])
        return [_text(value) for value in values]

    def live(self, workers: set[str]) -> set[str]:
        """Those of ``workers`` whose liveness key exists now."""
        names = sorted(workers)
        if not names:
            return set()
        records = self._redis.mget([worker_key(name) for name in names])
        return {name for name, record in zip(names, records, strict=True) if record is not None}


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode()
    return value if isinstance(value, str) else None
