"""Which events a state change is announced as (docs/architecture.md, "Events").

Pure: the engine names the events of the changes it applies, and ``GET /events`` names
those of a run's journal when a client asks for the run's history, the same way.

A run's final event is ``run.done``: sent last, once each time the run ends, whatever
the end (its ``state`` says which). ``run.completed``, ``run.failed``, ``run.timeout``
and ``run.canceled`` come just before it, for subscribers of one kind of end.
"""

from __future__ import annotations

from common.domain.states import RUN_TERMINAL, RunState

R = RunState
FINAL_EVENT = "run.done"
_RUN_EVENTS = {
    R.CONFIRM: "run.confirm", R.PAUSED: "run.paused", R.COMPLETED: "run.completed",
    R.FAILED: "run.failed", R.TIMEOUT: "run.timeout", R.CANCELED: "run.canceled",
}


def run_event_names(old: RunState | None, new: RunState) -> list[str]:
    """The events of a run's change from ``old`` (None: created) to ``new``, in order."""
    if old is None:
        return ["run.scheduled"] if new == R.READY else []
    if new == R.ACTIVE:
        return ["run.started" if old == R.READY else "run.resumed"]
    name = _RUN_EVENTS.get(new)
    if name is None:
        return []
    return [name, FINAL_EVENT] if new in RUN_TERMINAL else [name]


def task_event_name(new: str) -> str:
    """The event of a task run entering ``new`` (``task.completed``)."""
    return f"task.{new.lower()}"
