"""A real worker process, the results queue it posts to, and ways to wait for both.

The worker tests claim a database index of their own on the session's Redis, so that
no other test's consumer of ``stellwerk.results`` can take their messages (or they
another test's), also when several test sessions share one Redis server.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol
from uuid import uuid4

import pytest
import redis
from kombu import Connection

from common.messaging.bundling import bundle_dispatches
from common.messaging.celery_app import make_celery
from common.messaging.messages import (
    EXECUTE_TASK,
    RESULTS_QUEUE,
    TaskDispatch,
    TaskResult,
    task_queue,
)
from common.messaging.publisher import Outgoing, Publisher
from tests.conftest import claim_redis_db

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def worker_redis_url(redis_url: str) -> Iterator[str]:
    """The session's Redis server, on a database of the worker tests' own, flushed after."""
    url = claim_redis_db(redis_url)
    yield url
    with contextlib.closing(redis.Redis.from_url(url)) as client:
        client.flushdb()


@pytest.fixture
def worker_redis(worker_redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(worker_redis_url)
    yield client
    client.close()


def new_dispatch(task_type: str, **fields: Any) -> TaskDispatch:
    """A dispatch of a fresh attempt, as the engine would send it."""
    values: dict[str, Any] = {
        "task_run_id": uuid4(),
        "run_id": uuid4(),
        "job_id": uuid4(),
        "job_name": "itest",
        "tenant": "acme",
        "task": f"{task_type}-task",
        "type": task_type,
        "attempt": 1,
    }
    values.update(fields)
    return TaskDispatch.model_validate(values)


class Dispatcher:
    """Publishes dispatches as the outbox relay does."""

    def __init__(self, url: str) -> None:
        self.app = make_celery(url)
        self._publisher = Publisher(redis.Redis.from_url(url))

    def send(self, *dispatches: TaskDispatch) -> None:
        self._publisher.publish(self._messages(dispatches))

    def send_bundled(self, *dispatches: TaskDispatch) -> None:
        """Send as the engine's relay does, dispatches of one type in bundles."""
        self._publisher.publish(bundle_dispatches(self._messages(dispatches), size=32))

    @staticmethod
    def _messages(dispatches: tuple[TaskDispatch, ...]) -> list[Outgoing]:
        return [
            Outgoing(task_queue(d.type), EXECUTE_TASK, d.model_dump(mode="json"), d.idempotency_key)
            for d in dispatches
        ]


class ResultInbox:
    """Reads ``stellwerk.results`` with a plain kombu consumer, as any service could."""

    def __init__(self, url: str) -> None:
        self._connection = Connection(url)
        self._queue = self._connection.SimpleQueue(RESULTS_QUEUE)
        self.received: list[TaskResult] = []

    def close(self) -> None:
        self._queue.close()
        self._connection.release()

    def for_attempt(self, dispatch: TaskDispatch) -> list[TaskResult]:
        """What has arrived so far about one attempt, in arrival order."""
        return [
            r
            for r in self.received
            if r.task_run_id == dispatch.task_run_id and r.attempt == dispatch.attempt
        ]

    def wait_finished(self, dispatch: TaskDispatch, timeout_s: float = 30.0) -> TaskResult:
        """The ``finished`` result of an attempt, waiting for it up to ``timeout_s``."""
        return self.wait_for(
            lambda r: r.kind == "finished" and r in self.for_attempt(dispatch), timeout_s
        )

    def wait_for(self, predicate: Callable[[TaskResult], bool], timeout_s: float) -> TaskResult:
        for result in self.received:
            if predicate(result):
                return result
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no matching result in {timeout_s} s; got {self.received}"
            arrived = self._next(remaining)
            if arrived is not None and predicate(arrived):
                return arrived

    def drain(self) -> None:
        """Take every result already queued, without waiting for more."""
        while self._next(None) is not None:
            pass

    def _next(self, timeout_s: float | None) -> TaskResult | None:
        try:
            message = self._queue.get(block=timeout_s is not None, timeout=timeout_s)
        except queue.Empty:
            return None
        message.ack()
        args, _kwargs, _embed = message.decode()
        result = TaskResult.model_validate(args[0])
        self.received.append(result)
        return result


class MakeDispatch(Protocol):
    """The ``make_dispatch`` fixture: ``new_dispatch``."""

    def __call__(self, task_type: str, **fields: Any) -> TaskDispatch: ...


@pytest.fixture
def make_dispatch() -> MakeDispatch:
    """``make_dispatch(type, **fields)``: a dispatch of a fresh attempt."""
    return new_dispatch


@pytest.fixture
def dispatcher(worker_redis_url: str) -> Dispatcher:
    return Dispatcher(worker_redis_url)


@pytest.fixture
def inbox(worker_redis_url: str) -> Iterator[ResultInbox]:
    results = ResultInbox(worker_redis_url)
    yield results
    results.close()


class WorkerProcess:
    """``run_worker`` in a subprocess, with its stderr kept line by line."""

    def __init__(self, url: str, hostname: str, types: list[str]) -> None:
        self.hostname = hostname
        self.lines: list[str] = []
        self._seen = threading.Condition()
        env = {
            **os.environ,
            "STELLWERK_REDIS_URL": url,
            "STELLWERK_HEARTBEAT_INTERVAL_S": "0.3",
            "PYTHONUNBUFFERED": "1",
        }
        code = (
            "from common.config import load_settings\n"
            "from workers.main import run_worker\n"
            f"run_worker(load_settings(), {types!r}, concurrency=4, hostname={hostname!r})\n"
        )
        self.process = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self._seen:
                self.lines.append(line.rstrip("\n"))
                self._seen.notify_all()

    def wait_for_line(self, text: str, timeout_s: float = 30.0) -> str:
        """The first stderr line containing ``text``, waiting for it."""
        with self._seen:
            found = self._seen.wait_for(
                lambda: next((line for line in self.lines if text in line), None), timeout_s
            )
        assert found, f"worker never logged {text!r}; stderr:\n" + "\n".join(self.lines)
        return found

    def stop(self, timeout_s: float = 30.0) -> int:
        """Stop the worker as a supervisor would (SIGTERM) and return its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self._reader.join(5)
        return code


SpawnWorker = Callable[[str, list[str]], WorkerProcess]


@pytest.fixture
def spawn_worker(worker_redis_url: str) -> Iterator[SpawnWorker]:
    """``spawn_worker(hostname, types)``: a worker of the test's own, stopped after it."""
    started: list[WorkerProcess] = []

    def spawn(hostname: str, types: list[str]) -> WorkerProcess:
        started.append(WorkerProcess(worker_redis_url, hostname, types))
        return started[-1]

    yield spawn
    for process in started:
        process.stop()


@pytest.fixture(scope="module")
def worker(worker_redis_url: str) -> Iterator[WorkerProcess]:
    process = WorkerProcess(
        worker_redis_url, f"itest-{uuid4().hex[:8]}@localhost", ["noop", "shell", "sleep"]
    )
    process.wait_for_line("ready")
    yield process
    process.stop()
