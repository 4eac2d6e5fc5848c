"""A batched, reliable reader of Redis lists (the engine's input).

Messages move atomically from the queues into this reader's own processing list, up
to a batch at a time, in one Lua call; after the batch's effects are committed the
processing list is deleted (the acknowledgement). A reader that dies leaves its
processing list behind; any reader that finds a processing list whose owner's
liveness key has expired puts its messages back at the head of their queues. Together
with de-duplication by message id in the database, a crash at any point neither loses
nor doubles the effects of a message.

A queue may have a timed set beside it (``publisher.timed_set``): messages that must
not be consumed before a time (a run's start, a retry after its backoff), scored by
it. The same Lua call moves those due by the reader's clock into the batch, ahead of
the queue's other messages; a message is never taken early, and its producer needs no
timer of its own.

Readers register in one set (``READERS``), so finding the dead ones costs a look at
each reader, not a scan of Redis's whole keyspace (which holds a claim key per attempt
of the last day). A reader refreshes its liveness key once a second and the key lives
``ALIVE_TTL_S``; the others look every ``RECOVER_EVERY_S``: a killed engine's batch is
back in its queues about 4 s after the kill. A reader busy longer than the TTL in one
batch (a 10,000-task fan-out) may see another requeue its batch meanwhile: both then
apply it, and the message ids recorded in the database let only one commit count.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Sequence

import redis
from redis.client import Pipeline

from common.messaging.publisher import timed_set

log = logging.getLogger(__name__)

PROCESSING = "stellwerk:processing:{owner}"
ALIVE = "stellwerk:reader:{owner}"
READERS = "stellwerk:readers"
ALIVE_TTL_S = 3
RECOVER_EVERY_S = 1.0
# How late Redis may end a blocking wait that nothing interrupts: at its next event,
# which is at most a ``serverCron`` away (100 ms at the default ``hz`` of 10).
BLOCKING_SLACK_S = 0.1

# KEYS: each queue's timed set and the queue, in priority order, then the processing
# list; ARGV: the limit, and the reader's clock in ms. A queue's timed messages due by
# then come first: they were due before anything queued now was sent. Returns what it
# took and, when that is nothing, the earliest time (ms) a timed message falls due.
_TAKE = """
local taken = {}
local limit = tonumber(ARGV[1])
local processing = KEYS[#KEYS]
for k = 1, #KEYS - 1, 2 do
  if #taken < limit then
    local due = redis.call('ZRANGEBYSCORE', KEYS[k], '-inf', ARGV[2], 'LIMIT', 0, limit - #taken)
    if #due > 0 then
      redis.call('ZREM', KEYS[k], unpack(due))
      redis.call('LPUSH', processing, unpack(due))
      for _, item in ipairs(due) do taken[#taken + 1] = item end
    end
  end
  while #taken < limit do
    local item = redis.call('RPOPLPUSH', KEYS[k + 1], processing)
    if not item then break end
    taken[#taken + 1] = item
  end
end
local next_due = false
if #taken == 0 then
  for k = 1, #KEYS - 1, 2 do
    local first = redis.call('ZRANGE', KEYS[k], 0, 0, 'WITHSCORES')
    if #first > 0 and (not next_due or tonumber(first[2]) < tonumber(next_due)) then
      next_due = first[2]
    end
  end
end
return {taken, next_due}
"""

# The whole processing list back onto the consuming ends of its messages' queues, in one
# atomic call: a connection that drops midway leaves every message either still in the
# list or back in its queue, never in neither (a pop, then a push, could lose one).
_REQUEUE = """
local moved = 0
while true do
  local raw = redis.call('LPOP', KEYS[1])
  if not raw then break end
  local ok, message = pcall(cjson.decode, raw)
  local queue = ok and type(message) == 'table' and message.properties
    and message.properties.delivery_info and message.properties.delivery_info.routing_key
  if type(queue) == 'string' then
    redis.call('RPUSH', queue, raw)
    moved = moved + 1
  end
end
return moved
"""


def default_owner() -> str:
    """A name unique to this process on this host."""
    return f"{socket.gethostname()}:{os.getpid()}"


class BatchReader:
    """Takes messages from ``queues`` (in priority order) in batches."""

    def __init__(
        self, client: redis.Redis, queues: Sequence[str], owner: str,
        clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client = client
        self._clock = clock  # seconds since the epoch: timed messages are due by it
        self._sleep = sleep  # waits for a timed message on that clock
        self._queues = list(queues)
        self._owner = owner
        self._processing = PROCESSING.format(owner=owner)
        # The take script's KEYS: each queue's timed set and the queue, then processing.
        self._take_keys = [*(k for q in self._queues for k in (timed_set(q), q)),
                           self._processing]
        self._take = client.register_script(_TAKE)
        self._alive_until = 0.0
        self._next_recovery = 0.0
        # Whether the last take found its queues empty and had to wait: the reader keeps
        # up with its producers. False: messages were queued, it is behind them.
        self.waited = False

    def take(self, limit: int, block_s: float) -> list[bytes]:
        """Up to ``limit`` messages; waits up to ``block_s`` on the last queue if all are empty.

        The earlier queues are looked at again right after an empty wait. Redis ends a
        blocking wait that nothing interrupts only at its next event, up to 100 ms late
        at its default ``hz`` (:data:`BLOCKING_SLACK_S`): while a timed message falls due
        within that, the reader waits on its own clock instead, ``block_s`` at most (the
        last queue unwatched meanwhile), so the message is taken on time.

        A wait that ends with a message takes, in the same round trip, what was queued
        with it (a worker reports a bundle's results together): taken alone, the first
        of a burst cost a whole batch, whose small dispatch made the next burst small
        too (issue 16: a fan-out limited to 50 ran batches of 1 between its batches of
        dozens).
        """
        self.heartbeat()
        self.waited = False
        taken, next_due_ms = self._take_now(limit)
        if taken:
            return taken
        self.waited = True
        if next_due_ms is not None:
            until_due_s = max(0.0, next_due_ms - self._now_ms()) / 1000
            if until_due_s < block_s + BLOCKING_SLACK_S:
                self._sleep(min(until_due_s, block_s))
                return self.take_more(limit)
        return self._wait_then_take(limit, block_s)

    def _wait_then_take(self, limit: int, block_s: float) -> list[bytes]:
        """Wait for a message on the last queue, then take the rest: one round trip.

        Redis runs a connection's commands in order, so the take script runs as soon as
        the wait ends, on what is queued by then.
        """
        with self._client.pipeline(transaction=False) as pipe:
            pipe.brpoplpush(self._queues[-1], self._processing, block_s)
            pipe.evalsha(self._take.sha, len(self._take_keys), *self._take_keys,
                         limit - 1, self._now_ms())
            first, rest = pipe.execute(raise_on_error=False)
        if isinstance(first, Exception):
            raise first
        if isinstance(rest, redis.exceptions.NoScriptError):  # Redis lost its scripts
            rest = [self.take_more(limit - (first is not None))]
        elif isinstance(rest, Exception):
            raise rest
        return ([] if first is None else [first]) + list(rest[0])

    def take_more(self, limit: int) -> list[bytes]:
        """Up to ``limit`` messages (into the current batch), without waiting."""
        return self._take_now(limit)[0] if limit > 0 else []

    def _take_now(self, limit: int) -> tuple[list[bytes], float | None]:
        """What the take script took, and when a timed message falls due if it took none."""
        taken, next_due = self._take(keys=self._take_keys, args=[limit, self._now_ms()])
        return list(taken), None if next_due is None else float(next_due)

    def ack(
        self, first: Callable[[Pipeline], object] | None = None, *, take_next: int = 0,
    ) -> list[bytes]:
        """Forget the batch taken last: its effects are committed.

        ``first`` adds the commands that must go out before (what the batch sends):
        they and the acknowledgement take one round trip together. With ``take_next``,
        up to that many messages of the next batch are taken in the same round trip
        and returned (as :meth:`take_more` would, without waiting): a busy engine saves
        a round trip a batch.
        """
        if first is None and not take_next:
            self._client.delete(self._processing)
            return []
        with self._client.pipeline(transaction=False) as pipe:
            if first is not None:
                first(pipe)
            pipe.delete(self._processing)
            if take_next:
                # By its hash: a script object in a pipeline costs a SCRIPT EXISTS round
                # trip on every execute.
                pipe.evalsha(self._take.sha, len(self._take_keys), *self._take_keys,
                             take_next, self._now_ms())
            try:
                replies = pipe.execute()
            except redis.exceptions.NoScriptError:
                # Redis lost its scripts (a restart): all else went through; take again.
                return self.take_more(take_next)
        if not take_next:
            return []
        self.waited = False  # taken without waiting: they were queued
        return list(replies[-1][0])

    def _now_ms(self) -> float:
        """The reader's clock, in ms since the epoch (the timed sets' scores)."""
        return self._clock() * 1000

    def requeue(self) -> None:
        """Put the batch taken last back at the head of its queues, for a later try."""
        requeue_list(self._client, self._processing)

    def heartbeat(self) -> None:
        """Tell other readers this one is alive (its processing list is not orphaned).

        Refreshed at most once a second: the key lives ``ALIVE_TTL_S``.
        """
        now = time.monotonic()
        if now >= self._alive_until:
            with self._client.pipeline(transaction=False) as pipe:
                pipe.set(ALIVE.format(owner=self._owner), "1", ex=ALIVE_TTL_S)
                pipe.sadd(READERS, self._owner)
                pipe.execute()
            self._alive_until = now + 1.0

    def recover_orphans_if_due(self, every_s: float = RECOVER_EVERY_S) -> int:
        """Call :meth:`recover_orphans` at most once per ``every_s``.

        A consuming loop calls this on every turn; scanning the processing lists each
        turn would cost a round trip per batch for what is rare (a reader that died).
        """
        now = time.monotonic()
        if now < self._next_recovery:
            return 0
        self._next_recovery = now + every_s
        if moved := self.recover_orphans():
            log.info("requeued %d messages of a stopped reader", moved)
        return moved

    def recover_orphans(self) -> int:
        """Requeue the processing lists of readers that are gone; return how many messages."""
        owners = sorted(
            name for raw in self._client.smembers(READERS)
            if (name := raw.decode() if isinstance(raw, bytes) else str(raw)) != self._owner
        )
        if not owners:
            return 0
        alive = self._client.mget([ALIVE.format(owner=owner) for owner in owners])
        moved = 0
        for owner, key in zip(owners, alive, strict=True):
            if key is None:
                moved += requeue_list(self._client, PROCESSING.format(owner=owner))
                self._client.srem(READERS, owner)
        return moved


def requeue_list(client: redis.Redis, key: str) -> int:
    """Move every message of a processing list back to the consuming end of its queue.

    The processing list holds the batch newest first; taking from its head and pushing
    onto the consuming end leaves the oldest message to be consumed first again. One
    atomic script: see ``_REQUEUE``. A message that is no Celery task message is
    dropped (it was dropped when first read, too).
    """
    return int(client.eval(_REQUEUE, 1, key))
