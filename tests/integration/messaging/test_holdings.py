"""A worker's holdings on real Redis: claims and outcomes survive Redis losing its data."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pytest
import redis

from common.messaging.claims import claim
from common.messaging.epoch import current_epoch
from common.messaging.holdings import Holdings, acknowledge
from common.messaging.keys import claim_key
from common.messaging.messages import RESULTS_QUEUE, TaskDispatch, TaskResult
from common.messaging.publisher import Publisher
from common.messaging.wire import open_envelope
from tests.conftest import claim_redis_db
from workers.reporting import result_message

WORKER = "w1@holdings"


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    """A Redis database of the test's own: the test flushes it, as a Redis restart would."""
    with contextlib.closing(redis.Redis.from_url(claim_redis_db(redis_url))) as own:
        yield own
        own.flushdb()


def dispatch() -> TaskDispatch:
    return TaskDispatch(task_run_id=uuid.uuid4(), run_id=uuid.uuid4(), job_id=uuid.uuid4(),
                        job_name="j", task="t", type="sleep", attempt=1)


def outcome(of: TaskDispatch) -> TaskResult:
    return TaskResult(task_run_id=of.task_run_id, run_id=of.run_id, attempt=of.attempt,
                      kind="finished", outcome="COMPLETED", worker=WORKER)


def results(client: redis.Redis) -> list[str]:
    """Message ids waiting in the results queue, oldest first."""
    raws = client.lrange(RESULTS_QUEUE, 0, -1)
    return [str(open_envelope(raw).payload["message_id"]) for raw in reversed(raws)]


def lose_redis_data(client: redis.Redis) -> None:
    client.flushdb()
    current_epoch(client)  # whoever comes first makes the new epoch


def test_a_running_attempt_is_claimed_again_after_redis_lost_its_data(
    client: redis.Redis,
) -> None:
    holdings = Holdings(client, Publisher(client))
    running = dispatch()
    assert holdings.claim([running], WORKER) == [True]
    stopped: list[str] = []
    holdings.running(running.idempotency_key, lambda: stopped.append("running"))
    holdings.refresh(WORKER)
    lose_redis_data(client)
    assert client.get(claim_key(running.idempotency_key)) is None
    holdings.refresh(WORKER)
    assert client.get(claim_key(running.idempotency_key)) == WORKER.encode()
    assert claim(client, [running], "w2@holdings") == [False]  # a redelivery is skipped
    assert stopped == []


def test_an_attempt_another_worker_claimed_meanwhile_is_stopped_here(
    client: redis.Redis,
) -> None:
    holdings = Holdings(client, Publisher(client))
    running = dispatch()
    holdings.claim([running], WORKER)
    stopped: list[str] = []
    holdings.running(running.idempotency_key, lambda: stopped.append("stopped"))
    holdings.refresh(WORKER)
    lose_redis_data(client)
    assert claim(client, [running], "w2@holdings") == [True]  # it came back first
    holdings.refresh(WORKER)
    assert stopped == ["stopped"]
    assert client.get(claim_key(running.idempotency_key)) == b"w2@holdings"


def test_an_outcome_lost_with_redis_is_sent_again_until_acknowledged(
    client: redis.Redis,
) -> None:
    holdings = Holdings(client, Publisher(client))
    finished = dispatch()
    holdings.claim([finished], WORKER)
    message = result_message(outcome(finished))
    holdings.publish([message])
    holdings.release(finished.idempotency_key)
    holdings.refresh(WORKER)
    assert results(client) == [message.task_id]
    lose_redis_data(client)
    holdings.refresh(WORKER)
    assert results(client) == [message.task_id]  # sent again, same message id
    assert client.get(claim_key(finished.idempotency_key)) == WORKER.encode()
    client.delete(RESULTS_QUEUE)
    acknowledge(client, {WORKER: [str(message.task_id)]})  # the engine committed it
    holdings.refresh(WORKER)
    lose_redis_data(client)
    holdings.refresh(WORKER)
    assert results(client) == []  # forgotten once acknowledged
    assert client.get(claim_key(finished.idempotency_key)) is None


def test_an_outcome_redis_refused_is_sent_when_it_answers(client: redis.Redis) -> None:
    flaky = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)  # nobody there
    holdings = Holdings(client, Publisher(flaky))
    finished = dispatch()
    message = result_message(outcome(finished))
    assert holdings.publish([message]) == 1  # kept, not raised: the attempt has ended
    with pytest.raises(redis.ConnectionError):
        holdings.publish([result_message(outcome(finished).model_copy(
            update={"kind": "heartbeat", "outcome": None, "message_id": uuid.uuid4()}))])
    flaky.connection_pool = client.connection_pool  # Redis answers again
    holdings.refresh(WORKER)
    assert results(client) == [message.task_id]
