"""A producer with only Celery and kombu works with Stellwerk through Redis (issue 5).

It sends a ``create_job`` request with ``celery.Celery.send_task`` and reads the
``job.created`` answer from its own ``reply_to`` queue with kombu; the job then exists
over REST and its run completes, executed by the real processes.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from celery import Celery
from kombu import Connection

from tests.e2e.conftest import System, tasks_by_name, wait_run

pytestmark = pytest.mark.e2e
ANSWER_TIMEOUT_S = 30


def receive(redis_url: str, queue: str) -> tuple[str, dict[str, Any]]:
    """The next message on ``queue``, read as any kombu consumer would: task name, argument."""
    with Connection(redis_url) as conn:
        replies = conn.SimpleQueue(queue)
        try:
            message = replies.get(block=True, timeout=ANSWER_TIMEOUT_S)
            message.ack()
        finally:
            replies.close()
    args, _kwargs, _embed = message.payload
    return str(message.headers["task"]), dict(args[0])


def test_a_producer_creates_a_job_and_hears_back_on_its_queue(
    system: System, api: httpx.Client
) -> None:
    redis_url = system.env["STELLWERK_REDIS_URL"]
    producer = Celery("producer", broker=redis_url, set_as_current=False)
    reply_to = f"producer-replies-{uuid.uuid4().hex[:8]}"
    request = {
        "kind": "create_job", "request_id": "order-4711", "message_id": str(uuid.uuid4()),
        "reply_to": reply_to,
        "body": {"name": "from-a-producer", "application": "shop", "tasks": [
            {"name": "prepare", "type": "noop", "next": ["say"]},
            {"name": "say", "type": "shell",
             "params": {"argv": ["python3", "-c", "print('hello from the queue')"]}},
        ]},
    }

    producer.send_task("stellwerk.jobs", args=[request], queue="stellwerk.jobs")
    task_name, event = receive(redis_url, reply_to)

    assert task_name == "stellwerk.event"
    assert (event["event"], event["request_id"]) == ("job.created", "order-4711")
    job = api.get(f"/jobs/{event['job_id']}")
    assert job.status_code == 200, job.text
    assert (job.json()["name"], job.json()["application"]) == ("from-a-producer", "shop")
    assert job.json()["run_id"] == event["run_id"]
    run = wait_run(api, event["run_id"])
    assert run["state"] == "COMPLETED"
    assert tasks_by_name(run)["say"]["state"] == "COMPLETED"


def test_a_refused_request_is_answered_with_the_reason(system: System) -> None:
    redis_url = system.env["STELLWERK_REDIS_URL"]
    producer = Celery("producer", broker=redis_url, set_as_current=False)
    reply_to = f"producer-replies-{uuid.uuid4().hex[:8]}"
    request = {
        "kind": "delete_job", "request_id": "cleanup-1", "message_id": str(uuid.uuid4()),
        "reply_to": reply_to, "job_id": str(uuid.uuid4()),
    }

    producer.send_task("stellwerk.jobs", args=[request], queue="stellwerk.jobs")
    _, event = receive(redis_url, reply_to)

    assert (event["event"], event["request_id"]) == ("request.failed", "cleanup-1")
    assert event["reason"] == f"job {request['job_id']} not found"
