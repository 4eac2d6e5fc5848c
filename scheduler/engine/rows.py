"""The rows an engine transaction writes, typed: one operation per kind of change.

A batch may change one task run several times (READY, then ACTIVE, then COMPLETED when
a fast task's messages come together); the row is written once, with what the last
change of each column left. Each kind of change builds a :class:`TaskRunUpdate` or a
:class:`RunUpdate` whose fields are the columns it sets, every other field :data:`KEEP`;
:meth:`TaskRunUpdate.then` folds a later change over an earlier one. River writes a
job's end the same way, one operation per kind (``JobSetStateIfRunning``).

The field names are the columns' names: ``tests/unit/engine/test_rows.py`` holds them
to the tables of ``common.persistence.models``, and the insert statements of
``common.persistence.queries`` to :class:`JournalRow` and :class:`LogRow`.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, NamedTuple, Self, cast

from common.domain.states import TaskState
from common.domain.timers import AttemptTimers, RunTimers


class Keep(enum.Enum):
    """The value of a field whose column the change leaves as it is."""

    KEEP = "keep"


KEEP: Final = Keep.KEEP


class _Update:
    """What the row updates share: the columns set, folding."""

    __slots__ = ()

    def then(self, later: Self) -> Self:
        """Fold ``later`` over this change: each column as the last change set it."""
        kept = {name: value for name in self.columns()
                if (value := getattr(later, name)) is not KEEP}
        return self.with_columns(kept) if kept else self

    def with_columns(self, changes: Mapping[str, Any]) -> Self:
        """A copy with ``changes`` set: ``dataclasses.replace`` without its checks.

        The engine folds a few updates per message (35,000 copies for 9,000 messages at
        250 fires a second); ``replace`` goes through ``__init__`` and cost a third more.
        """
        new = object.__new__(type(self))
        for name in self.columns():
            object.__setattr__(new, name, changes[name] if name in changes else getattr(self, name))
        return new

    def set_columns(self) -> tuple[str, ...]:
        """The names of the columns this update sets, in field order."""
        return tuple(name for name in self.columns() if getattr(self, name) is not KEEP)

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        """Every column an update of this table may set."""
        return _columns(cast(Any, cls))

    @classmethod
    def sql_type(cls, name: str) -> str:
        """The PostgreSQL type of the column ``name``."""
        return _sql_types(cast(Any, cls))[name]


@functools.cache
def _columns(cls: type[Any]) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


@functools.cache
def _sql_types(cls: type[Any]) -> dict[str, str]:
    return {f.name: str(f.metadata["sql_type"]) for f in dataclasses.fields(cls)}


def column(sql_type: str) -> Any:
    """A field for a column of ``sql_type``, :data:`KEEP` unless the change sets it.

    The writer sends each column of a batch as one array of that type (``unnest``).
    """
    return dataclasses.field(default=KEEP, metadata={"sql_type": sql_type})


@dataclass(frozen=True, slots=True)
class TaskRunUpdate(_Update):
    """New values of one ``task_runs`` row."""

    state: str | Keep = column("text")
    attempt: int | Keep = column("int")
    base: int | Keep = column("int")
    worker: str | None | Keep = column("text")
    started_at: datetime | None | Keep = column("timestamptz")
    finished_at: datetime | None | Keep = column("timestamptz")
    output: dict[str, Any] | None | Keep = column("jsonb")
    message: str | Keep = column("text")
    retry_at: datetime | None | Keep = column("timestamptz")
    detached: bool | Keep = column("bool")
    lease_expires_at: datetime | None | Keep = column("timestamptz")
    claim_check_at: datetime | None | Keep = column("timestamptz")
    deadline_at: datetime | None | Keep = column("timestamptz")
    waiting_for: str | None | Keep = column("text")

    def timed(self, timers: AttemptTimers) -> TaskRunUpdate:
        """The same update with the attempt's timers the pure core decided."""
        return self.with_columns(timers)


