"""Issue 4 end to end: secure params reach the process, and nothing else shows them.

A shell task echoes ``$JOB_SECURE_PARAMS`` and ``$TASK_SECURE_PARAMS``; the values must
appear in no API response (job, run, tasks, journal, log), no notify event on the
``stellwerk:events`` channel and no component's output, and be stored sealed.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
import redis

from common.secure_params import SecretBox

from .conftest import SECRET_KEY, System, journal, wait_run

pytestmark = pytest.mark.e2e

JOB_SECRET = "e2e-job-pw-8c1f"
TASK_SECRET = "e2e-task-token-77aa"
# Searched for in every process's log, where thousands of UUIDs are: five digits turned up
# inside one in CI (``c31415c0-...``: about 3e-5 a UUID); nine, about 4e-10 a UUID.
PIN = 271828182
SECRETS = (JOB_SECRET, TASK_SECRET, str(PIN))
ECHO = (
    "import os, sys; print(os.environ['JOB_SECURE_PARAMS']); "
    "print('task says', os.environ['TASK_SECURE_PARAMS'], file=sys.stderr)"
)


class EventTap:
    """Collects every event the notify runner publishes while it is open."""

    def __init__(self, url: str) -> None:
        self._client = redis.Redis.from_url(url)
        # redis-py leaves ``pubsub`` unannotated (its PubSub is typed).
        self._pubsub = self._client.pubsub(  # type: ignore[no-untyped-call]
            ignore_subscribe_messages=True)
        self._pubsub.subscribe("stellwerk:events")
        self.raw: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            message = self._pubsub.get_message(timeout=0.1)
            if message is not None:
                self.raw.append(message["data"].decode())

    def for_run(self, run_id: str) -> list[str]:
        return [raw for raw in self.raw if json.loads(raw).get("run_id") == run_id]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._pubsub.close()
        self._client.close()


@pytest.fixture
def events(system: System) -> Iterator[EventTap]:
    tap = EventTap(system.env["STELLWERK_REDIS_URL"])
    yield tap
    tap.close()


def spec() -> dict[str, Any]:
    return {
        "name": "secrets-e2e",
        "secure_params": {"password": JOB_SECRET, "pin": PIN},
        "tasks": [{
            "name": "echo", "type": "shell", "params": {"argv": [sys.executable, "-c", ECHO]},
            "secure_params": {"token": TASK_SECRET},
        }],
    }


def wait_events(tap: EventTap, run_id: str, timeout_s: float = 20) -> list[str]:
    """The run's events, once ``run.done`` has been published."""
    done = threading.Event()
    deadline = threading.Timer(timeout_s, done.set)
    deadline.start()
    try:
        while not done.wait(0.05):
            if any(json.loads(raw)["event"] == "run.done" for raw in tap.for_run(run_id)):
                break
    finally:
        deadline.cancel()
    return tap.for_run(run_id)


def assert_hidden(where: str, text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} shown in {where}"


def test_secure_params_reach_the_process_and_are_shown_nowhere(
    api: httpx.Client, system: System, events: EventTap
) -> None:
    created = api.post("/jobs", json=spec())
    assert created.status_code == 201, created.text
    job = created.json()
    run = wait_run(api, job["run_id"])
    assert run["state"] == "COMPLETED", run
    logs = api.get(f"/runs/{job['run_id']}/tasks/echo/logs")
    assert logs.status_code == 200, logs.text

    # The process got the values: it printed them, and the worker masked every one.
    lines = {(line["stream"], line["line"]) for line in logs.json()["lines"]}
    assert ("stdout", '{"password": "***", "pin": ***}') in lines
    assert ("stderr", 'task says {"token": "***"}') in lines
    responses = {
        "create": created.text, "job": api.get(f"/jobs/{job['id']}").text,
        "jobs": api.get("/jobs").text, "run": api.get(f"/runs/{job['run_id']}").text,
        "runs": api.get(f"/jobs/{job['id']}/runs").text, "logs": logs.text,
        "journal": json.dumps(journal(api, job["run_id"])),
    }
    for where, text in responses.items():
        assert_hidden(where, text)
    run_events = wait_events(events, job["run_id"])
    assert any(json.loads(raw)["event"] == "task.completed" for raw in run_events)
    assert_hidden("events", "\n".join(run_events))
    for path in system.logs.glob("*.log"):
        assert_hidden(path.name, path.read_text(errors="replace"))
    assert_stored_sealed(system, job["id"])


def assert_stored_sealed(system: System, job_id: str) -> None:
    box = SecretBox(SECRET_KEY)
    with psycopg.connect(system.env["STELLWERK_DATABASE_URL"]) as conn:
        (job_column,) = conn.execute(
            "SELECT secure_params FROM jobs WHERE id = %s", (job_id,)).fetchone() or (None,)
        (task_column,) = conn.execute(
            "SELECT secure_params FROM tasks WHERE job_id = %s", (job_id,)).fetchone() or (None,)
    assert job_column is not None and task_column is not None
    assert_hidden("jobs.secure_params", job_column)
    assert_hidden("tasks.secure_params", task_column)
    assert box.open(job_column) == {"password": JOB_SECRET, "pin": PIN}
    assert box.open(task_column) == {"token": TASK_SECRET}
