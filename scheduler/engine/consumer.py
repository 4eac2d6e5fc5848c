"""Draining the activation and results queues in batches, acknowledged after commit.

Celery's one-task-per-message model would cost a transaction (and kombu's bookkeeping)
per message; the engine instead takes up to ``batch_size`` messages in one Redis call,
applies them in one transaction, and only then acknowledges them all. A batch that
fails is put back at the head of its queues.

Outages (issue 13): when Redis or PostgreSQL cannot be reached the loop does not end.
It logs the outage once (:class:`common.outage.Outage`), retries with capped backoff
and goes on within a second of the server's return. A batch is never lost on the way:
while PostgreSQL is down the loop holds its batch (still in its processing list in
Redis) and applies it when PostgreSQL is back; after any Redis failure it first puts
its processing list back in the queues (one atomic script), then takes again. What a
failed call may have left there (a take whose reply was lost, an ack after a commit)
is then consumed again, and the database's de-duplication by message id makes that
harmless. If the engine stops before Redis is back, its processing list is recovered
by another reader once its liveness key has expired.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import timedelta

from common.messaging.loop_timings import LoopTimings
from common.messaging.messages import ACTIVATION_QUEUE, RESULTS_QUEUE
from common.messaging.reliable import BatchReader
from common.messaging.wire import open_envelope
from common.outage import Outage
from common.unreachable import database_unreachable, redis_unreachable
from scheduler.engine.batch import BatchApplier, BatchOutcome
from scheduler.engine.incoming import Incoming, decode

log = logging.getLogger(__name__)
ENGINE_QUEUES = (ACTIVATION_QUEUE, RESULTS_QUEUE)  # activations first: they start runs
IDLE_WAIT_S = 0.02
STATS_EVERY_S = 10.0
# Small batches wait for more only while the engine was busy at least this share of
# the last second: then it is the bottleneck, and batch size is its throughput.
LINGER_WHEN_BUSY = 0.5
# ... and only batches this small: a few cron fires or chain steps. A worker's results
# come in bundles of up to 32, and waiting to grow those slowed a fan-out down.
LINGER_BELOW = 16
SLOW_BATCH_S = 0.1  # a batch this slow is logged: lock waits, a server in trouble


class BatchStats:
    """Messages, batches and time spent applying them, logged every few seconds."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.messages = 0
        self.batches = 0
        self.ahead = 0
        self.busy_s = 0.0
        self._since = time.monotonic()

    def add(self, messages: int, busy_s: float, *, ahead: bool = False) -> None:
        """Count one applied batch; log and reset when the period is over.

        ``ahead``: applied before its lock (``BatchApplier._commit_ahead``).
        """
        self.messages += messages
        self.batches += 1
        self.ahead += ahead
        self.busy_s += busy_s
        elapsed = time.monotonic() - self._since
        if elapsed >= STATS_EVERY_S:
            log.info(
                "applied %d messages in %d batches (%.1f per batch, %.1f ms per batch, "
                "busy %.0f%%, %d ahead of their lock)", self.messages, self.batches,
                self.messages / self.batches, 1000 * self.busy_s / self.batches,
                100 * self.busy_s / elapsed, self.ahead,
            )
            self._reset()


class BusyRatio:
    """The share of the last second the engine spent applying batches."""

    def __init__(self, window_s: float = 1.0) -> None:
        self._window_s = window_s
        self._spans: deque[tuple[float, float]] = deque()

    def add(self, started: float, ended: float) -> None:
        """Record one batch's span (monotonic seconds)."""
        self._spans.append((started, ended))

    def ratio(self) -> float:
        """Busy time within the window, divided by the window."""
        since = time.monotonic() - self._window_s
        while self._spans and self._spans[0][1] < since:
            self._spans.popleft()
        return sum(end - max(start, since) for start, end in self._spans) / self._window_s


