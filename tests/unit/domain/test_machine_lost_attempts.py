"""The pure machine's part in lost attempts, task timeouts, suspension and repair."""

from common.domain import events as ev
from common.domain.snapshot import Dispatch, RunSnapshot, Stop, TaskRunView
from common.domain.states import RunState, TaskState

from .helpers import dispatched, make_run, run_state, states, step

T = TaskState


def test_a_ready_attempt_of_a_lost_claimant_is_requeued_once() -> None:
    run = make_run([{"name": "a", "type": "x"}])
    step(run, ev.StartRun())
    lost = step(run, ev.LeaseExpired("a", 1))
    assert dispatched(lost) == ["a"] and run.tasks["a"].attempt == 2
    assert Stop("a", 1) in lost.effects  # the claimant may only have been stopped
    assert step(run, ev.LeaseExpired("a", 1)).ignored  # a second signal: not current


def test_the_timeout_backstop_stops_the_attempt_and_applies_the_failure_rule() -> None:
    run = make_run([{"name": "a", "type": "x", "retries": 1}])
    step(run, ev.StartRun())
    step(run, ev.TaskStarted("a", 1))
    first = step(run, ev.TaskTimedOut("a", 1))
    assert Stop("a", 1) in first.effects and states(run) == {"a": "SOFT_FAILED"}
    step(run, ev.RetryDue("a", 1))
    step(run, ev.TaskStarted("a", 2))
    step(run, ev.TaskTimedOut("a", 2))
    assert states(run) == {"a": "TIMEOUT"} and run.state == RunState.TIMEOUT
    assert step(run, ev.TaskTimedOut("a", 2)).ignored


def test_a_backstop_for_a_task_that_is_not_active_changes_nothing() -> None:
    run = make_run([{"name": "a", "type": "x"}])
    step(run, ev.StartRun())
    assert step(run, ev.TaskTimedOut("a", 1)).ignored and states(run) == {"a": "READY"}


def test_suspension_pauses_with_its_reason_and_auto_resume_goes_on() -> None:
    run = make_run([{"name": "a", "type": "x"}])
    step(run, ev.StartRun())
    paused = step(run, ev.PauseRun(reason="suspended"))
    assert [c.reason for c in paused.run_changes][0] == "suspended"
    assert run.state == RunState.PAUSED
    resumed = step(run, ev.ResumeRun(reason="auto-resumed"))
    assert run_state(run) == RunState.ACTIVE and dispatched(resumed) == ["a"]


def test_redeliver_resends_the_same_attempt_only_while_it_is_ready() -> None:
    run = make_run([{"name": "a", "type": "x"}])
    step(run, ev.StartRun())
    again = step(run, ev.Redeliver("a", 1))
    assert again.effects == [Dispatch("a", 1)] and again.task_changes == []
    step(run, ev.TaskStarted("a", 1))
    assert step(run, ev.Redeliver("a", 1)).ignored


def test_reconcile_settles_a_pause_left_half_done() -> None:
    base = make_run([{"name": "a", "type": "x"}, {"name": "b", "type": "x"}])
    # A crash wrote a's end but not the run's move to PAUSED.
    tasks = {"a": TaskRunView(T.COMPLETED, 1), "b": TaskRunView(T.PAUSED, 1)}
    run = RunSnapshot(RunState.PAUSE_REQUESTED, base.graph, base.info, tasks)
    step(run, ev.Reconcile())
    assert run.state == RunState.PAUSED
    assert step(run, ev.Reconcile()).run_changes == []  # idempotent
