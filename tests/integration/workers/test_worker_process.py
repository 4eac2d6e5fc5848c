"""A real Celery worker (``run_worker`` in a subprocess) against the session's Redis."""

import sys
import time
from pathlib import Path

import redis

from common.messaging.keys import cancel_key
from common.messaging.liveness import live_workers, worker_key
from tests.integration.workers.conftest import (
    Dispatcher,
    MakeDispatch,
    ResultInbox,
    SpawnWorker,
    WorkerProcess,
)

PY = sys.executable


def test_noop_reports_one_finished_message(
    worker: WorkerProcess, dispatcher: Dispatcher, inbox: ResultInbox, make_dispatch: MakeDispatch,
) -> None:
    dispatch = make_dispatch("noop")
    dispatcher.send(dispatch)
    result = inbox.wait_finished(dispatch)
    assert result.outcome == "COMPLETED"
    assert result.output == {}
    assert result.worker == worker.hostname
    assert result.started_at is not None
    assert result.storage is None
    assert [r.kind for r in inbox.for_attempt(dispatch)] == ["finished"]


def test_a_bundle_of_dispatches_runs_every_attempt(
    worker: WorkerProcess, dispatcher: Dispatcher, inbox: ResultInbox, make_dispatch: MakeDispatch,
) -> None:
    attempts = [make_dispatch("noop") for _ in range(10)]
    dispatcher.send_bundled(*attempts)
    for attempt in attempts:
        assert inbox.wait_finished(attempt).outcome == "COMPLETED"
        assert [r.kind for r in inbox.for_attempt(attempt)] == ["finished"]


def test_shell_reports_its_log_storage_and_exit_code(
    worker: WorkerProcess, dispatcher: Dispatcher, inbox: ResultInbox, make_dispatch: MakeDispatch,
) -> None:
    script = (
        "import json, os, sys\n"
        "storage = json.loads(os.environ['JOB_STORAGE'])\n"
        "print('cursor was', storage['cursor'], flush=True)\n"
        "print('to stderr', file=sys.stderr, flush=True)\n"
        "print('[saveJobStorage] ' + json.dumps({'cursor': storage['cursor'] + 1}))\n"
    )
    dispatch = make_dispatch(
        "shell",
        params={"argv": [PY, "-c", script]},
        storage={"cursor": 41},
        secure_params={"token": "cursor was"},
    )
    dispatcher.send(dispatch)
    result = inbox.wait_finished(dispatch)
    assert result.outcome == "COMPLETED"
    assert result.output == {"exit_code": 0}
    assert result.storage == {"cursor": 42}
    logged = {(line.stream, line.line) for line in result.logs}
    assert ("stdout", "*** 41") in logged
    assert ("stderr", "to stderr") in logged
    assert ("stdout", '[saveJobStorage] {"cursor": 42}') in logged


def test_a_failing_shell_reports_its_exit_code(
    worker: WorkerProcess, dispatcher: Dispatcher, inbox: ResultInbox, make_dispatch: MakeDispatch,
) -> None:
    dispatch = make_dispatch("shell", params={"argv": [PY, "-c", "raise SystemExit(3)"]})
    dispatcher.send(dispatch)
    result = inbox.wait_finished(dispatch)
    assert (result.outcome, result.message, result.output) == (
        "FAILED",
        "exit code 3",
        {"exit_code": 3},
    )


def test_a_dispatch_delivered_twice_runs_once(
    worker: WorkerProcess, dispatcher: Dispatcher, inbox: ResultInbox, make_dispatch: MakeDispatch,
    tmp_path: Path,
) -> None:
    runs = tmp_path / "runs"
    script = f"open({str(runs)!r}, 'a').write('ran\\n')"
    dispatch = make_dispatch("shell", params={"argv": [PY, "-c", script]})
    dispatcher.send(dispatch, dispatch)
    result = inbox.wait_finished(dispatch)
    worker.wait_for_line(f"already claimed ({dispatch.idempotency_key})")
    inbox.drain()
    assert result.outcome == "COMPLETED"
    assert runs.read_text() == "ran\n"
    assert [r.kind for r in inbox.for_attempt(dispatch)] == ["finished"]


