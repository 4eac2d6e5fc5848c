"""Bundles in the executor, on real Redis: each attempt once, slow bundles shared."""

import threading
import time
from datetime import timedelta

import pytest
import redis

from common.messaging.keys import cancel_key, claim_key
from common.messaging.messages import (
    ACTIVATE_TASK,
    ACTIVATION_QUEUE,
    EXECUTE_TASK,
    TaskBundle,
    TaskDispatch,
    task_queue,
)
from common.messaging.publisher import Publisher
from common.messaging.wire import open_envelope
from tests.integration.workers.conftest import MakeDispatch, ResultInbox
from workers.context import TaskContext
from workers.executor import Executor
from workers.outcomes import Completed
from workers.registry import Registry

RELEASE = threading.Event()


@pytest.fixture
def registry() -> Registry:
    registry = Registry()

    @registry.processor("echo")
    def echo(ctx: TaskContext) -> Completed:
        return Completed({"n": ctx.params["n"]})

    @registry.processor("held")
    def held(ctx: TaskContext) -> Completed:
        assert RELEASE.wait(30), "the test never released the held attempt"
        return Completed({"n": ctx.params["n"]})

    return registry


def make_executor(registry: Registry, client: redis.Redis, spill_after_ms: float) -> Executor:
    return Executor(registry, client, Publisher(client), heartbeat_interval=timedelta(seconds=1),
                    spill_after=timedelta(milliseconds=spill_after_ms))


def bundle_of(dispatches: list[dict[str, object]], task_type: str) -> dict[str, object]:
    return TaskBundle(queue=task_queue(task_type), dispatches=dispatches).model_dump(mode="json")


def run_held_until(executor: Executor, bundle: dict[str, object], client: redis.Redis,
                   watched: str, failure: str) -> None:
    """Run a bundle of ``held`` attempts on a thread of worker w1 until four messages
    (the attempts it has not begun) arrive on ``watched``, then let the first one end."""
    RELEASE.clear()
    runner = threading.Thread(target=executor.handle_bundle, args=(bundle, "w1"))
    runner.start()
    deadline = time.monotonic() + 10
    while client.llen(watched) < 4:
        assert time.monotonic() < deadline, failure
        time.sleep(0.01)
    RELEASE.set()
    runner.join(10)


def test_each_attempt_of_a_bundle_runs_once_and_reports(
    registry: Registry, worker_redis: redis.Redis, inbox: ResultInbox, make_dispatch: MakeDispatch,
) -> None:
    executor = make_executor(registry, worker_redis, spill_after_ms=60_000)
    attempts = [make_dispatch("echo", params={"n": n}) for n in range(40)]
    taken, cancelled = attempts[3], attempts[7]
    worker_redis.set(claim_key(taken.idempotency_key), "other-worker", ex=60)
    worker_redis.set(cancel_key(cancelled.idempotency_key), "1", ex=60)
    payloads = [a.model_dump(mode="json") for a in attempts]
    broken = dict(payloads[11], job_id="not-a-uuid")
    payloads[11] = broken
    executor.handle_bundle(bundle_of(payloads, "echo"), worker="w1")
    executor.handle_bundle(bundle_of(payloads, "echo"), worker="w2")  # redelivered
    inbox.drain()
    for n, attempt in enumerate(attempts):
        results = inbox.for_attempt(attempt)
        if attempt in (taken, cancelled):
            assert results == []
        elif n == 11:  # rejected again on redelivery: the engine ignores the repeat
            assert {(r.outcome, "job_id" in r.message) for r in results} == {("REJECTED", True)}
        else:
            assert [(r.kind, r.outcome, r.output, r.worker) for r in results] == [
                ("finished", "COMPLETED", {"n": n}, "w1")]


def test_a_slow_bundle_hands_back_what_it_has_not_begun(
    registry: Registry, worker_redis: redis.Redis, inbox: ResultInbox, make_dispatch: MakeDispatch,
) -> None:
    executor = make_executor(registry, worker_redis, spill_after_ms=50)
    queue = task_queue("held")
    worker_redis.delete(queue)
    attempts = [make_dispatch("held", params={"n": n}) for n in range(5)]
    run_held_until(executor, bundle_of([a.model_dump(mode="json") for a in attempts], "held"),
                   worker_redis, queue, "the slow bundle was not spilled")
    handed_back = [open_envelope(raw) for raw in reversed(worker_redis.lrange(queue, 0, -1))]
    assert [(m.task_name, m.payload["params"]["n"]) for m in handed_back] == [
        (EXECUTE_TASK, n) for n in range(1, 5)]
    inbox.drain()
    assert [r.outcome for r in inbox.for_attempt(attempts[0])] == ["COMPLETED"]
    assert all(inbox.for_attempt(a) == [] for a in attempts[1:])
    assert all(worker_redis.get(claim_key(a.idempotency_key)) is None for a in attempts[1:])


