"""A copy-on-write overlay of a snapshot, in which :func:`advance` makes its decisions.

Reads see the changes already decided in the same step; the snapshot itself is left
untouched, so ``advance`` stays a pure function of its inputs.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from common.domain.snapshot import (
    Effect,
    RunChange,
    RunSnapshot,
    TaskChange,
    Transition,
    counter_deltas,
)
from common.domain.states import RunState, TaskState, run_may, task_may


class IllegalTransition(RuntimeError):
    """The machine tried a change its own table forbids: a bug, never user input."""


class Draft:
    """The decisions of one ``advance`` call, layered over a snapshot."""

    def __init__(self, snap: RunSnapshot, now: datetime) -> None:
        self.snap = snap
        self.now = now
        self.run_state = snap.state
        self._states: dict[str, TaskState] = {}
        self._attempts: dict[str, int] = {}
        self._bases: dict[str, int] = {}
        self._pending: Counter[str] = Counter()
        self._counts: Counter[tuple[str, TaskState]] = Counter()
        self.transition = Transition()

    def state(self, task: str) -> TaskState:
        """The task's state as decided so far."""
        return self._states.get(task, self.snap.tasks[task].state)

    def attempt(self, task: str) -> int:
        """The task's current attempt as decided so far."""
        return self._attempts.get(task, self.snap.tasks[task].attempt)

    def base(self, task: str) -> int:
        """The attempt at which the task's current retry budget started."""
        return self._bases.get(task, self.snap.tasks[task].base)

    def pending(self, task: str) -> int:
        """Predecessors of ``task`` not yet COMPLETED or SKIPPED."""
        return self.snap.pending[task] + self._pending[task]

    def count(self, states: frozenset[TaskState], type_: str | None = None) -> int:
        """Tasks in ``states`` (optionally of one type) as decided so far."""
        extra = sum(
            n for (t, s), n in self._counts.items()
            if s in states and (type_ is None or t == type_)
        )
        return self.snap.count(states, type_) + extra

    def tasks_in(self, states: frozenset[TaskState]) -> list[str]:
        """Names of the tasks currently in ``states``, in graph order."""
        return [name for name in self.snap.tasks if self.state(name) in states]

    def move(
        self, task: str, new: TaskState, reason: str, attempt: int | None = None,
        *, rebase: bool = False,
    ) -> None:
        """Change a task's state through the table, keeping the counters right.

        ``rebase`` starts a fresh retry budget at the current attempt (retry of a run).
        """
        old = self.state(task)
        if not task_may(old, new):
            raise IllegalTransition(f"task {task!r}: {old} -> {new} is not in the table")
        for kind, key, delta in counter_deltas(self.snap, task, old, new):
            if kind == "pending":
                self._pending[key] += delta
            else:
                self._counts[(self.snap.info[task].type, TaskState(key))] += delta
        self._states[task] = new
        number = self.attempt(task) if attempt is None else attempt
        self._attempts[task] = number
        if rebase:
            self._bases[task] = number
        change = TaskChange(task, old, new, number, reason, self.base(task))
        self.transition.task_changes.append(change)

    def move_run(self, new: RunState, reason: str) -> None:
        """Change the run's state through the table."""
        if not run_may(self.run_state, new):
            raise IllegalTransition(f"run: {self.run_state} -> {new} is not in the table")
        self.transition.run_changes.append(RunChange(self.run_state, new, reason))
        self.run_state = new

    def effect(self, effect: Effect) -> None:
        """Record an effect to carry out once the transition is committed."""
        self.transition.effects.append(effect)
