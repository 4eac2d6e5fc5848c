"""The executor opens sealed secure params, and masks them in all it reports (real Redis)."""

from datetime import timedelta

import pytest
import redis

from common.messaging.publisher import Publisher
from common.secure_params import SecretBox
from tests.integration.workers.conftest import MakeDispatch, ResultInbox
from workers.context import TaskContext
from workers.executor import Executor
from workers.outcomes import Completed, Failed
from workers.registry import Registry

KEY = "worker-test-key"


@pytest.fixture
def registry() -> Registry:
    registry = Registry()

    @registry.processor("tell")
    def tell(ctx: TaskContext) -> Completed:
        ctx.log(f"task {ctx.secure_params['token']} job {ctx.job_secure_params['password']}")
        return Completed({"echo": ctx.secure_params["token"], "n": ctx.secure_params["n"]})

    @registry.processor("fail")
    def fail(ctx: TaskContext) -> Failed:
        return Failed(f"login as {ctx.job_secure_params['password']} refused")

    return registry


def executor(registry: Registry, client: redis.Redis, key: str | None) -> Executor:
    return Executor(registry, client, Publisher(client), heartbeat_interval=timedelta(seconds=1),
                    secrets=SecretBox(key))


def sealed_fields(key: str) -> dict[str, str]:
    box = SecretBox(key)
    return {
        "sealed_secure_params": box.seal({"token": "tok-abc123", "n": 90210}),
        "sealed_job_secure_params": box.seal({"password": "pw-hunter2"}),
    }


def test_sealed_params_are_opened_for_the_processor_and_masked_in_its_report(
    registry: Registry, worker_redis: redis.Redis, inbox: ResultInbox, make_dispatch: MakeDispatch,
) -> None:
    dispatch = make_dispatch("tell", **sealed_fields(KEY))
    executor(registry, worker_redis, KEY).handle(dispatch.model_dump(mode="json"), worker="w1")
    inbox.drain()
    (result,) = inbox.for_attempt(dispatch)
    assert result.outcome == "COMPLETED"
    assert [line.line for line in result.logs] == ["task *** job ***"]
    assert result.output == {"echo": "***", "n": 90210}  # a number in the output is data


def test_a_failure_message_is_masked(
    registry: Registry, worker_redis: redis.Redis, inbox: ResultInbox, make_dispatch: MakeDispatch,
) -> None:
    dispatch = make_dispatch("fail", **sealed_fields(KEY))
    executor(registry, worker_redis, KEY).handle(dispatch.model_dump(mode="json"), worker="w1")
    inbox.drain()
    (result,) = inbox.for_attempt(dispatch)
    assert (result.outcome, result.message) == ("FAILED", "login as *** refused")


@pytest.mark.parametrize("case", [
    (None, "STELLWERK_SECRET_KEY, which is not set"),
    ("another-key", "sealed with another STELLWERK_SECRET_KEY"),
])
def test_a_worker_that_cannot_open_them_fails_the_attempt_without_running_it(
    registry: Registry, worker_redis: redis.Redis, inbox: ResultInbox, make_dispatch: MakeDispatch,
    case: tuple[str | None, str],
) -> None:
    key, reason = case
    dispatch = make_dispatch("tell", **sealed_fields(KEY))
    executor(registry, worker_redis, key).handle(dispatch.model_dump(mode="json"), worker="w1")
    inbox.drain()
    (result,) = inbox.for_attempt(dispatch)
    assert result.outcome == "FAILED"
    assert reason in result.message
    assert "(worker w1)" in result.message
    assert result.logs == []
