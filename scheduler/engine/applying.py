"""Applying events to locked runs: the one path from an event to its rows (issue 15).

Three callers change runs: the engine's batches (``batch``), a person's actions through
the API (``commands``) and post-backs and web-service callbacks (``reported``). Each
locks its runs, then goes through :class:`Applying` in the same transaction:

1. :meth:`Applying.keep_result` keeps a result's logs, storage and lease renewal;
2. :meth:`Applying.apply` asks the pure machine (``advance``) for the transition,
   applies it to the cached snapshot and records its rows, in that order, or raises
   :class:`~common.domain.machine.Refused` having changed nothing;
3. :meth:`Applying.write` builds the dispatch messages and writes every row in one
   pipelined round trip, answering what was written (:class:`Written`).

After the commit, the caller relays ``Written.messages`` (or their outbox ids) and
tells ``Written.stops`` to stop (:func:`relay_and_stop`). Before, each caller wrote this
order itself, and had to get it right three times.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from psycopg import Connection as PgConnection
from sqlalchemy.orm import Session, sessionmaker

from common.domain import events as ev
from common.domain.machine import advance
from common.domain.snapshot import Transition
from common.messaging.keys import attempt_key
from common.messaging.messages import TaskResult
from common.messaging.publisher import Outgoing
from common.persistence.outbox import OutboxRelay
from common.persistence.pipelined import Executes
from scheduler.engine.changes import ChangeSet
from scheduler.engine.flow_gate import FlowGate, GateRead
from scheduler.engine.loading import RunLoader, RunRecord
from scheduler.engine.stopper import Stopper
from scheduler.engine.writer import write
from scheduler.services.flow_admission import OperatorLimits

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Written:
    """What one transaction wrote: its outbox rows (ids, messages) and attempts to stop."""

    outbox_ids: list[int]
    messages: list[Outgoing]
    stops: list[str]


class Applying:
    """The changes of one transaction to the runs it locked, written once at the end."""

    def __init__(
        self, now: datetime, lease_ttl: timedelta, flow: FlowGate, actor: str = "engine"
    ) -> None:
        """``actor`` is who the journal names: the engine, or a person, or a reporter."""
        self._changes = ChangeSet(now, lease_ttl, actor=actor)
        self._flow = flow
        self._flow_sent = False  # the flow gate's read went out already (:meth:`send_flow`)
        self._flow_read: GateRead | None = None

    @property
    def now(self) -> datetime:
        """The transaction's time: every row it writes carries it."""
        return self._changes.now

    def keep_result(self, run: RunRecord, task: str, result: TaskResult) -> None:
        """Keep a result's log lines, storage and lease renewal, whatever its event does."""
        self._changes.record_result(run, task, result)

    def apply(
        self, run: RunRecord, event: ev.Event, result: TaskResult | None = None
    ) -> Transition:
        """Advance the run by ``event`` and record the rows; ``Refused`` changes nothing."""
        transition = advance(run.snapshot, event, self.now)
        run.snapshot.apply(transition)
        self._changes.record(run, transition, result)
        return transition

    def stop(self, run: RunRecord, task: str, attempt: int) -> None:
        """Tell the attempt to stop after the commit (a worker may hold it or take it)."""
        self._changes.stops.append(attempt_key(run.task_run_ids[task], attempt))

    def send_flow(self, conn: Executes, limits: OperatorLimits) -> None:
        """Send the flow gate's read in the caller's pipeline (with the runs' lock).

        For changes decided before their runs were locked; :meth:`write` then decides
        on the answer instead of reading in a round trip of its own.
        """
        stakes = self._flow.stakes(self._changes, limits)
        self._flow_read = stakes.send(conn, self.now) if stakes is not None else None
        self._flow_sent = True

    def write(
        self, conn: PgConnection[Any], runs: Sequence[RunRecord], published: Sequence[int] = ()
    ) -> Written:
        """Write every row (bumping each locked run's version) and forget ``published``.

        Flow control first holds back what may not start yet (``flow_gate``).
        """
        if self._flow_sent:
            self._flow.settle(conn, self._changes, runs, self._flow_read)
        else:
            self._flow.check(conn, self._changes, runs)
        messages = self._changes.dispatch_messages()
        outbox_ids = write(conn, list(runs), self._changes.rows(), messages, list(published))
        return Written(outbox_ids, messages, list(self._changes.stops))


class RunWriter:
    """What changing a run from outside the engine needs (run control, post-backs).

    The API composes one of each subclass per process (``Resources``): they lock a run,
    go through :class:`Applying` and, after the commit, relay and stop
    (:meth:`after_commit`) as an engine batch does.
    """

    def __init__(
        self, sessions: sessionmaker[Session], loader: RunLoader, relay: OutboxRelay,
        stopper: Stopper, *, lease_ttl: timedelta, clock: Callable[[], datetime],
        flow: FlowGate | None = None,
    ) -> None:
        self._sessions = sessions
        self._flow = flow or FlowGate()
        self._loader = loader
        self._relay = relay
        self._stopper = stopper
        self._lease_ttl = lease_ttl
        self._clock = clock

    def applying(self, actor: str) -> Applying:
        """A unit of work on runs, now, in the journal's name of ``actor``."""
        return Applying(self._clock(), self._lease_ttl, self._flow, actor=actor)

    def after_commit(self, written: Written) -> None:
        """Relay what was written and tell attempts to stop."""
        relay_and_stop(self._relay, self._stopper, written)


def relay_and_stop(relay: OutboxRelay, stopper: Stopper, written: Written) -> None:
    """After a commit: relay the outbox rows and tell attempts to stop.

    A failure is logged: the beat resends what is left, the cancel grace timer ends
    what does not stop.
    """
    try:
        relay.relay_ids(written.outbox_ids)
    except Exception:
        log.exception("relaying outbox rows failed; the beat will send them")
    try:
        stopper.stop(written.stops)
    except Exception:
        log.exception("telling %d attempts to stop failed", len(written.stops))
