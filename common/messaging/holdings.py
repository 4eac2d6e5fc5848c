"""What a worker holds, kept in its own memory so that Redis may lose it.

A worker's claims (``common.messaging.claims``) and the outcome messages it sent live in
Redis, and Redis may restart empty. Two things must then hold:

- an attempt that runs on a live worker is not dispatched again: the worker writes its
  claims again as soon as it sees a new Redis epoch (``common.messaging.epoch``), and the
  engine dispatches again only what nobody claimed within a grace period after the new
  epoch began (``scheduler.engine.resync``);
- an attempt that has finished is not run again because its outcome was lost on the way:
  the worker keeps every outcome (``finished``, or ``detached``) until the engine
  acknowledges it, sends it again after a new epoch, and sends again whatever Redis
  refused while it was unreachable. The engine acknowledges the outcomes it committed
  in a set per worker (:func:`acknowledge`), which the worker empties at each refresh.

A refresh (:meth:`Holdings.refresh`) runs on the liveness beacon's thread, every
``LIVENESS_REFRESH``: one pipelined round trip when nothing happened.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import redis
from redis.client import Pipeline

from common.messaging.claims import claim, give_back, hand_back
from common.messaging.epoch import current_epoch
from common.messaging.keys import CLAIM_TTL, FINISHED_CLAIM_TTL, claim_key
from common.messaging.messages import RESULTS_QUEUE, TaskDispatch
from common.messaging.publisher import Outgoing, Publisher

logger = logging.getLogger(__name__)

ACK_TTL = timedelta(hours=1)

# For each key: claim it for ARGV[1] unless someone holds it; return who holds it now.
_REASSERT = """
local holders = {}
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], ARGV[1], 'NX', 'EX', ARGV[2])
  holders[i] = redis.call('GET', KEYS[i])
