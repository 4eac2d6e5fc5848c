from datetime import UTC, datetime
from uuid import uuid4

import pytest

from common.messaging.messages import TaskDispatch
from workers.context import TaskContext
from workers.tasklog import MAX_LINE_CHARS, TaskLog


def test_from_dispatch_carries_every_input() -> None:
    start = datetime(2024, 3, 1, 10, 0, tzinfo=UTC)
    dispatch = TaskDispatch(
        task_run_id=uuid4(),
        run_id=uuid4(),
        job_id=uuid4(),
        job_name="nightly",
        tenant="acme",
        task="dump",
        type="shell",
        attempt=3,
        params={"argv": ["true"]},
        secure_params={"pw": "hunter22"},
        job_params={"db": "main"},
        job_secure_params={"token": "abcd"},
        storage={"last": 1},
        timeout_s=60.0,
        last_success_start=start,
        last_success_finish=start,
    )
    ctx = TaskContext.from_dispatch(dispatch)
    assert (ctx.run_id, ctx.job_id, ctx.task_run_id) == (
        dispatch.run_id,
        dispatch.job_id,
        dispatch.task_run_id,
    )
    assert (ctx.job_name, ctx.tenant, ctx.task, ctx.type, ctx.attempt) == (
        "nightly",
        "acme",
        "dump",
        "shell",
        3,
    )
    assert ctx.idempotency_key == dispatch.idempotency_key == f"{dispatch.task_run_id}:3"
    assert ctx.params == {"argv": ["true"]}
    assert ctx.secure_params == {"pw": "hunter22"}
    assert ctx.job_params == {"db": "main"}
    assert ctx.job_secure_params == {"token": "abcd"}
    assert ctx.storage == {"last": 1}
    assert ctx.timeout_s == 60.0
    assert ctx.last_success_start == ctx.last_success_finish == start
    assert "hunter22" not in repr(ctx)


def test_log_lines_are_timestamped_and_secure_values_masked() -> None:
    moment = datetime(2024, 1, 1, tzinfo=UTC)
    ctx = TaskContext(
        secure_params={"password": "s3cret-pw", "pin": "123", "nested": {"keys": ["tok-abcdef"]}},
        job_secure_params={"api": "s3cret"},
        clock=lambda: moment,
    )
    ctx.log("login with s3cret-pw and tok-abcdef, pin 123")
    ctx.log("s3cret alone", stream="stderr")
    first, second = ctx.logs.drain()
    assert first.line == "login with *** and ***, pin 123"
    assert (first.at, first.stream) == (moment, "log")
    assert (second.line, second.stream) == ("*** alone", "stderr")


def test_drain_is_bounded_by_lines_and_bytes() -> None:
    log = TaskLog()
    for i in range(10):
        log.append(f"line {i}")
    assert [entry.line for entry in log.drain(max_lines=3)] == ["line 0", "line 1", "line 2"]
    assert len(log.drain(max_bytes=150)) == 2
    assert len(log.drain()) == 5
    assert not log.has_pending()


def test_a_drain_always_takes_at_least_one_line() -> None:
    log = TaskLog()
    log.append("x" * 5000)
    assert len(log.drain(max_bytes=10)) == 1


def test_overlong_lines_are_truncated_and_overflow_is_counted() -> None:
    log = TaskLog(max_pending_bytes=MAX_LINE_CHARS + 150)
    log.append("y" * (MAX_LINE_CHARS + 10))
    log.append("dropped")
    log.append("dropped too")
    notice, long_line = log.drain()
    assert notice.line.startswith("[stellwerk] 2 log lines dropped")
    assert long_line.line.endswith("[stellwerk: 10 more characters truncated]")
    assert not log.has_pending()


def test_cancel_flag_and_wait() -> None:
    ctx = TaskContext()
    assert not ctx.cancelled
    assert ctx.wait_cancelled(0.01) is False
    ctx.cancel()
    assert ctx.cancelled
    assert ctx.wait_cancelled(10) is True


def test_save_storage_keeps_the_last_object() -> None:
    ctx = TaskContext()
    assert ctx.saved_storage is None
    ctx.save_storage({"a": 1})
    ctx.save_storage({"b": 2})
    assert ctx.saved_storage == {"b": 2}
    with pytest.raises(TypeError, match="JSON object"):
        ctx.save_storage([1, 2])  # type: ignore[arg-type]


def test_heartbeat_calls_the_runtime_when_bound() -> None:
    calls: list[int] = []
    ctx = TaskContext()
    ctx.heartbeat()
    ctx.on_heartbeat(lambda: calls.append(1))
    ctx.heartbeat()
    assert calls == [1]
