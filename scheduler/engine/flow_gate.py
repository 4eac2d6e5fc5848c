"""Flow control in the engine's transaction: hold, release, admit (issue 16).

Between deciding a batch's changes and writing them, :meth:`FlowGate.check` looks at
the dispatches that need a key (a task's ``concurrency`` or ``rate``, an operator's limit
on its type or tenant) and the attempts that left flight:

1. the slots of attempts that ended (or were requeued) are released;
2. a dispatch whose attempt already holds all its keys (admitted earlier, dispatched
   now by a ``redeliver``) goes; the others wait (``flow_waiters``);
3. the waiters of every key touched are admitted as far as there is room
   (``scheduler.services.flow_admission``). An admitted attempt of this batch is
   dispatched with it, as is one of a run this transaction holds locked; one of another
   run gets a ``redeliver`` signal, so that the engine that takes it dispatches it
   under that run's lock;
4. the dispatches still waiting are held: their READY row says why (``waiting_for``)
   and no message goes.

Steps 1-3 read in one round trip (the lock's, when the engine applied its batch to
runs it had cached: ``scheduler.engine.batch``); the slots the admitted take are written
with the batch's other rows (``ChangeSet.flow``), in the writer's.

A batch whose tasks need no key and with no operator limit costs nothing here but the
limits' read, at most once a second.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from psycopg import Connection

from common.domain.flow import fitted_depth
from common.domain.flow_spec import TENANT, TYPE, FlowNeeds
from common.domain.snapshot import Dispatch
from common.domain.states import TaskState
from common.domain.worker_types import dispatched_as
from common.messaging.signals import activation
from common.persistence.pipelined import Executes, Pipelined
from scheduler.engine.changes import ChangeSet
from scheduler.engine.loading import RunRecord
from scheduler.services.flow_admission import (
    AT_LEAST,
    LANE_DEPTH,
    LIMITS_TTL,
    PER_TENANT,
    UNTIMED_LANE_DEPTH,
    KeyNeed,
    LaneGroup,
    OperatorLimits,
    PendingAdmission,
    Waiter,
)


@dataclass(frozen=True)
class GateRead:
    """An admission's read on its way, and the batch's dispatches it may hold."""

    pending: PendingAdmission
    gated: set[uuid.UUID]


@dataclass(frozen=True)
class Stakes:
    """What a batch asks of flow control: slots to release, dispatches to hold."""

    limits: OperatorLimits
    ended: dict[uuid.UUID, tuple[KeyNeed, ...]]
    hold: list[Waiter]

    def send(self, conn: Executes, now: datetime) -> GateRead:
        """Send the admission's read in the caller's pipeline."""
        # As many waiters as it could admit alone, twice, and a lane more: what lanes
        # take beside those (a busy batch reads PER_TENANT, which fills longer ones).
        wanted = 2 * (len(self.ended) + len(self.hold)) + UNTIMED_LANE_DEPTH
        pending = PendingAdmission.send(
            conn, self.limits, now, release=self.ended, hold=self.hold,
            per_tenant=min(PER_TENANT, max(AT_LEAST, wanted)))
        return GateRead(pending, {w.task_run_id for w in self.hold})


# A key's attempt duration, as the gate fits lanes to it: each finished attempt moves
# the estimate this share of the way; the estimates of this many keys are kept (keys
# built from params, one a run, must not grow a process without bound).
DURATION_WEIGHT = 0.2
DURATION_KEYS = 4096


@dataclass
class FlowGate:
    """One per process: the operators' limits, tenants' turns, keys' attempt durations.

    The limits are read at most once a second. ``give_back`` is the workers' time
    before a slow lane's rest goes back (``STELLWERK_BUNDLE_SPILL_AFTER_MS``): lanes are
    fitted to it.
    """

    ttl: timedelta = LIMITS_TTL
    clock: Callable[[], float] = time.monotonic
    give_back: timedelta = timedelta(milliseconds=200)
    _limits: OperatorLimits = field(default_factory=OperatorLimits)
    _read_at: float | None = None
    _turns: dict[str, str] = field(default_factory=dict)
    _durations: OrderedDict[str, float] = field(default_factory=OrderedDict)

    def check(
        self, conn: Connection[Any], changes: ChangeSet, runs: Sequence[RunRecord],
    ) -> None:
        """Release, hold and admit; change ``changes`` to dispatch only what may go.

        An admitted attempt of a run this transaction holds (``runs``) is dispatched
        with it; one of another run is sent a ``redeliver``. The slots taken are written
        with the batch's rows (``ChangeSet.flow``).
        """
        stakes = self.stakes(changes, self.limits(conn))
        if stakes is None:
            return
        with Pipelined(conn) as pipe:
            read = stakes.send(pipe, changes.now)
        self.settle(conn, changes, runs, read)

    @staticmethod
    def stakes(changes: ChangeSet, limits: OperatorLimits) -> Stakes | None:
        """What the batch asks of flow control, or None if nothing is at stake.

        Nothing is when no dispatch needs a key and no attempt that held one ended.
        """
        gated = [(run, d, needs) for run, d in changes.dispatches
                 if (needs := needs_of(run, d.task, limits))]
        ended = {run.task_run_ids[task]: needs_of(run, task, limits)
                 for run, task in changes.ended
                 if limits.limits or run.job.tasks[task].flow.asks}
        if not gated and not ended:
            return None
        hold = [Waiter(run.task_run_ids[d.task], run.id, d.task, d.attempt, run.job.tenant,
                       run.job.tasks[d.task].priority, needs) for run, d, needs in gated]
        return Stakes(limits, ended, hold)

    def settle(
        self, conn: Connection[Any], changes: ChangeSet, runs: Sequence[RunRecord],
        read: GateRead | None,
    ) -> None:
        """Decide on what :meth:`Stakes.send` read and change ``changes`` accordingly."""
        if read is None:
            return
        locked = {run.id: run for run in runs}
        self.learn(changes, read.pending.limits)
        admission = read.pending.decide(conn, self._turns, lane_group=_lane_group(locked),
                                        lane_depth=self.lane_depth)
        changes.flow += admission.take
        admitted = {a.task_run_id for a in admission.admitted}
        changes.hold(
            {tid: admission.waiting_for.get(tid, "its turn")
             for tid in admission.waiting if tid not in admitted},
            read.gated,
        )
        for chosen in admission.admitted:
            if chosen.lane is not None:
                changes.lanes.setdefault(chosen.lane, []).append(chosen.task_run_id)
            if chosen.task_run_id in admission.waiting:
                continue  # one of this batch's dispatches: ``hold`` let it go
            run = locked.get(chosen.run_id)
            if run is not None and _still_ready(run, chosen.task, chosen.attempt):
                changes.dispatch_admitted(run, Dispatch(chosen.task, chosen.attempt))
            else:
                changes.signals.append(
                    activation(chosen.run_id, "redeliver", chosen.task, chosen.attempt))

    def learn(self, changes: ChangeSet, limits: OperatorLimits) -> None:
        """Fold the batch's finished attempts' run times into their keys' estimates."""
        for run, task, seconds in changes.durations:
            for need in needs_of(run, task, limits):
                earlier = self._durations.pop(need.key, None)
                self._durations[need.key] = seconds if earlier is None else (
                    earlier + DURATION_WEIGHT * (seconds - earlier))
        while len(self._durations) > DURATION_KEYS:
            self._durations.popitem(last=False)

    def lane_depth(self, key: str) -> int:
        """How long a lane on ``key`` may be, by its last attempts' run times.

        As many as begin within the give-back time (``common.domain.flow.fitted_depth``);
        UNTIMED_LANE_DEPTH until one of its attempts has ended here.
        """
        return fitted_depth(LANE_DEPTH, self._durations.get(key),
                            self.give_back.total_seconds(), untimed=UNTIMED_LANE_DEPTH)

    @property
    def limited(self) -> bool:
        """Whether an operator limited a type or tenant, as this process last read."""
        return bool(self._limits.limits)

    def limits(self, conn: Connection[Any]) -> OperatorLimits:
        """The operators' limits, read again once they are a second old."""
        now = self.clock()
        if self._read_at is None or now - self._read_at >= self.ttl.total_seconds():
            self._limits = OperatorLimits.read(conn)
            self._read_at = now
        return self._limits


