"""An attempt's ending as reported: the processor's, the deadline's, or the cancel's.

Runs the real runner, monitor and sender on an event loop, with processors written
here, a publisher that keeps what it is given, and cancel flags held in a set.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any
from uuid import uuid4

from common.messaging.messages import TaskDispatch, TaskResult
from common.messaging.publisher import Outgoing
from connectors.attempts import AttemptRunner, Processor
from connectors.endings import Ending, Finished, HandedOver
from connectors.monitor import Monitor
from connectors.results import ResultSender


class KeptPublisher:
    def __init__(self) -> None:
        self.sent: list[Outgoing] = []
        self.on_publish: Callable[[list[TaskResult]], None] | None = None

    def publish(self, messages: Any) -> int:
        self.sent.extend(messages)
        if self.on_publish is not None:
            self.on_publish(self.results())
        return len(self.sent)

    def results(self) -> list[TaskResult]:
        return [TaskResult.model_validate(m.payload) for m in self.sent]


def dispatch(task_type: str = "http", timeout_s: float = 60.0) -> TaskDispatch:
    return TaskDispatch(task_run_id=uuid4(), run_id=uuid4(), job_id=uuid4(), job_name="j",
                        task="t", type=task_type, attempt=1, timeout_s=timeout_s)


def run_one(
    processor: Callable[[TaskDispatch], Awaitable[Ending]], message: TaskDispatch,
    cancelled: frozenset[str] = frozenset(), publisher: KeptPublisher | None = None,
) -> list[TaskResult]:
    publisher = publisher or KeptPublisher()

    def flags(keys: Sequence[str]) -> list[bool]:
        return [key in cancelled for key in keys]

    async def main() -> None:
        sender = ResultSender(publisher)
        monitor = Monitor(flags, sender, timedelta(milliseconds=100),
                          tick=timedelta(milliseconds=10))
        processors: dict[str, Processor] = {"http": processor}
        runner = AttemptRunner(processors, monitor, sender, asyncio.Semaphore(2), "c@h")
        background = [asyncio.create_task(sender.run()), asyncio.create_task(monitor.run())]
        await runner.run(message)
        await sender.flush()
        for task in background:
            task.cancel()

    asyncio.run(main())
    return publisher.results()


def test_a_quick_ending_is_the_only_message() -> None:
    async def ok(_: TaskDispatch) -> Ending:
        return Finished("COMPLETED", output={"status": 200}, log=("GET x -> HTTP 200",))

    [result] = run_one(ok, dispatch())
    assert (result.kind, result.outcome) == ("finished", "COMPLETED")
    assert result.output == {"status": 200}
    assert [line.line for line in result.logs] == ["GET x -> HTTP 200"]
    assert result.worker == "c@h"


def test_a_slow_call_is_started_and_beats_until_it_ends() -> None:
    publisher = KeptPublisher()

    async def slow(_: TaskDispatch) -> Ending:
        """Ends once two heartbeats are out, however slowly the machine lets them come."""
        loop, two_beats = asyncio.get_running_loop(), asyncio.Event()

        def seen(results: list[TaskResult]) -> None:  # on the sender's thread
            if [r.kind for r in results].count("heartbeat") >= 2:
                loop.call_soon_threadsafe(two_beats.set)

        publisher.on_publish = seen
        seen(publisher.results())
        await two_beats.wait()
        return Finished("COMPLETED")

    kinds = [r.kind for r in run_one(slow, dispatch(timeout_s=30), publisher=publisher)]
    assert kinds[0] == "started" and kinds[-1] == "finished"
    assert set(kinds[1:-1]) == {"heartbeat"} and len(kinds) >= 4


def test_the_deadline_ends_the_call_as_timeout() -> None:
    ended = asyncio.Event()

    async def hangs(_: TaskDispatch) -> Ending:
        try:
            await asyncio.sleep(60)
        finally:
            ended.set()
        return Finished("COMPLETED")

    result = run_one(hangs, dispatch(timeout_s=0.05))[-1]
    assert (result.outcome, result.message) == ("TIMEOUT", "timed out after 0.05 s")
    assert ended.is_set()  # the call was aborted, not left running


def test_a_cancel_flag_aborts_the_call() -> None:
    message = dispatch()

    async def hangs(_: TaskDispatch) -> Ending:
        await asyncio.sleep(60)
        return Finished("COMPLETED")

    results = run_one(hangs, message, frozenset({message.idempotency_key}))
    assert [r.kind for r in results] == ["started", "finished"]
    assert (results[-1].outcome, results[-1].message) == ("FAILED", "canceled while the call ran")


def test_a_handed_over_attempt_is_started_detached_and_nothing_more() -> None:
    async def accepted(_: TaskDispatch) -> Ending:
        return HandedOver(log=("POST w -> HTTP 201",))

    [result] = run_one(accepted, dispatch())
    assert (result.kind, result.detached, result.outcome) == ("started", True, None)


def test_a_processor_that_raises_fails_its_task() -> None:
    async def broken(_: TaskDispatch) -> Ending:
        raise KeyError("oops")

    [result] = run_one(broken, dispatch())
    assert result.outcome == "FAILED"
    assert result.message == "connector error: KeyError: 'oops'"


def test_a_type_the_connector_does_not_serve_is_rejected() -> None:
    async def never(_: TaskDispatch) -> Ending:
        raise AssertionError("not called")

    [result] = run_one(never, dispatch("kubernetes"))
    assert result.outcome == "REJECTED"
    assert "'kubernetes' is not served by connector c@h" in result.message
