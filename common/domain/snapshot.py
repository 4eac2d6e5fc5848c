"""The in-memory picture of one run that the state machine decides on.

The engine loads it under the run's row lock, :func:`advance` reads it, and
:meth:`RunSnapshot.apply` folds each transition back in. Counters (predecessors not
yet done, tasks per type and state) are kept incrementally so that one event costs
O(neighbours), not O(tasks): a 10,000-task fan-in must not be quadratic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta

from common.domain.graph import Graph
from common.domain.states import TASK_DONE, RunState, TaskState


@dataclass(frozen=True)
class TaskInfo:
    """What the machine needs to know of a task's definition."""

    type: str
    retries: int = 0
    retry_backoff: timedelta = timedelta(seconds=1)
    confirm: bool = False


@dataclass
class TaskRunView:
    """The mutable part of one task run."""

    state: TaskState
    attempt: int = 0
    # Attempts keep counting across a retry of the run (each has its own idempotency
    # key); ``base`` is the attempt at which the current retry budget started.
    base: int = 0


@dataclass
class RunSnapshot:
    """A run with its graph and task states, plus derived counters."""

    state: RunState
    graph: Graph
    info: dict[str, TaskInfo]
    tasks: dict[str, TaskRunView]
    canary: bool = False
    failure_threshold: float = 0.0
    pending: dict[str, int] = field(init=False)
    counts: Counter[tuple[str, TaskState]] = field(init=False)
    type_sizes: Counter[str] = field(init=False)

    def __post_init__(self) -> None:
        """Derive the counters from the task states."""
        self.pending = {
            name: sum(1 for p in preds if self.tasks[p].state not in TASK_DONE)
            for name, preds in self.graph.predecessors.items()
        }
        self.counts = Counter((self.info[n].type, t.state) for n, t in self.tasks.items())
        self.type_sizes = Counter(self.info[n].type for n in self.tasks)

    def is_canary_type(self, type_: str) -> bool:
        """Canary mode guards types with several tasks; a lone task has nothing to guard."""
        return self.canary and self.type_sizes[type_] > 1

    def count(self, states: frozenset[TaskState] | TaskState, type_: str | None = None) -> int:
        """Number of tasks in ``states`` (optionally of one type)."""
        wanted = states if isinstance(states, frozenset) else frozenset({states})
        return sum(
            n for (t, s), n in self.counts.items() if s in wanted and (type_ is None or t == type_)
        )

    def progress(self) -> dict[str, int]:
        """Task counts per state, the ``progress`` of the API."""
        totals: Counter[str] = Counter()
        for (_, state), n in self.counts.items():
            if n:
                totals[state.value] += n
        return dict(totals)

    def apply(self, transition: Transition) -> None:
        """Fold a transition computed by :func:`advance` into this snapshot."""
        for change in transition.task_changes:
            view = self.tasks[change.task]
            for kind, key, delta in counter_deltas(self, change.task, change.old, change.new):
                if kind == "pending":
                    self.pending[key] += delta
                else:
                    self.counts[(self.info[change.task].type, TaskState(key))] += delta
            view.state = change.new
            view.attempt = change.attempt
            view.base = change.base
        for run_change in transition.run_changes:
            self.state = run_change.new


def counter_deltas(
    snap: RunSnapshot, task: str, old: TaskState, new: TaskState
) -> Iterator[tuple[str, str, int]]:
    """Counter updates caused by one task changing state, shared by draft and apply."""
    yield ("count", old.value, -1)
    yield ("count", new.value, 1)
    was_done, is_done = old in TASK_DONE, new in TASK_DONE
    if was_done != is_done:
        delta = -1 if is_done else 1
        for succ in snap.graph.successors[task]:
            yield ("pending", succ, delta)


@dataclass(frozen=True)
class TaskChange:
    """One task state change, journaled with its reason."""

    task: str
    old: TaskState
    new: TaskState
    attempt: int
    reason: str
    base: int = 0


@dataclass(frozen=True)
class RunChange:
    """One run state change, journaled with its reason."""

    old: RunState
    new: RunState
    reason: str


@dataclass(frozen=True)
class Dispatch:
    """Send the task's attempt to its type's queue."""

    task: str
    attempt: int


@dataclass(frozen=True)
class Stop:
    """Tell whoever runs the attempt to stop (Celery revoke with terminate)."""

    task: str
    attempt: int


@dataclass(frozen=True)
class RetryAt:
    """Re-dispatch the task once its backoff has passed."""

    task: str
    attempt: int
    delay: timedelta


Effect = Dispatch | Stop | RetryAt


@dataclass
class Transition:
    """What :func:`advance` decided: state changes and their effects, in order."""

    task_changes: list[TaskChange] = field(default_factory=list)
    run_changes: list[RunChange] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)
    ignored: str | None = None

    @property
    def empty(self) -> bool:
        """True when nothing changes."""
        return not (self.task_changes or self.run_changes or self.effects)
