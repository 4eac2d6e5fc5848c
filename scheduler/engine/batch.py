"""Applying a batch of messages in one transaction: the engine's unit of work.

For each batch: record the message ids (a redelivered message is skipped), lock the
runs touched in id order, feed each message to the pure state machine, and write the
state changes, journal, logs and outbox rows together. Only after the commit are the
outbox rows relayed and the messages acknowledged, so a crash at any point either
re-applies nothing (ids recorded) or re-applies everything (nothing committed).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from redis.client import Pipeline
from sqlalchemy.orm import Session, sessionmaker

from common.domain.machine import Refused
from common.domain.states import RUN_TERMINAL, TaskState
from common.messaging.holdings import acknowledge_on, is_outcome, shorten_claims_on
from common.messaging.keys import attempt_key
from common.messaging.messages import Activation, TaskResult
from common.messaging.publisher import Outgoing
from common.persistence.db import raw_transaction
from common.persistence.outbox import OutboxRelay, forget_published
from common.persistence.pipelined import Pipelined
from common.tracing import record_span, tracing_on
from scheduler.engine.applying import Applying, Written
from scheduler.engine.flow_gate import FlowGate
from scheduler.engine.incoming import Incoming, activation_event, result_event
from scheduler.engine.loading import RunLoader, RunRecord, SentLock

log = logging.getLogger(__name__)
# An attempt in these states can still report: its logs, storage and lease count. A
# result repeated after the task finished changes nothing, not even the log.
LIVE = frozenset({TaskState.READY, TaskState.ACTIVE, TaskState.PAUSED})


class _Stale(Exception):
    """Applied ahead of the lock, a batch found a run changed or a message seen before."""


@dataclass(frozen=True)
class BatchOutcome:
    """What one batch did, for logs, metrics and tests."""

    applied: int
    duplicates: int
    outbox_ids: list[int]
    stops: list[str]
    # Outcome message ids committed (or found committed before), by the worker that sent
    # them: it keeps each until acknowledged (``common.messaging.holdings``).
    outcomes: dict[str, list[str]] = field(default_factory=dict)
    # What the batch sends once committed: its outbox rows' messages, in order.
    messages: list[Outgoing] = field(default_factory=list)
    # Attempts (idempotency keys) a worker reported finished: their claims are shortened.
    finished: list[str] = field(default_factory=list)
    # Applied to cached runs before their lock (``BatchApplier._commit_ahead``).
    ahead: bool = False


class BatchApplier:
    """Applies message batches; composed once per engine process."""

    def __init__(
        self, sessions: sessionmaker[Session], loader: RunLoader, relay: OutboxRelay,
        lease_ttl: timedelta, clock: Callable[[], datetime], *, flow: FlowGate | None = None,
    ) -> None:
        self._sessions = sessions
        self._flow = flow or FlowGate()
        self._loader = loader
        self._relay = relay
        self._lease_ttl = lease_ttl
        self._clock = clock
        # Outbox rows already published, deleted in the next transaction (or by flush):
        # one commit per batch instead of two.
        self._published: list[int] = []

    def apply(self, batch: Sequence[Incoming]) -> BatchOutcome:
        """Apply, commit, then relay the outbox rows the batch wrote."""
        outcome = self.commit(batch)
        self._relay.publish_written(outcome.messages)
        self.sent(outcome)
        return outcome

    def send(self, pipe: Pipeline, outcome: BatchOutcome) -> None:
        """Add what a committed batch sends to ``pipe``.

        Its messages, then the acknowledgement of the outcomes it committed (workers
        keep them until then).
        """
        self._relay.push(pipe, outcome.messages)
        acknowledge_on(pipe, outcome.outcomes)
        shorten_claims_on(pipe, outcome.finished)

    def sent(self, outcome: BatchOutcome) -> None:
        """The batch's messages are out: their rows go in the next transaction."""
        self._published = outcome.outbox_ids

    def commit(self, batch: Sequence[Incoming]) -> BatchOutcome:
        """Apply and commit; send nothing (:meth:`send`, then :meth:`sent`).

        With tracing on, each run of the batch gets a span of it in its own trace.
        """
        started_ns = time.time_ns()
        run_ids = {m.run_id for m in batch}
        cached = self._loader.cached(run_ids)
        if cached is not None and (self._flow.limited or any(
                run.job.flow_controlled for run in cached.values())):
            outcome = self._commit_ahead(batch, cached)
            if outcome is not None:
                return self._committed(batch, batch, outcome, cached, started_ns, ahead=True)
        records: dict[uuid.UUID, RunRecord] = {}
        try:
            with raw_transaction(self._sessions) as conn:
                # The runs of redelivered messages are locked too (rare, and harmless):
                # claiming and locking then take one round trip.
                fresh, records = self._loader.claim_and_lock(
                    conn, [m.message_id for m in batch], run_ids,
                )
                todo = [m for m in batch if m.message_id in fresh]
                applying = Applying(self._clock(), self._lease_ttl, self._flow)
                for message in todo:
                    self._apply_one(records.get(message.run_id), message, applying)
                written = applying.write(conn, list(records.values()), self._published)
        except BaseException:
            for run_id in records:
                self._loader.forget(run_id)
            raise
        return self._committed(batch, todo, written, records, started_ns)

    def _commit_ahead(
        self, batch: Sequence[Incoming], records: dict[uuid.UUID, RunRecord],
    ) -> Written | None:
        """Apply to the cached runs first, then lock them and read flow control together.

        A batch of a flow-controlled run costs three round trips in order: the lock,
        flow control's read (what the batch released and holds, decided by the state
        machine after the lock) and the write. Applied to this engine's cached records
        before the lock, the read goes with the lock: two. That holds only if every
        message is new and no run changed since it was cached (the lock answers both);
        otherwise the transaction rolls back, the records are forgotten, and None tells
        the caller to apply the batch after its lock.
        """
        try:
            with raw_transaction(self._sessions) as conn:
                limits = self._flow.limits(conn)
                applying = Applying(self._clock(), self._lease_ttl, self._flow)
                for message in batch:
                    self._apply_one(records[message.run_id], message, applying)
                with Pipelined(conn) as pipe:
                    sent = SentLock.send(pipe, [m.message_id for m in batch], sorted(records))
                    applying.send_flow(pipe, limits)
                if not sent.confirms(records):
                    raise _Stale
                return applying.write(conn, list(records.values()), self._published)
        except _Stale:
            self._loader.contended(records)
            return None
        except BaseException:
            for run_id in records:
                self._loader.forget(run_id)
            raise

    def _committed(
        self, batch: Sequence[Incoming], todo: Sequence[Incoming], written: Written,
        records: dict[uuid.UUID, RunRecord], started_ns: int, *, ahead: bool = False,
    ) -> BatchOutcome:
        """After the commit: the records kept, the spans recorded, the outcome.

        Outcomes are acknowledged for the whole ``batch``: one applied before (not in
        ``todo``) was committed then.
        """
        self._published = []
        self._keep(records.values())
        _trace(records.values(), todo, started_ns)
        return BatchOutcome(len(todo), len(batch) - len(todo), written.outbox_ids,
                            written.stops, _outcomes(batch), written.messages,
                            _finished(batch), ahead)

    def flush(self) -> None:
        """Delete the rows of what was published last; called when the queues are idle."""
        if self._published:
            with self._sessions.begin() as session:
                forget_published(session, self._published)
            self._published = []

    def _apply_one(self, run: RunRecord | None, message: Incoming, applying: Applying) -> None:
        if run is None:
            log.info("message %s names unknown run %s", message.message_id, message.run_id)
            return
        body = message.body
        result = body if isinstance(body, TaskResult) else None
        if isinstance(body, Activation):
            event = activation_event(body)
        else:
            task = run.names_by_id.get(body.task_run_id)
            if task is None:
                log.warning("run %s has no task run %s", run.id, body.task_run_id)
                return
            state = run.snapshot.tasks[task].state
            event = result_event(body, task, state)
            if body.attempt == run.snapshot.tasks[task].attempt and state in LIVE:
                applying.keep_result(run, task, body)
        if event is None:
            return
        try:
            transition = applying.apply(run, event, result)
        except Refused as refused:
            log.info("run %s: %s refused: %s", run.id, type(event).__name__, refused)
            return
        if transition.ignored:
            log.debug("run %s: %s ignored: %s", run.id, type(event).__name__, transition.ignored)

    def _keep(self, records: object) -> None:
        for record in records:  # type: ignore[attr-defined]
            if record.snapshot.state in RUN_TERMINAL:
                self._loader.forget(record.id)
            else:
                self._loader.remember(record)


