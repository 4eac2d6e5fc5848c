"""The engine's batched reader on real Redis: nothing taken is lost, by crash or error."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
import redis

from common.messaging.publisher import Outgoing, Publisher, timed_set
from common.messaging.reliable import ALIVE, BatchReader
from common.messaging.wire import open_envelope

QUEUES = ("test.first", "test.second")
KEYS = (*QUEUES, *(timed_set(q) for q in QUEUES))


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    client.delete(*KEYS)
    yield client
    client.delete(*KEYS)


def publish(client: redis.Redis, queue: str, *numbers: int) -> None:
    Publisher(client).publish(Outgoing(queue, "test.task", {"n": n}) for n in numbers)


def publish_at(client: redis.Redis, queue: str, due: datetime, *numbers: int) -> None:
    Publisher(client).publish([], [(due, Outgoing(queue, "test.task", {"n": n}))
                                   for n in numbers])


class Clock:
    """A reader's clock, set by the test (seconds since the epoch), and its sleep."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now.timestamp()

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += timedelta(seconds=seconds)


def numbers(raws: Sequence[bytes | str]) -> list[int]:
    return [open_envelope(raw).payload["n"] for raw in raws]


def test_takes_in_queue_order_first_queue_first_and_acks(client: redis.Redis) -> None:
    publish(client, "test.second", 10, 11)
    publish(client, "test.first", 1, 2)
    reader = BatchReader(client, QUEUES, owner="t1")
    assert numbers(reader.take(3, 0.01)) == [1, 2, 10]
    reader.ack()
    assert numbers(reader.take(10, 0.01)) == [11]
    reader.ack()
    assert reader.take(10, 0.01) == []


def test_a_failed_batch_goes_back_to_the_head_of_its_queues(client: redis.Redis) -> None:
    publish(client, "test.first", 1, 2, 3)
    reader = BatchReader(client, QUEUES, owner="t2")
    assert numbers(reader.take(2, 0.01)) == [1, 2]
    reader.requeue()
    assert numbers(reader.take(10, 0.01)) == [1, 2, 3]
    reader.ack()


def test_the_batch_of_a_dead_reader_is_recovered_by_another(client: redis.Redis) -> None:
    publish(client, "test.first", 1, 2)
    dead = BatchReader(client, QUEUES, owner="dead")
    assert numbers(dead.take(2, 0.01)) == [1, 2]
    survivor = BatchReader(client, QUEUES, owner="survivor")
    assert survivor.recover_orphans() == 0  # the owner is still alive
    client.delete(ALIVE.format(owner="dead"))  # its liveness key expired
    assert survivor.recover_orphans() == 2
    assert numbers(survivor.take(10, 0.01)) == [1, 2]
    survivor.ack()


def test_a_take_says_whether_it_had_to_wait_for_its_messages(client: redis.Redis) -> None:
    """The engine waits for a batch to grow only when it did not (``waited`` False)."""
    reader = BatchReader(client, QUEUES, owner="t-waited")
    publish(client, "test.first", 1)
    assert numbers(reader.take(10, 0.01)) == [1]
    assert reader.waited is False
    reader.ack()
    assert reader.take(10, 0.01) == []
    assert reader.waited is True


def test_a_wait_that_ends_takes_all_that_came_together(client: redis.Redis) -> None:
    """A worker reports a bundle's results in one push: the waiting reader takes them all.

    Taken alone, the first cost the engine a batch of its own (issue 16's fan-outs).
    """
    reader = BatchReader(client, QUEUES, owner="t-burst")
    with ThreadPoolExecutor(1) as pool:
        taking = pool.submit(reader.take, 10, 10.0)
        wait_until_blocked(client)
        publish(client, "test.second", 1, 2, 3)
        assert numbers(taking.result(timeout=10)) == [1, 2, 3]
    assert reader.waited is True
    reader.ack()
    assert client.llen("test.second") == 0