def test_a_bundle_claims_all_its_attempts_before_it_runs_the_first(
    registry: Registry, worker_redis: redis.Redis, inbox: ResultInbox, make_dispatch: MakeDispatch,
) -> None:
    """A worker killed halfway leaves them claimed by a dead worker: the beat requeues them."""
    executor = make_executor(registry, worker_redis, spill_after_ms=60_000)
    attempts = [make_dispatch("held", params={"n": n}) for n in range(3)]
    RELEASE.clear()
    runner = threading.Thread(target=executor.handle_bundle, args=(
        bundle_of([a.model_dump(mode="json") for a in attempts], "held"), "w1"))
    runner.start()
    deadline = time.monotonic() + 10
    while worker_redis.get(claim_key(attempts[-1].idempotency_key)) is None:
        assert time.monotonic() < deadline, "the bundle's last attempt was never claimed"
        time.sleep(0.01)
    claims = [worker_redis.get(claim_key(a.idempotency_key)) for a in attempts]
    RELEASE.set()
    runner.join(10)
    assert claims == [b"w1"] * 3
    inbox.drain()
    assert [r.outcome for a in attempts for r in inbox.for_attempt(a)] == ["COMPLETED"] * 3


def test_an_attempt_given_up_while_its_bundle_waited_is_not_begun(
    worker_redis: redis.Redis, inbox: ResultInbox, make_dispatch: MakeDispatch,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker stopped (SIGSTOP) past its liveness finds, when it runs on, attempts of
    its bundle that the engine gave to another worker and flagged cancelled: those are
    not begun. Here the first attempt flags the second, and every chunk counts as late."""
    monkeypatch.setattr("workers.executor.STALE_CLAIM_S", 0.0)
    attempts = [make_dispatch("flagger", params={"n": n}) for n in range(3)]
    registry = Registry()

    @registry.processor("flagger")
    def flagger(ctx: TaskContext) -> Completed:
        if ctx.params["n"] == 0:
            worker_redis.set(cancel_key(attempts[1].idempotency_key), "1", ex=60)
        return Completed({"n": ctx.params["n"]})

    executor = make_executor(registry, worker_redis, spill_after_ms=60_000)
    executor.handle_bundle(bundle_of([a.model_dump(mode="json") for a in attempts],
                                     "flagger"), worker="w1")
    inbox.drain()
    assert [len(inbox.for_attempt(a)) for a in attempts] == [1, 0, 1]
    assert worker_redis.get(claim_key(attempts[1].idempotency_key)) == b"w1"  # still held


def test_a_single_attempt_given_up_between_its_claim_and_its_start_is_not_begun(
    registry: Registry, worker_redis: redis.Redis, inbox: ResultInbox,
    make_dispatch: MakeDispatch, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker stopped (SIGSTOP) while it claimed a single dispatch runs on past its
    liveness: meanwhile the engine gave the attempt to another worker and flagged it
    cancelled. Here the flag is set right after the claim, and the claim counts as late:
    the attempt is not begun (the worker's late start was seen by the chaos suite)."""
    monkeypatch.setattr("workers.executor.STALE_CLAIM_S", 0.0)
    attempt, other = make_dispatch("echo", params={"n": 1}), make_dispatch("echo", params={"n": 2})
    executor = make_executor(registry, worker_redis, spill_after_ms=60_000)
    claim = executor._holdings.claim

    def claim_then_given_up(dispatches: list[TaskDispatch], worker: str) -> list[bool]:
        won = claim(dispatches, worker)
        if dispatches[0].idempotency_key == attempt.idempotency_key:
            worker_redis.set(cancel_key(attempt.idempotency_key), "1", ex=60)
        return won

    monkeypatch.setattr(executor._holdings, "claim", claim_then_given_up)
    executor.handle(attempt.model_dump(mode="json"), worker="w1")
    executor.handle(other.model_dump(mode="json"), worker="w1")  # asked about, runs
    inbox.drain()
    assert [len(inbox.for_attempt(a)) for a in (attempt, other)] == [0, 1]
    assert worker_redis.get(claim_key(attempt.idempotency_key)) == b"w1"  # still held


def test_a_slow_lane_gives_what_it_has_not_begun_back_to_the_engine(
    registry: Registry, worker_redis: redis.Redis, inbox: ResultInbox, make_dispatch: MakeDispatch,
) -> None:
    """A lane's attempts share one flow slot: queued again they could run side by side, so
    they go back to the engine (``redeliver``) to wait for a slot again."""
    executor = make_executor(registry, worker_redis, spill_after_ms=50)
    queue = task_queue("held")
    worker_redis.delete(queue, ACTIVATION_QUEUE)
    attempts = [make_dispatch("held", params={"n": n}) for n in range(5)]
    lane = TaskBundle(queue=queue, dispatches=[a.model_dump(mode="json") for a in attempts],
                      lane=True).model_dump(mode="json")
    run_held_until(executor, lane, worker_redis, ACTIVATION_QUEUE,
                   "the slow lane was not given back")
    assert worker_redis.llen(queue) == 0
    given = [open_envelope(raw) for raw in reversed(worker_redis.lrange(ACTIVATION_QUEUE, 0, -1))]
    assert [(m.task_name, m.payload["signal"], m.payload["task"], m.payload["attempt"])
            for m in given] == [(ACTIVATE_TASK, "redeliver", a.task, a.attempt)
                                for a in attempts[1:]]
    inbox.drain()
    assert [r.outcome for r in inbox.for_attempt(attempts[0]) if r.kind == "finished"] == [
        "COMPLETED"]
    assert all(inbox.for_attempt(a) == [] for a in attempts[1:])
    assert all(worker_redis.get(claim_key(a.idempotency_key)) is None for a in attempts[1:])