def _trace(runs: Iterable[RunRecord], todo: Sequence[Incoming], started_ns: int) -> None:
    """A span per run of the batch, in the run's trace (nothing with tracing off)."""
    if not tracing_on():
        return
    messages = Counter(message.run_id for message in todo)
    for run in runs:
        record_span("stellwerk.engine.apply", run.traceparent, started_ns, {
            "stellwerk.run_id": str(run.id), "stellwerk.job": run.job.name,
            "stellwerk.messages": messages[run.id], "stellwerk.run.state": run.snapshot.state,
        })


def _finished(batch: Sequence[Incoming]) -> list[str]:
    """The attempts the batch's ``finished`` results end (a detached one runs on)."""
    return [attempt_key(m.body.task_run_id, m.body.attempt) for m in batch
            if isinstance(m.body, TaskResult) and m.body.kind == "finished"
            and not m.body.detached]


def _outcomes(batch: Sequence[Incoming]) -> dict[str, list[str]]:
    """The batch's outcome messages (``finished``, ``detached``) by worker."""
    by_worker: defaultdict[str, list[str]] = defaultdict(list)
    for message in batch:
        body = message.body
        if isinstance(body, TaskResult) and body.worker and is_outcome(body.kind, body.detached):
            by_worker[body.worker].append(str(message.message_id))
    return dict(by_worker)
