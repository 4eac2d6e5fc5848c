"""A message is answered once when a revoke and a task's end acknowledge it together."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

from celery import Celery
from celery.worker.request import Request
from kombu import Message

from workers.request import AckOnceRequest

# How long the first answer waits for a second one to arrive alongside it: a plain
# Celery request lets the second through within microseconds.
OVERLAP_S = 0.2


def _request(
    cls: type[Request], on_ack: Callable[..., None],
    on_reject: Callable[..., None] = lambda *_: None,
) -> Request:
    app = Celery("ack-once", set_as_current=False)

    @app.task(name="probe")
    def probe() -> None:
        """The task the message names."""

    message = Message(
        body="[[], {}, {}]", content_type="application/json", content_encoding="utf-8",
        headers={"id": str(uuid.uuid4()), "task": "probe"},
    )
    return cls(message, on_ack=on_ack, on_reject=on_reject, app=app, task=probe)


def _acknowledged_from_two_threads(cls: type[Request]) -> int:
    """How many times the message was acknowledged when two threads answered it."""
    calls: list[int] = []
    second = threading.Event()

    def on_ack(*_: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            second.wait(OVERLAP_S)
        else:
            second.set()

    request = _request(cls, on_ack)
    threads = [threading.Thread(target=request.acknowledge) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(calls)


def test_two_threads_acknowledging_together_ack_the_message_once() -> None:
    assert _acknowledged_from_two_threads(AckOnceRequest) == 1


def test_a_rejected_message_is_not_acknowledged_after() -> None:
    acks: list[int] = []
    rejects: list[bool] = []
    request = _request(AckOnceRequest, lambda *_: acks.append(1),
                       lambda _log, _errors, requeue: rejects.append(requeue))
    request.reject(requeue=True)
    request.acknowledge()
    assert (rejects, acks) == ([True], [])
