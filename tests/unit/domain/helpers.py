"""Building snapshots from a spec and stepping them, for the unit tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from common.domain import events as ev
from common.domain.machine import advance
from common.domain.snapshot import Dispatch, RunSnapshot, TaskInfo, TaskRunView, Transition
from common.domain.spec import JobSpec
from common.domain.states import RunState, TaskState

NOW = datetime(2027, 3, 1, tzinfo=UTC)


def make_run(tasks: list[dict[str, Any]], **settings: Any) -> RunSnapshot:
    spec = JobSpec(name="job", tasks=tasks, **settings)
    graph = spec.graph()
    info = {
        t.name: TaskInfo(
            type=t.type, retries=t.retries or 0,
            retry_backoff=t.retry_backoff or timedelta(seconds=1), confirm=t.confirm,
        )
        for t in spec.tasks
    }
    return RunSnapshot(
        RunState.READY, graph, info, {t.name: TaskRunView(TaskState.WAITING) for t in spec.tasks},
        canary=spec.canary, failure_threshold=spec.failure_threshold,
    )


def step(run: RunSnapshot, event: ev.Event) -> Transition:
    transition = advance(run, event, NOW)
    run.apply(transition)
    return transition


def run_state(run: RunSnapshot) -> RunState:
    """``run.state`` read afresh: mypy keeps an asserted ``run.state`` narrowed across
    ``step``, which changes it."""
    return run.state


def dispatched(transition: Transition) -> list[str]:
    return [e.task for e in transition.effects if isinstance(e, Dispatch)]


def finish(run: RunSnapshot, task: str, outcome: TaskState = TaskState.COMPLETED) -> Transition:
    return step(run, ev.TaskFinished(task, run.tasks[task].attempt, outcome))


def states(run: RunSnapshot) -> dict[str, str]:
    return {name: view.state.value for name, view in run.tasks.items()}