class EngineConsumer:
    """Takes message batches from Redis and hands them to a :class:`BatchApplier`."""

    def __init__(
        self, reader: BatchReader, applier: BatchApplier, *, batch_size: int,
        linger: timedelta = timedelta(0),
        on_outcome: Callable[[BatchOutcome], None] | None = None,
        timings: LoopTimings | None = None, hooks: OutageHooks | None = None,
    ) -> None:
        self._reader = reader
        self._timings = timings  # for GET /metrics
        self._applier = applier
        self._batch_size = batch_size
        self._linger_s = linger.total_seconds()
        self._on_outcome = on_outcome
        self._hooks = hooks or OutageHooks()
        self.stats = BatchStats()
        self.stopping = threading.Event()
        self._load = BusyRatio()
        self.redis = Outage("Redis", log)
        self.database = Outage("PostgreSQL", log)
        self._requeue_owed = False  # a Redis call failed: the processing list goes back first
        # The next batch, taken with the last one's acknowledgement (one round trip).
        self._taken: list[bytes] = []
        self._relay_owed = False  # ... and what a failed publish left in the outbox goes out

    @property
    def outages(self) -> list[Outage]:
        """Redis and PostgreSQL as this loop sees them, for its health status."""
        return [self.redis, self.database]

    def run(self) -> None:
        """Consume until :attr:`stopping` is set; wait out Redis and PostgreSQL outages."""
        while not self.stopping.is_set():
            try:
                self._turn()
            except Exception as error:
                if not self._counted_as_outage(error):
                    raise
        if self._requeue_owed or self._taken:  # taken and not applied: back to the queues
            self._requeue_at_stop()

    def _turn(self) -> None:
        """What an outage left owed, then one batch (or an idle turn)."""
        self._settle_after_outage()
        self._reader.recover_orphans_if_due()
        raws = self._take()
        self.redis.succeeded()
        if raws:
            self._flush(raws)
        else:
            self._idle()

    def _settle_after_outage(self) -> None:
        """After a Redis failure: the processing list back to its queues, the outbox relayed."""
        if self._requeue_owed:
            self._reader.requeue()
            self._requeue_owed = False
            self._taken = []
        if self._relay_owed:
            self._hooks.after_redis_outage()
            self._relay_owed = False

    def _counted_as_outage(self, error: Exception) -> bool:
        """Count an unreachable server and wait before the next try; False for other errors."""
        if redis_unreachable(error):
            self._requeue_owed = self._relay_owed = True
            wait_s = self.redis.failed(error)
        elif database_unreachable(error):
            wait_s = self.database.failed(error)
        else:
            return False
        self.stopping.wait(wait_s)
        return True

    def _requeue_at_stop(self) -> None:
        try:
            self._reader.requeue()
        except Exception as error:
            if not redis_unreachable(error):
                raise
            log.warning("Redis is still down: this engine's unfinished batch is recovered "
                        "by another engine once this one's liveness key has expired")

    def _take(self) -> list[bytes]:
        """A batch; when the engine is behind, a small batch waits a moment to grow.

        Each batch costs a transaction whatever its size, so while messages queue up
        faster than the engine applies them, a few milliseconds of waiting buy far more
        than they cost. It waits only when messages were already queued as it asked
        and it has been busy most of the last second: a message that finds the engine
        waiting for it (a chain's next step, a lone cron fire) is applied at once.
        """
        raws, self._taken = self._taken, []
        if raws:
            self._reader.heartbeat()
        else:
            raws = self._reader.take(self._batch_size, IDLE_WAIT_S)
        if raws and self._linger_s and lingers(
            waited=self._reader.waited, busy=self._load.ratio(), taken=len(raws),
            batch_size=self._batch_size,
        ):
            self.stopping.wait(self._linger_s)
            raws += self._reader.take_more(self._batch_size - len(raws))
        return raws

    def _idle(self) -> None:
        if self._timings is not None:
            self._timings.flush_if_due()
        if not self.database.healthy:  # nothing else would tell it is back while idle
            self._hooks.ping_database()
            self.database.succeeded()
        try:
            self._applier.flush()
        except Exception as error:
            if database_unreachable(error):
                raise
            log.exception("could not delete relayed outbox rows; the beat will resend them")

    def _flush(self, raws: list[bytes]) -> None:
        started = time.monotonic()
        batch = [item for raw in raws if (item := _decode(raw)) is not None]
        try:
            outcome = self._apply_held(batch)
        except Exception as error:
            if redis_unreachable(error) or database_unreachable(error):
                raise
            log.exception("batch of %d messages failed; requeued", len(raws))
            self._reader.requeue()
            self.stopping.wait(1.0)
            return
        if outcome is None:  # stopped while PostgreSQL was down: the batch goes back
            self._requeue_owed = True
            return
        # One round trip: the batch's messages, its outcomes acknowledged, the batch acked,
        # and the next batch taken.
        self._taken = self._reader.ack(first=lambda pipe: self._applier.send(pipe, outcome),
                                       take_next=self._batch_size)
        self._applier.sent(outcome)
        self._account(outcome, len(raws), started)

    def _apply_held(self, batch: Sequence[Incoming]) -> BatchOutcome | None:
        """Apply ``batch``; while PostgreSQL is unreachable, hold it and try again.

        Holding (rather than requeueing) keeps the messages' order and spares Redis a
        round trip per try; the reader's liveness key is kept fresh meanwhile, so no
        other engine takes the batch as orphaned. None if stopped before it went through.
        """
        while not self.stopping.is_set():
            try:
                outcome = self._applier.commit(batch)
            except Exception as error:
                if not database_unreachable(error):
                    raise
                self.stopping.wait(self.database.failed(error))
                self._reader.heartbeat()
                continue
            self.database.succeeded()
            return outcome
        return None

    def _account(self, outcome: BatchOutcome, messages: int, started: float) -> None:
        """Hand the outcome on; count, time and (when slow) log the batch."""
        if self._on_outcome is not None:
            self._on_outcome(outcome)
        busy_s = time.monotonic() - started
        self.stats.add(messages, busy_s, ahead=outcome.ahead)
        self._load.add(started, started + busy_s)
        if self._timings is not None:
            self._timings.observe(busy_s)
        if busy_s >= SLOW_BATCH_S:
            log.warning("slow batch: %d messages took %.0f ms", messages, 1000 * busy_s)


class OutageHooks:
    """What the engine does around outages; by default, nothing.

    ``after_redis_outage`` relays what a publish that failed during the outage left in
    the outbox (else the beat would send it only after its grace, 30 s late).
    ``ping_database`` tells an idle engine that PostgreSQL is back.
    """

    def __init__(
        self, after_redis_outage: Callable[[], None] = lambda: None,
        ping_database: Callable[[], None] = lambda: None,
    ) -> None:
        self.after_redis_outage = after_redis_outage
        self.ping_database = ping_database


def lingers(*, waited: bool, busy: float, taken: int, batch_size: int) -> bool:
    """Whether a batch of ``taken`` messages waits to grow before it is applied.

    Only while the engine is behind: its messages were queued when it asked (it did
    not wait for them), it was busy at least :data:`LINGER_WHEN_BUSY` of the last
    second (``busy``), and the batch is smaller than :data:`LINGER_BELOW`.
    """
    return not waited and busy >= LINGER_WHEN_BUSY and taken < min(LINGER_BELOW, batch_size)


def _decode(raw: bytes) -> Incoming | None:
    try:
        received = open_envelope(raw)
    except ValueError as error:
        log.warning("dropping a message that is no Celery task message: %s", error)
        return None
    return decode(received.task_name, received.payload)