end
return holders
"""


def acks_key(worker: str) -> str:
    """The set of outcome message ids of ``worker`` that the engine has committed."""
    return f"stellwerk:acks:{worker}"


def acknowledge(client: redis.Redis, committed: Mapping[str, Sequence[str]]) -> None:
    """Tell each worker which of its outcome messages are committed (one round trip)."""
    if not committed:
        return
    with client.pipeline(transaction=False) as pipe:
        acknowledge_on(pipe, committed)
        pipe.execute()


def acknowledge_on(pipe: Pipeline, committed: Mapping[str, Sequence[str]]) -> None:
    """:func:`acknowledge`, added to a pipeline that carries other commands too."""
    for worker, message_ids in committed.items():
        pipe.sadd(acks_key(worker), *message_ids)
        pipe.expire(acks_key(worker), ACK_TTL)


# One command for a batch's claims: an EXPIRE each cost the engine ~10 µs of packing and
# parsing, 25 a batch at a concurrency limit of 50.
_SHORTEN = "for _, key in ipairs(KEYS) do redis.call('EXPIRE', key, ARGV[1]) end"


def shorten_claims_on(pipe: Pipeline, finished: Sequence[str]) -> None:
    """Shorten the claims of attempts whose end is committed to :data:`FINISHED_CLAIM_TTL`.

    ``finished`` holds their idempotency keys; a claim already gone stays gone.
    """
    if finished:
        keys = [claim_key(key) for key in finished]
        pipe.eval(_SHORTEN, len(keys), *keys, int(FINISHED_CLAIM_TTL.total_seconds()))


@dataclass
class _Holding:
    """One claimed attempt: how to stop it while it runs, its outcomes not yet committed."""

    cancel: Callable[[], None] | None = None
    running: bool = True
    outcomes: dict[str, Outgoing] = field(default_factory=dict)


class Holdings:
    """A worker's claims and unacknowledged outcomes; also its publisher (a ``Sink``)."""

    def __init__(self, client: redis.Redis, publisher: Publisher) -> None:
        self._redis = client
        self._publisher = publisher
        self._lock = threading.Lock()
        self._held: dict[str, _Holding] = {}
        self._unsent: dict[str, Outgoing] = {}  # outcomes Redis refused, by message id
        self._epoch: str | None = None

    def claim(self, dispatches: Sequence[TaskDispatch], worker: str) -> list[bool]:
        """Claim attempts (``common.messaging.claims.claim``) and remember those won."""
        allowed = claim(self._redis, dispatches, worker)
        with self._lock:
            for dispatch, won in zip(dispatches, allowed, strict=True):
                if won:
                    self._held[dispatch.idempotency_key] = _Holding()
        return allowed

    def hand_back(self, queue: str, dispatches: Sequence[TaskDispatch], worker: str) -> None:
        """Queue claimed attempts again for others to run (a slow bundle's rest)."""
        hand_back(self._redis, queue, dispatches, worker)
        self._forget(dispatches)

    def give_back(self, dispatches: Sequence[TaskDispatch], worker: str) -> None:
        """Return claimed attempts to the engine, to wait again (a slow lane's rest)."""
        give_back(self._redis, dispatches, worker)
        self._forget(dispatches)

    def _forget(self, dispatches: Sequence[TaskDispatch]) -> None:
        with self._lock:
            for dispatch in dispatches:
                self._held.pop(dispatch.idempotency_key, None)

    def running(self, key: str, cancel: Callable[[], None]) -> None:
        """The attempt ``key`` runs now; ``cancel`` stops it if another worker has it."""
        with self._lock:
            if (holding := self._held.get(key)) is not None:
                holding.cancel = cancel

    def release(self, key: str) -> None:
        """The attempt no longer runs here; forget it once its outcomes are committed."""
        with self._lock:
            holding = self._held.get(key)
            if holding is not None:
                holding.running, holding.cancel = False, None
                if not holding.outcomes:
                    del self._held[key]

    def publish(self, messages: Iterable[Outgoing]) -> int:
        """Send messages; keep outcomes until acknowledged, and those Redis refused.

        A failure to send anything but outcomes (heartbeats, spilled bundles) is the
        caller's, as with a plain publisher: it raises.
        """
        batch = list(messages)
        outcomes = [m for m in batch if _is_outcome(m)]
        with self._lock:
            for message in outcomes:
                self._keep(message)
        try:
            return self._publisher.publish(batch)
        except redis.RedisError:
            if len(outcomes) < len(batch):
                raise
            with self._lock:
                self._unsent.update((str(m.task_id), m) for m in outcomes)
            logger.warning("Redis refused %d outcomes; they are sent when it answers",
                           len(outcomes))
            return len(batch)

    def refresh(self, worker: str) -> None:
        """Take ``worker``'s acknowledgements, send what Redis refused, act on a new epoch."""
        epoch = current_epoch(self._redis).name
        with self._lock:
            known, self._epoch = self._epoch, epoch
        self._forget_acknowledged(worker)
        if known is not None and known != epoch:
            logger.warning("Redis lost its data (epoch %s, was %s): asserting %d claims and "
                           "sending their outcomes again", epoch, known, len(self._held))
            self._reassert(worker)
            self._send_again(all_outcomes=True)
        elif self._unsent:
            self._send_again(all_outcomes=False)

    def _keep(self, message: Outgoing) -> None:
        key = _attempt_key(message)
        holding = self._held.setdefault(key, _Holding(running=False))
        holding.outcomes[str(message.task_id)] = message

    def _forget_acknowledged(self, worker: str) -> None:
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.smembers(acks_key(worker))
            pipe.delete(acks_key(worker))
            members, _ = pipe.execute()
        acked = {m.decode() if isinstance(m, bytes) else str(m) for m in members}
        if not acked:
            return
        with self._lock:
            for key, holding in list(self._held.items()):
                for message_id in acked & holding.outcomes.keys():
                    del holding.outcomes[message_id]
                if not holding.outcomes and not holding.running:
                    del self._held[key]

    def _reassert(self, worker: str) -> None:
        """Write the claims again; stop an attempt someone else claimed meanwhile."""
        with self._lock:
            keys = list(self._held)
        if not keys:
            return
        holders = self._redis.eval(
            _REASSERT, len(keys), *[claim_key(k) for k in keys], worker,
            int(CLAIM_TTL.total_seconds()),
        )
        for key, holder in zip(keys, holders, strict=True):
            name = holder.decode() if isinstance(holder, bytes) else holder
            if name != worker:
                self._lost(key, str(name))

    def _lost(self, key: str, holder: str) -> None:
        with self._lock:
            holding = self._held.get(key)
            cancel = holding.cancel if holding is not None and holding.running else None
        logger.error("attempt %s was claimed by %s while Redis had lost our claim; stopping "
                     "it here", key, holder)
        if cancel is not None:
            cancel()

    def _send_again(self, *, all_outcomes: bool) -> None:
        with self._lock:
            if all_outcomes:
                pending = [m for h in self._held.values() for m in h.outcomes.values()]
            else:
                pending = list(self._unsent.values())
            self._unsent.clear()
        if not pending:
            return
        try:
            self._publisher.publish(pending)
        except redis.RedisError:
            with self._lock:
                self._unsent.update((str(m.task_id), m) for m in pending)
            raise
        logger.info("sent %d outcomes again", len(pending))


def is_outcome(kind: object, detached: object) -> bool:
    """Whether a result ends its attempt here: ``finished``, or handed over (``detached``).

    The worker keeps exactly these until acknowledged, and the engine acknowledges
    exactly these (``scheduler.engine.batch``): one rule for both sides.
    """
    return kind == "finished" or bool(detached)


def _is_outcome(message: Outgoing) -> bool:
    payload = message.payload
    return message.queue == RESULTS_QUEUE and is_outcome(
        payload.get("kind"), payload.get("detached"))


def _attempt_key(message: Outgoing) -> str:
    return f"{message.payload.get('task_run_id')}:{message.payload.get('attempt')}"

