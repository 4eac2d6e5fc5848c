import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from common.messaging.messages import TaskDispatch
from workers.context import TaskContext
from workers.heartbeat import Heartbeat
from workers.reporting import ResultReporter
from workers.tasklog import MAX_CHUNK_LINES

STARTED_AT = datetime(2024, 1, 1, tzinfo=UTC)


def dispatch(**fields: object) -> TaskDispatch:
    return TaskDispatch.model_validate(
        {
            "task_run_id": uuid4(),
            "run_id": uuid4(),
            "job_id": uuid4(),
            "job_name": "j",
            "task": "t",
            "type": "sleep",
            "attempt": 1,
            **fields,
        }
    )


def setup(publisher: Any, timeout_s: float = 60.0) -> tuple[TaskContext, ResultReporter]:
    message = dispatch(timeout_s=timeout_s)
    ctx = TaskContext.from_dispatch(message)
    return ctx, ResultReporter(publisher, message, "w1", STARTED_AT)


def test_a_short_attempt_sends_nothing(publisher: Any) -> None:
    ctx, reporter = setup(publisher)
    with Heartbeat(ctx, reporter, lambda: False, interval_s=0.05, started_after_s=5.0):
        ctx.log("quick")
    assert publisher.sent == []
    assert ctx.logs.has_pending()


def test_started_then_heartbeats_carry_the_new_lines(publisher: Any) -> None:
    ctx, reporter = setup(publisher)
    beats = threading.Event()
    original = publisher.publish

    def publish(messages: object) -> int:
        count: int = original(messages)
        if len(publisher.sent) >= 3:
            beats.set()
        return count

    publisher.publish = publish
    with Heartbeat(ctx, reporter, lambda: False, interval_s=0.05, started_after_s=0.01):
        ctx.log("first")
        assert beats.wait(10)
    kinds = [result.kind for result in publisher.results]
    assert kinds[0] == "started"
    assert set(kinds[1:]) == {"heartbeat"}
    assert publisher.results[0].worker == "w1"
    assert publisher.results[0].started_at == STARTED_AT
    logged = [line.line for result in publisher.results for line in result.logs]
    assert logged == ["first"]


def test_heartbeat_request_reports_at_once(publisher: Any) -> None:
    ctx, reporter = setup(publisher)
    with Heartbeat(ctx, reporter, lambda: False, interval_s=60, started_after_s=60):
        ctx.log("progress 50%")
        ctx.heartbeat()
        _wait_for(lambda: len(publisher.sent) == 1)
    assert publisher.results[0].kind == "started"
    assert [line.line for line in publisher.results[0].logs] == ["progress 50%"]


def test_a_cancel_request_raises_the_flag(publisher: Any) -> None:
    ctx, reporter = setup(publisher)
    with Heartbeat(ctx, reporter, lambda: True, interval_s=0.05, started_after_s=0.01) as beat:
        assert ctx.wait_cancelled(10)
    assert not beat.timed_out


def test_the_deadline_raises_the_flag_and_marks_a_timeout(publisher: Any) -> None:
    ctx, reporter = setup(publisher, timeout_s=0.05)
    with Heartbeat(ctx, reporter, lambda: False, interval_s=60, started_after_s=60) as beat:
        assert ctx.wait_cancelled(10)
    assert beat.timed_out
    assert "timeout of 0.05 s reached" in ctx.logs.drain()[0].line


def test_a_failing_report_does_not_stop_the_heartbeat(publisher: Any) -> None:
    ctx, reporter = setup(publisher)
    calls: list[int] = []

    def probe() -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("redis went away")
        return True

    with Heartbeat(ctx, reporter, probe, interval_s=0.02, started_after_s=0.01):
        assert ctx.wait_cancelled(10)
    assert len(calls) >= 2


def test_finished_sends_overflowing_logs_ahead(publisher: Any) -> None:
    ctx, reporter = setup(publisher)
    count = MAX_CHUNK_LINES * 2 + 5
    for i in range(count):
        ctx.log(f"line {i}")
    reporter.finished(ctx.logs, "COMPLETED", output={"n": count})
    kinds = [result.kind for result in publisher.results]
    assert kinds == ["started", "heartbeat", "finished"]
    logged = [line.line for result in publisher.results for line in result.logs]
    assert logged == [f"line {i}" for i in range(count)]
    assert publisher.results[-1].output == {"n": count}


def test_output_that_is_not_json_becomes_a_failure(publisher: Any) -> None:
    ctx, reporter = setup(publisher)
    reporter.finished(ctx.logs, "COMPLETED", output={"when": object()})
    (result,) = publisher.results
    assert result.outcome == "FAILED"
    assert result.output is None
    assert "not JSON-serialisable" in result.message


def _wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.01)