def needs_of(run: RunRecord, task: str, limits: OperatorLimits) -> tuple[KeyNeed, ...]:
    """The keys an attempt of ``task`` must hold: its own, its type's and its tenant's."""
    definition = run.job.tasks[task]
    needs = _stated(definition.flow)
    if limits.limits:
        kind = TYPE + dispatched_as(definition.type, definition.binding)
        tenant = TENANT + run.job.tenant
        needs += tuple(KeyNeed(key) for key in (kind, tenant) if key in limits.limits)
    return needs


@functools.lru_cache(maxsize=4096)
def _stated(flow: FlowNeeds) -> tuple[KeyNeed, ...]:
    """The keys a task's own ``concurrency`` and ``rate`` name.

    Asked for every dispatch and every end: a fan-out's tasks share them, built once.
    """
    needs = [KeyNeed(key, limit) for key, limit in flow.concurrency]
    if flow.rate is not None:
        needs.append(KeyNeed(flow.rate[0], flow.rate[1], flow.rate[2]))
    return tuple(needs)


def _lane_group(locked: dict[uuid.UUID, RunRecord]) -> LaneGroup:
    """What may share a lane: a run this transaction holds, one queue of it.

    A lane's attempts go in one message, dispatched with the batch; a waiter of another
    run is sent a ``redeliver`` and goes alone.
    """

    def group(run_id: uuid.UUID, task: str) -> Hashable | None:
        run = locked.get(run_id)
        if run is None or task not in run.job.tasks:
            return None
        definition = run.job.tasks[task]
        return run_id, dispatched_as(definition.type, definition.binding)

    return group


def _still_ready(run: RunRecord, task: str, attempt: int) -> bool:
    """The admitted attempt is the task's current one, READY (as the waiter row says)."""
    view = run.snapshot.tasks.get(task)
    return view is not None and view.state == TaskState.READY and view.attempt == attempt
