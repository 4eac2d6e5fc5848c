"""Property tests: random graphs driven by random, duplicated and reordered events.

Invariants checked after every step:
- every change passes the transition tables (the draft raises otherwise);
- no (task, attempt) is dispatched twice, and every dispatch moved that task to READY,
  except a repair's ``Redeliver``, which sends the READY attempt it names once more;
- the incremental counters equal counters recomputed from scratch;
- every attempt a change leaves READY or ACTIVE has a timer the beat watches (a claim
  check, a lease, a deadline), and nothing else has one; a finished run keeps no
  timeout (``common.domain.timers``);
- a run is terminal exactly when no task can make progress.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.domain import events as ev
from common.domain.graph import Graph
from common.domain.machine import Refused, advance
from common.domain.snapshot import Dispatch, RunSnapshot, TaskInfo, TaskRunView, Transition
from common.domain.states import RUN_TERMINAL, TASK_TERMINAL, RunState, TaskState
from common.domain.timers import Clock, RunTiming, attempt_timers, run_timers

T = TaskState
NOW = datetime(2027, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=6)
TIMEOUT = timedelta(minutes=5)
OUTCOMES = [T.COMPLETED, T.COMPLETED, T.COMPLETED, T.FAILED, T.REJECTED, T.TIMEOUT]


@st.composite
def snapshots(draw: st.DrawFn) -> RunSnapshot:
    n = draw(st.integers(1, 10))
    names = [f"t{i}" for i in range(n)]
    succ: dict[str, list[str]] = {name: [] for name in names}
    for i in range(n):
        for j in range(i + 1, n):
            if draw(st.booleans()) and draw(st.booleans()):
                succ[names[i]].append(names[j])
    types = {name: draw(st.sampled_from(["a", "b"])) for name in names}
    graph = Graph.build((name, types[name], succ[name]) for name in names)
    info = {
        name: TaskInfo(type=types[name], retries=draw(st.integers(0, 2)),
                       retry_backoff=timedelta(seconds=1), confirm=draw(st.booleans()))
        for name in names
    }
    return RunSnapshot(
        state=RunState.READY, graph=graph, info=info,
        tasks={name: TaskRunView(T.WAITING) for name in names},
        canary=draw(st.booleans()),
        failure_threshold=draw(st.sampled_from([0.0, 0.2, 0.5, 1.0])),
    )


@dataclass
class Driver:
    snap: RunSnapshot
    dispatched: set[tuple[str, int]] = field(default_factory=set)
    history: list[ev.Event] = field(default_factory=list)

    def step(self, event: ev.Event) -> None:
        self.history.append(event)
        try:
            transition = advance(self.snap, event, NOW)
        except Refused:
            return
        ready = {(c.task, c.attempt) for c in transition.task_changes if c.new == T.READY}
        for effect in transition.effects:
            if isinstance(effect, Dispatch):
                key = (effect.task, effect.attempt)
                if isinstance(event, ev.Redeliver):
                    assert key in self.dispatched, f"{key} redelivered, never dispatched"
                    assert self.snap.tasks[effect.task] == TaskRunView(
                        T.READY, effect.attempt, self.snap.tasks[effect.task].base
                    ), f"{key} redelivered while {self.snap.tasks[effect.task]}"
                    continue
                assert key not in self.dispatched, f"{key} dispatched twice"
                assert key in ready, f"{key} dispatched without moving to READY"
                self.dispatched.add(key)
        self.snap.apply(transition)
        self.check()
        check_timers(transition)

    def check(self) -> None:
        fresh = RunSnapshot(
            self.snap.state, self.snap.graph, self.snap.info,
            {k: TaskRunView(v.state, v.attempt, v.base) for k, v in self.snap.tasks.items()},
            self.snap.canary, self.snap.failure_threshold,
        )
        assert fresh.pending == self.snap.pending
        assert +fresh.counts == +self.snap.counts
        states = {v.state for v in self.snap.tasks.values()}
        if self.snap.state in RUN_TERMINAL:
            assert states <= TASK_TERMINAL, f"terminal run with tasks {states}"
        if states <= TASK_TERMINAL:
            assert self.snap.state not in {RunState.ACTIVE, RunState.CONFIRM}
        if self.snap.state == RunState.ACTIVE:
            moving = {T.READY, T.ACTIVE, T.SOFT_FAILED}
            assert states & moving, f"ACTIVE run with nothing moving: {states}"


def check_timers(transition: Transition) -> None:
    """No live attempt without a timer, no timer on anything else; runs likewise."""
    clock = Clock(NOW, LEASE)
    for change in transition.task_changes:
        for detached in (False, True):
            timers = attempt_timers(change.new, clock, timeout=TIMEOUT, detached=detached)
            set_at = (timers.get("lease_expires_at"), timers.get("claim_check_at"),
                      timers.get("deadline_at"))
            watched = [at for at in set_at if at is not None]
            live = change.new in (T.READY, T.ACTIVE)
            assert bool(watched) == live, f"{change.new} (detached {detached}): {timers}"
            assert all(at > NOW for at in watched)
    for run_change in transition.run_changes:
        run = run_timers(run_change, NOW, RunTiming(timeout=TIMEOUT, suspend_after=TIMEOUT))
        if run_change.new in RUN_TERMINAL:
            assert run == {"timeout_at": None}, run
        if run_change.new == RunState.ACTIVE and run_change.old == RunState.READY:
            assert run == {"timeout_at": NOW + TIMEOUT, "suspend_due_at": NOW + TIMEOUT}


def _random_event(data: st.DataObject, snap: RunSnapshot) -> ev.Event:
    names = list(snap.tasks)
    task = data.draw(st.sampled_from(names))
    current = snap.tasks[task].attempt
    attempt = data.draw(st.sampled_from([current, current, max(current - 1, 0), current + 1]))
    kind = data.draw(st.sampled_from([
        "finished", "finished", "finished", "started", "retry", "lease", "confirm", "reject",
        "cancel", "pause", "resume", "retry_run", "retry_task", "skip", "grace", "timeout",
        "task_timeout", "redeliver", "reconcile",
    ]))
    simple: dict[str, ev.Event] = {
        "cancel": ev.CancelRun(), "pause": ev.PauseRun(), "resume": ev.ResumeRun(),
        "retry_run": ev.RetryRun(), "grace": ev.CancelGraceOver(), "timeout": ev.RunTimedOut(),
        "reconcile": ev.Reconcile(),
    }
    if kind in simple:
        return simple[kind]
    per_task: dict[str, ev.Event] = {
        "finished": ev.TaskFinished(task, attempt, data.draw(st.sampled_from(OUTCOMES))),
        "started": ev.TaskStarted(task, attempt), "retry": ev.RetryDue(task, attempt),
        "lease": ev.LeaseExpired(task, attempt), "confirm": ev.ConfirmTask(task),
        "reject": ev.RejectTask(task), "retry_task": ev.RetryTask(task), "skip": ev.SkipTask(task),
        "task_timeout": ev.TaskTimedOut(task, attempt), "redeliver": ev.Redeliver(task, attempt),
    }
    return per_task[kind]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=snapshots(), data=st.data())
def test_random_event_sequences_keep_the_invariants(snap: RunSnapshot, data: st.DataObject) -> None:
    driver = Driver(snap)
    driver.step(ev.StartRun())
    for _ in range(data.draw(st.integers(1, 60))):
        driver.step(_random_event(data, driver.snap))


@settings(max_examples=200, deadline=None)
@given(snap=snapshots(), data=st.data())
def test_a_fair_worker_completes_every_run_dispatching_each_task_once(
    snap: RunSnapshot, data: st.DataObject
) -> None:
    """Workers that always succeed (results duplicated and reordered) finish the run."""
    driver = Driver(snap)
    driver.step(ev.StartRun())
    inbox: list[ev.Event] = []
    done: set[tuple[str, int]] = set()
    for _ in range(500):
        for key in sorted(driver.dispatched - done):
            done.add(key)
            result = ev.TaskFinished(key[0], key[1], T.COMPLETED)
            inbox += [result] * data.draw(st.integers(1, 2))
        confirming = [n for n, v in driver.snap.tasks.items() if v.state == T.CONFIRM]
        if not inbox and confirming:
            inbox.append(ev.ConfirmTask(confirming[0]))
        if not inbox:
            break
        index = data.draw(st.integers(0, len(inbox) - 1))
        driver.step(inbox.pop(index))
    assert driver.snap.state == RunState.COMPLETED
    assert {task for task, _ in driver.dispatched} == set(driver.snap.tasks)
    assert len(driver.dispatched) == len(driver.snap.tasks)
