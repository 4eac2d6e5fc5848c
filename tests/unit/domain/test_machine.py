from datetime import timedelta

import pytest

from common.domain import events as ev
from common.domain.machine import Refused
from common.domain.snapshot import RetryAt, Stop
from common.domain.states import RunState, TaskState

from .helpers import dispatched, finish, make_run, run_state, states, step

T = TaskState


def chain(n: int) -> list[dict[str, object]]:
    return [{"name": f"t{i}", "type": "noop", "next": [f"t{i + 1}"] if i < n - 1 else []}
            for i in range(n)]


def test_chain_runs_in_order() -> None:
    run = make_run(chain(3))
    assert dispatched(step(run, ev.StartRun())) == ["t0"]
    assert dispatched(finish(run, "t0")) == ["t1"]
    assert dispatched(finish(run, "t1")) == ["t2"]
    finish(run, "t2")
    assert run.state == RunState.COMPLETED


def test_join_is_dispatched_once_after_all_branches() -> None:
    run = make_run([
        {"name": "split", "type": "noop", "next": ["a", "b"]},
        {"name": "a", "type": "noop", "next": ["join"]},
        {"name": "b", "type": "noop", "next": ["join"]},
        {"name": "join", "type": "noop"},
    ])
    step(run, ev.StartRun())
    assert sorted(dispatched(finish(run, "split"))) == ["a", "b"]
    assert dispatched(finish(run, "a")) == []
    assert dispatched(finish(run, "b")) == ["join"]
    assert dispatched(finish(run, "b")) == []  # a duplicate result changes nothing


def test_failure_fails_the_run_and_cancels_the_rest() -> None:
    run = make_run([
        {"name": "a", "type": "noop", "next": ["c"]},
        {"name": "b", "type": "noop"},
        {"name": "c", "type": "noop"},
    ])
    step(run, ev.StartRun())
    step(run, ev.TaskStarted("b", 1))
    tr = finish(run, "a", T.FAILED)
    assert run.state == RunState.FAILED
    assert states(run) == {"a": "FAILED", "b": "CANCELED", "c": "CANCELED"}
    assert Stop("b", 1) in tr.effects


def test_retry_goes_soft_failed_then_completes_on_attempt_two() -> None:
    run = make_run([{"name": "a", "type": "noop", "retries": 1, "retry_backoff": 2}])
    step(run, ev.StartRun())
    tr = finish(run, "a", T.FAILED)
    assert run.tasks["a"].state == T.SOFT_FAILED
    assert RetryAt("a", 1, timedelta(seconds=2)) in tr.effects
    assert dispatched(step(run, ev.RetryDue("a", 1))) == ["a"]
    assert run.tasks["a"].attempt == 2
    finish(run, "a", T.COMPLETED)
    assert run.state == RunState.COMPLETED


@pytest.mark.parametrize(("n", "expected"), [(11, RunState.COMPLETED), (10, RunState.FAILED)])
def test_failure_threshold_arithmetic(n: int, expected: RunState) -> None:
    tasks = [{"name": f"t{i}", "type": "noop"} for i in range(n)]
    run = make_run(tasks, failure_threshold=0.1)
    step(run, ev.StartRun())
    finish(run, "t0", T.FAILED)
    for i in range(1, n):
        if run.tasks[f"t{i}"].state == T.READY:
            finish(run, f"t{i}")
    assert run.state == expected


def test_below_threshold_descendants_are_skipped_and_other_branches_finish() -> None:
    run = make_run([
        {"name": "a", "type": "noop", "next": ["a2"]},
        {"name": "a2", "type": "noop"},
        {"name": "b", "type": "noop", "next": ["b2"]},
        {"name": "b2", "type": "noop"},
    ], failure_threshold=0.5)
    step(run, ev.StartRun())
    finish(run, "a", T.FAILED)
    assert run.tasks["a2"].state == T.SKIPPED
    finish(run, "b")
    finish(run, "b2")
    assert run.state == RunState.COMPLETED
    assert run.progress() == {"FAILED": 1, "SKIPPED": 1, "COMPLETED": 2}


def test_canary_runs_one_task_per_type_until_confirmed() -> None:
    run = make_run([
        {"name": "start", "type": "noop", "next": ["x1", "x2", "x3"]},
        {"name": "x1", "type": "deploy"}, {"name": "x2", "type": "deploy"},
        {"name": "x3", "type": "deploy"},
    ], canary=True)
    step(run, ev.StartRun())
    finish(run, "start")  # the only noop: nothing to guard, no confirmation
    assert [n for n, s in states(run).items() if s == "READY"] == ["x1"]
    finish(run, "x1")
    assert run.state == RunState.CONFIRM and run.tasks["x1"].state == T.CONFIRM
    tr = step(run, ev.ConfirmTask("x1"))
    assert sorted(dispatched(tr)) == ["x2", "x3"]
    finish(run, "x2")
    finish(run, "x3")
    assert run_state(run) == RunState.COMPLETED


def test_cancel_of_a_completed_run_is_refused_naming_the_state() -> None:
    run = make_run(chain(1))
    step(run, ev.StartRun())
    finish(run, "t0")
    with pytest.raises(Refused) as refused:
        step(run, ev.CancelRun())
    assert refused.value.state == "COMPLETED"


def test_late_result_for_an_old_attempt_changes_nothing() -> None:
    run = make_run([{"name": "a", "type": "noop", "retries": 2}])
    step(run, ev.StartRun())
    finish(run, "a", T.FAILED)
    step(run, ev.RetryDue("a", 1))
    tr = step(run, ev.TaskFinished("a", 1, T.COMPLETED))
    assert tr.empty and tr.ignored
