"""A person's action on one run (cancel, pause, confirm...), applied as the engine would.

The API calls :meth:`RunControl.run_action` or :meth:`RunControl.task_action`. The run
is locked and loaded by :class:`RunLoader` and the events go through
:class:`~scheduler.engine.applying.Applying`, as an engine batch's do: the pure
``advance`` decides, the rows are written in the same transaction (bumping the run's
``version``, so every engine's cached snapshot of the run is reloaded). After the
commit the outbox rows are relayed and ACTIVE attempts told to stop. An action the
state tables do not allow changes nothing and is reported as a :class:`Conflict`
naming the current state.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Literal

from common.domain import events as ev
from common.domain.machine import Refused
from common.domain.states import TaskState
from common.persistence.db import driver
from scheduler.engine.applying import RunWriter
from scheduler.engine.loading import RunRecord
from scheduler.services.errors import Conflict, NotFound

log = logging.getLogger(__name__)

RunAction = Literal["cancel", "pause", "resume", "retry", "confirm"]
TaskAction = Literal["confirm", "reject", "skip", "retry"]

_RUN_EVENTS: dict[str, ev.Event] = {
    "cancel": ev.CancelRun(), "pause": ev.PauseRun(), "resume": ev.ResumeRun(),
    "retry": ev.RetryRun(),
}
_TASK_EVENTS: dict[str, Callable[[str], ev.Event]] = {
    "confirm": ev.ConfirmTask, "reject": ev.RejectTask, "skip": ev.SkipTask,
    "retry": ev.RetryTask,
}


class RunControl(RunWriter):
    """Applies person actions; composed once per API process (see ``Resources``)."""

    def run_action(self, run_id: uuid.UUID, action: RunAction, actor: str) -> None:
        """Cancel, pause, resume, retry the run, or confirm every task waiting in it."""
        if action == "confirm":
            self._apply(run_id, actor, _confirm_all)
        else:
            event = _RUN_EVENTS[action]
            self._apply(run_id, actor, lambda record: [event])

    def task_action(self, run_id: uuid.UUID, task: str, action: TaskAction, actor: str) -> None:
        """Confirm, reject, skip or retry one task, named by its name or task run id."""
        make = _TASK_EVENTS[action]
        self._apply(run_id, actor, lambda record: [make(task_name(record, task))])

    def _apply(
        self, run_id: uuid.UUID, actor: str,
        events_of: Callable[[RunRecord], Sequence[ev.Event]],
    ) -> None:
        with self._sessions.begin() as session:
            conn = driver(session)
            record = self._loader.lock(conn, [run_id]).get(run_id)
            if record is None:
                raise NotFound("run", run_id)
            _require_same_graph(record)
            applying = self.applying(actor)
            events = list(events_of(record))
            for event in events:
                try:
                    applying.apply(record, event)
                except Refused as refused:
                    # Raised inside the transaction: nothing is written.
                    raise Conflict(str(refused)) from refused
            written = applying.write(conn, [record])
        names = ", ".join(type(event).__name__ for event in events)
        log.info("run %s: %s applied for %s", run_id, names, actor)
        self.after_commit(written)


def _require_same_graph(record: RunRecord) -> None:
    """Refuse to act on a run whose job's graph has changed since the run was created.

    A PATCH may change a job's tasks only while none of its runs is unfinished, but a
    finished run can still be retried; its task runs no longer match the graph, so the
    retry would run a graph that exists nowhere. A new run is the way to run the new one.
    """
    if set(record.task_run_ids) != set(record.job.tasks):
        raise Conflict(
            f"the tasks of job {record.job.id} changed after run {record.id} was created: "
            "start a new run instead"
        )


def _confirm_all(record: RunRecord) -> list[ev.Event]:
    waiting = [name for name, view in record.snapshot.tasks.items()
               if view.state == TaskState.CONFIRM]
    if not waiting:
        state = record.snapshot.state
        raise Conflict(f"run is {state}: no task waits for confirmation")
    return [ev.ConfirmTask(name) for name in waiting]


def task_name(record: RunRecord, task: str) -> str:
    """The name of the task ``task`` names (a name or a task run id), or NotFound."""
    if task in record.task_run_ids:
        return task
    try:
        name = record.names_by_id.get(uuid.UUID(task))
    except ValueError:
        name = None
    if name is None:
        raise NotFound("task", f"{task!r} in run {record.id}")
    return name