def test_a_long_task_reports_started_and_heartbeats_with_its_log(
    worker: WorkerProcess, dispatcher: Dispatcher, inbox: ResultInbox, make_dispatch: MakeDispatch,
) -> None:
    script = (
        "import time\nfor i in range(4):\n    print('tick', i, flush=True)\n    time.sleep(0.3)\n"
    )
    dispatch = make_dispatch("shell", params={"argv": [PY, "-c", script]})
    dispatcher.send(dispatch)
    result = inbox.wait_finished(dispatch)
    results = inbox.for_attempt(dispatch)
    kinds = [r.kind for r in results]
    assert kinds[0] == "started"
    assert "heartbeat" in kinds
    assert kinds[-1] == "finished"
    assert {r.started_at for r in results} == {result.started_at}
    logged = [line.line for r in results for line in r.logs]
    assert logged == ["tick 0", "tick 1", "tick 2", "tick 3"]


def test_the_engine_cancels_a_running_task(
    worker: WorkerProcess, worker_redis: redis.Redis, dispatcher: Dispatcher, inbox: ResultInbox,
    make_dispatch: MakeDispatch,
) -> None:
    dispatch = make_dispatch("sleep", params={"seconds": 60})
    dispatcher.send(dispatch)
    inbox.wait_for(lambda r: r.kind == "started" and r in inbox.for_attempt(dispatch), 30)
    worker_redis.set(cancel_key(dispatch.idempotency_key), "1", ex=60)
    began = time.monotonic()
    result = inbox.wait_finished(dispatch)
    assert time.monotonic() - began < 10
    assert result.outcome == "FAILED"
    assert "canceled" in result.message
    logged = [line.line for r in inbox.for_attempt(dispatch) for line in r.logs]
    assert any("cancel requested" in line for line in logged)


def test_a_task_past_its_timeout_is_stopped_and_reported(
    worker: WorkerProcess, dispatcher: Dispatcher, inbox: ResultInbox, make_dispatch: MakeDispatch,
) -> None:
    dispatch = make_dispatch(
        "shell", params={"argv": [PY, "-c", "import time; time.sleep(60)"]}, timeout_s=0.5
    )
    dispatcher.send(dispatch)
    result = inbox.wait_finished(dispatch)
    assert result.outcome == "TIMEOUT"
    assert result.message == "timed out after 0.5 s"
    assert result.output == {"exit_code": -15}


def test_the_worker_keeps_a_liveness_record(
    worker: WorkerProcess, worker_redis: redis.Redis,
) -> None:
    records = {record["hostname"]: record for record in live_workers(worker_redis)}
    record = records[worker.hostname]
    assert record["types"] == ["noop", "shell", "sleep"]
    assert record["concurrency"] == 4
    assert record["pid"] == worker.process.pid
    assert record["seen_at"] >= record["started_at"]
    assert 0 < worker_redis.ttl(worker_key(worker.hostname)) <= 10


def test_a_stopped_worker_removes_its_record(
    spawn_worker: SpawnWorker, worker_redis: redis.Redis,
) -> None:
    process = spawn_worker("itest-stopping@localhost", ["noop"])
    process.wait_for_line("ready")
    assert worker_redis.get(worker_key(process.hostname)) is not None
    assert process.stop() == 0
    assert worker_redis.get(worker_key(process.hostname)) is None


def test_the_engine_stop_with_revoke_leaves_the_worker_serving(
    worker: WorkerProcess, worker_redis: redis.Redis, dispatcher: Dispatcher, inbox: ResultInbox,
    make_dispatch: MakeDispatch,
) -> None:
    """The engine also revokes with terminate, which a thread pool cannot do: harmless."""
    dispatch = make_dispatch("sleep", params={"seconds": 60})
    dispatcher.send(dispatch)
    inbox.wait_for(lambda r: r.kind == "started" and r in inbox.for_attempt(dispatch), 30)
    worker_redis.set(cancel_key(dispatch.idempotency_key), "1", ex=60)
    dispatcher.app.control.revoke([dispatch.idempotency_key], terminate=True, signal="SIGTERM")
    assert inbox.wait_finished(dispatch).outcome == "FAILED"
    worker.wait_for_line("terminate requested")
    after = make_dispatch("noop")
    dispatcher.send(after)
    assert inbox.wait_finished(after).outcome == "COMPLETED"
    assert not [line for line in worker.lines if "ERROR" in line or "Traceback" in line]