@dataclass(frozen=True, slots=True)
class RunUpdate(_Update):
    """New values of one ``runs`` row (the writer also bumps its version)."""

    state: str | Keep = column("text")
    started_at: datetime | None | Keep = column("timestamptz")
    finished_at: datetime | None | Keep = column("timestamptz")
    cancel_requested_at: datetime | None | Keep = column("timestamptz")
    cancel_grace_sent_at: datetime | None | Keep = column("timestamptz")
    timeout_at: datetime | None | Keep = column("timestamptz")
    suspend_due_at: datetime | None | Keep = column("timestamptz")
    updated_at: datetime | Keep = column("timestamptz")

    def timed(self, timers: RunTimers) -> RunUpdate:
        """The same update with the run's timers the pure core decided."""
        return self.with_columns(timers)


# ---- One operation per kind of change to a task run ----

def entered(
    state: TaskState, attempt: int, base: int, *, started: tuple[datetime, str | None] | None,
    finished_at: datetime | None | Keep, outcome: tuple[dict[str, Any] | None, str] | None,
    timers: AttemptTimers | None = None, detached: bool = False,
) -> TaskRunUpdate:
    """An attempt enters ``state``: what the state says of its start, end and outcome.

    ``started`` is (time, worker) of an attempt that became ACTIVE (``detached`` if it
    is completed elsewhere); ``outcome`` (output, message) is what a worker reported on
    finishing; ``timers`` are those the pure core decided for the state. READY and
    WAITING begin an attempt afresh and clear what the one before left. The row is built
    once, timers with it: the engine writes one or more a state change.
    """
    timers = timers or AttemptTimers()
    if state in (TaskState.READY, TaskState.WAITING):
        return TaskRunUpdate(
            state=state.value, attempt=attempt, base=base, started_at=None, finished_at=None,
            worker=None, output=None, message="", retry_at=None, detached=False,
            waiting_for=None, **timers,
        )
    if started is not None:
        return TaskRunUpdate(state=state.value, attempt=attempt, base=base,
                             started_at=started[0], worker=started[1], finished_at=None,
                             detached=True if detached else KEEP, **timers)
    if outcome is None:
        return TaskRunUpdate(state=state.value, attempt=attempt, base=base,
                             finished_at=finished_at, **timers)
    return TaskRunUpdate(state=state.value, attempt=attempt, base=base, finished_at=finished_at,
                         output=outcome[0], message=outcome[1], **timers)


def lease_renewed(lease_expires_at: datetime) -> TaskRunUpdate:
    """A worker reported on its attached ACTIVE attempt: its lease runs on."""
    return TaskRunUpdate(lease_expires_at=lease_expires_at)


def detached(timers: AttemptTimers) -> TaskRunUpdate:
    """The attempt is completed elsewhere from now on: no lease, only its deadline."""
    return TaskRunUpdate(detached=True).timed(timers)


def held(waiting_for: str) -> TaskRunUpdate:
    """Flow control holds the READY attempt back: no claim to check until it goes.

    Its ``flow_waiters`` rows are what watches it (the beat admits what waits).
    """
    return TaskRunUpdate(waiting_for=waiting_for, claim_check_at=None)


def released(timers: AttemptTimers) -> TaskRunUpdate:
    """A held attempt goes: nothing holds it back, and its claim is checked from now."""
    return TaskRunUpdate(waiting_for=None).timed(timers)


def retry_scheduled(retry_at: datetime) -> TaskRunUpdate:
    """The failed attempt is tried again at ``retry_at`` (the beat's retry duty)."""
    return TaskRunUpdate(retry_at=retry_at)


# ---- Rows a transaction adds ----

class JournalRow(NamedTuple):
    """One state change of a run (``task`` and ``attempt`` None) or of a task."""

    run_id: uuid.UUID
    task: str | None
    attempt: int | None
    at: datetime
    from_state: str
    to_state: str
    reason: str
    actor: str


class LogRow(NamedTuple):
    """One line a task attempt printed."""

    task_run_id: uuid.UUID
    attempt: int
    at: datetime
    stream: str
    line: str
