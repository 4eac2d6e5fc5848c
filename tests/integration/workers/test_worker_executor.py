"""The executor in this process, on real Redis: claims, cancels, rejections, post-backs."""

from datetime import timedelta

import pytest
import redis

from common.messaging.keys import cancel_key, claim_key
from common.messaging.publisher import Publisher
from tests.integration.workers.conftest import MakeDispatch, ResultInbox
from workers.context import TaskContext
from workers.executor import Executor
from workers.outcomes import Accepted, Completed
from workers.registry import Registry


@pytest.fixture
def registry() -> Registry:
    registry = Registry()

    @registry.processor("save")
    def save(ctx: TaskContext) -> Completed:
        ctx.log("saving")
        ctx.save_storage({"seen": ctx.params["n"]})
        return Completed({"n": ctx.params["n"]})

    @registry.processor("later")
    def later(ctx: TaskContext) -> Accepted:
        ctx.log("accepting")
        ctx.save_storage({"accepted": True})
        return Accepted()

    @registry.processor("broken")
    def broken(ctx: TaskContext) -> None:
        raise KeyError("missing")

    return registry


@pytest.fixture
def executor(registry: Registry, worker_redis_url: str, worker_redis: redis.Redis) -> Executor:
    publisher = Publisher(worker_redis)
    return Executor(registry, worker_redis, publisher, heartbeat_interval=timedelta(seconds=1))


def test_an_attempt_runs_once_and_reports_output_storage_and_log(
    executor: Executor, inbox: ResultInbox, make_dispatch: MakeDispatch, worker_redis: redis.Redis,
) -> None:
    dispatch = make_dispatch("save", params={"n": 7})
    payload = dispatch.model_dump(mode="json")
    executor.handle(payload, worker="w1")
    executor.handle(payload, worker="w2")
    inbox.drain()
    (result,) = inbox.for_attempt(dispatch)
    assert (result.kind, result.outcome, result.output, result.storage) == (
        "finished",
        "COMPLETED",
        {"n": 7},
        {"seen": 7},
    )
    assert [line.line for line in result.logs] == ["saving"]
    assert worker_redis.get(claim_key(dispatch.idempotency_key)) == b"w1"
    assert 0 < worker_redis.ttl(claim_key(dispatch.idempotency_key)) <= 86400


def test_the_next_attempt_is_a_new_claim(
    executor: Executor, inbox: ResultInbox, make_dispatch: MakeDispatch,
) -> None:
    first = make_dispatch("save", params={"n": 1})
    second = first.model_copy(update={"attempt": 2})
    executor.handle(first.model_dump(mode="json"), worker="w1")
    executor.handle(second.model_dump(mode="json"), worker="w1")
    inbox.drain()
    assert len(inbox.for_attempt(first)) == len(inbox.for_attempt(second)) == 1


def test_an_attempt_cancelled_before_it_starts_is_skipped(
    executor: Executor, inbox: ResultInbox, make_dispatch: MakeDispatch, worker_redis: redis.Redis,
) -> None:
    dispatch = make_dispatch("save", params={"n": 1})
    worker_redis.set(cancel_key(dispatch.idempotency_key), "1", ex=60)
    executor.handle(dispatch.model_dump(mode="json"), worker="w1")
    inbox.drain()
    assert inbox.for_attempt(dispatch) == []


def test_an_accepted_attempt_is_reported_detached(
    executor: Executor, inbox: ResultInbox, make_dispatch: MakeDispatch,
) -> None:
    """Else its lease expired and the engine requeued a task someone else completes."""
    dispatch = make_dispatch("later")
    executor.handle(dispatch.model_dump(mode="json"), worker="w1")
    inbox.drain()
    (result,) = inbox.for_attempt(dispatch)
    assert (result.kind, result.detached, result.outcome) == ("started", True, None)
    assert [line.line for line in result.logs] == ["accepting"]
    assert result.storage == {"accepted": True}


def test_an_exception_is_a_failure(
    executor: Executor, inbox: ResultInbox, make_dispatch: MakeDispatch,
) -> None:
    dispatch = make_dispatch("broken")
    executor.handle(dispatch.model_dump(mode="json"), worker="w1")
    inbox.drain()
    (result,) = inbox.for_attempt(dispatch)
    assert (result.outcome, result.message) == ("FAILED", "KeyError: 'missing'")
    assert result.logs[0].line.startswith("Traceback")


def test_a_type_without_processor_is_rejected(
    executor: Executor, inbox: ResultInbox, make_dispatch: MakeDispatch,
) -> None:
    dispatch = make_dispatch("unknown")
    executor.handle(dispatch.model_dump(mode="json"), worker="w1")
    inbox.drain()
    (result,) = inbox.for_attempt(dispatch)
    assert result.outcome == "REJECTED"
    assert "no processor registered for task type 'unknown'" in result.message
    assert "on worker w1" in result.message


def test_a_malformed_dispatch_naming_its_attempt_is_rejected(
    executor: Executor, inbox: ResultInbox, make_dispatch: MakeDispatch,
) -> None:
    dispatch = make_dispatch("save")
    payload = dispatch.model_dump(mode="json")
    del payload["job_id"]
    executor.handle(payload, worker="w1")
    executor.handle(["not", "a", "dispatch"], worker="w1")
    inbox.drain()
    (result,) = inbox.for_attempt(dispatch)
    assert result.outcome == "REJECTED"
    assert result.message.startswith("invalid task dispatch")
    assert "job_id" in result.message
