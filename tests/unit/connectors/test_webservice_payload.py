"""What a web-service worker receives, and a connector without the key to sign for it."""

from __future__ import annotations

import asyncio
from uuid import uuid4

import aiohttp

from common.callbacks import callback_urls, verify_callback_token
from common.messaging.messages import TaskDispatch
from common.secure_params import SecretBox
from connectors.endings import Finished
from connectors.webservice import NO_SECRET_KEY, WebserviceTask, worker_payload


def dispatch() -> TaskDispatch:
    return TaskDispatch(
        task_run_id=uuid4(), run_id=uuid4(), job_id=uuid4(), job_name="render-job",
        tenant="vfx", task="render", type="webservice", attempt=2,
        params={"url": "http://127.0.0.1:9/", "frames": 3}, job_params={"scene": "a"},
        storage={"done": 1},
    )


def test_the_payload_is_the_documented_one() -> None:
    d = dispatch()
    callbacks = callback_urls("https://api.example/api/v1", "key", d.run_id, d.task_run_id, 2)
    payload = worker_payload(d, {"frames": 3}, callbacks)
    assert payload == {
        "run_id": str(d.run_id), "task_id": str(d.task_run_id), "task_name": "render",
        "attempt": 2, "idempotency_key": f"{d.task_run_id}:2",
        "job": {"id": str(d.job_id), "name": "render-job", "tenant": "vfx",
                "params": {"scene": "a"}},
        "params": {"frames": 3}, "storage": {"done": 1}, "callbacks": dict(callbacks),
    }
    token = payload["callbacks"]["status"].rsplit("token=", 1)[1]
    assert verify_callback_token("key", d.task_run_id, 2, token)
    assert not verify_callback_token("key", d.task_run_id, 3, token)


def test_without_a_secret_key_the_task_fails_before_any_call() -> None:
    async def run() -> object:
        async with aiohttp.ClientSession() as client:  # a call would fail otherwise: port 9
            task = WebserviceTask(client, SecretBox(None), None, "https://api.example/api/v1")
            return await task(dispatch())

    assert asyncio.run(run()) == Finished("FAILED", NO_SECRET_KEY)