def wait_until_blocked(client: redis.Redis, timeout_s: float = 10.0) -> None:
    """Until a client of this Redis waits in a blocking command (the reader's take)."""
    deadline = time.monotonic() + timeout_s
    while client.info("clients")["blocked_clients"] < 1:
        assert time.monotonic() < deadline, "the reader never waited"
        threading.Event().wait(0.005)


def test_an_ack_can_take_the_next_batch_in_the_same_round_trip(client: redis.Redis) -> None:
    """What the ack takes is in the processing list: a failure or a stop requeues it."""
    publish(client, "test.second", 10)
    publish(client, "test.first", 1, 2, 3)
    reader = BatchReader(client, QUEUES, owner="t-ack-take")
    assert numbers(reader.take(2, 0.01)) == [1, 2]
    sent: list[str] = []
    taken = reader.ack(first=lambda pipe: sent.append("before"), take_next=5)
    assert numbers(taken) == [3, 10] and sent == ["before"]
    assert reader.waited is False
    reader.requeue()  # the batch taken by the ack, not the one acknowledged
    assert numbers(reader.take(10, 0.01)) == [3, 10]
    assert reader.ack(take_next=5) == []
    assert reader.take(10, 0.01) == []


def test_a_timed_message_is_taken_once_due_by_the_readers_clock(client: redis.Redis) -> None:
    """Never early; once due, ahead of what its queue holds (it was due before)."""
    due = datetime(2030, 1, 1, 12, 0, 0, 500_000, tzinfo=UTC)
    clock = Clock(due - timedelta(microseconds=500))
    publish_at(client, "test.first", due, 2)
    publish_at(client, "test.first", due + timedelta(seconds=1), 3)
    publish(client, "test.first", 1)
    publish(client, "test.second", 10)
    reader = BatchReader(client, QUEUES, owner="t-timed", clock=clock)
    assert numbers(reader.take(10, 0.01)) == [1, 10]
    clock.now = due
    publish(client, "test.first", 4)
    assert numbers(reader.ack(take_next=10)) == [2, 4]
    clock.now = due + timedelta(seconds=1)
    assert numbers(reader.ack(take_next=10)) == [3]
    reader.ack()
    assert client.zcard(timed_set("test.first")) == 0


def test_a_timed_message_taken_and_requeued_goes_to_its_queue(client: redis.Redis) -> None:
    due = datetime(2030, 1, 1, tzinfo=UTC)
    publish_at(client, "test.second", due, 10)
    reader = BatchReader(client, QUEUES, owner="t-timed-requeue", clock=Clock(due))
    assert numbers(reader.take(10, 0.01)) == [10]
    reader.requeue()
    assert numbers(client.lrange("test.second", 0, -1)) == [10]
    assert numbers(BatchReader(client, QUEUES, owner="t-other").take(10, 0.01)) == [10]


def test_an_ack_takes_the_next_batch_after_redis_lost_its_scripts(client: redis.Redis) -> None:
    """A restarted Redis knows no script: the acknowledgement still goes, then a take."""
    publish(client, "test.first", 1, 2)
    reader = BatchReader(client, QUEUES, owner="t-noscript")
    assert numbers(reader.take(1, 0.01)) == [1]
    client.script_flush()
    assert numbers(reader.ack(take_next=5)) == [2]
    reader.ack()
    assert reader.take(10, 0.01) == []


def test_an_idle_reader_waits_for_a_timed_message_on_its_own_clock(
    client: redis.Redis,
) -> None:
    """Not in a blocking Redis call: Redis may end that up to 100 ms after its timeout."""
    due = datetime(2030, 1, 1, tzinfo=UTC)
    clock = Clock(due - timedelta(milliseconds=50))
    publish_at(client, "test.first", due, 7)
    reader = BatchReader(client, QUEUES, owner="t-timed-idle", clock=clock, sleep=clock.sleep)
    assert reader.take(10, 0.02) == []  # waited 20 ms (its block at most) on the clock
    assert reader.take(10, 0.02) == []
    assert numbers(reader.take(10, 0.02)) == [7]  # 10 ms: due
    assert [round(s, 3) for s in clock.slept] == [0.02, 0.02, 0.01]
    reader.ack()
