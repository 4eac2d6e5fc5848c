"""The broker wire format: Celery protocol-2 task messages in kombu's Redis envelope.

Stellwerk writes and reads this format itself for its hot paths (pipelined ``LPUSH`` of
thousands of messages, batched reads by the engine), and any Celery or kombu client
reads and writes the same lists, so other services can still publish to and consume
from Stellwerk's queues with plain Celery.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass
from typing import Any

import orjson

_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


def envelope(queue: str, task_name: str, payload: dict[str, Any], task_id: str | None) -> str:
    """The JSON a Celery producer would ``LPUSH`` to ``queue`` for ``task_name(payload)``.

    Built with orjson (compact, and three times faster than ``json``: the engine and the
    beat build one for every message they send).
    """
    task_id = task_id or str(uuid.uuid4())
    body = orjson.dumps([[payload], {}, _EMBED])
    headers: dict[str, Any] = {
        "lang": "py", "task": task_name, "id": task_id, "shadow": None, "eta": None,
        "expires": None, "group": None, "group_index": None, "retries": 0,
        "timelimit": [None, None], "root_id": task_id, "parent_id": None,
        "argsrepr": "", "kwargsrepr": "{}", "origin": "stellwerk", "ignore_result": True,
        "replaced_task_nesting": 0, "stamped_headers": None, "stamps": {},
    }
    properties = {
        "correlation_id": task_id, "reply_to": "", "delivery_mode": 2,
        "delivery_info": {"exchange": "", "routing_key": queue}, "priority": 0,
        "body_encoding": "base64", "delivery_tag": str(uuid.uuid4()),
    }
    return orjson.dumps({
        "body": base64.b64encode(body).decode(), "content-encoding": "utf-8",
        "content-type": "application/json", "headers": headers, "properties": properties,
    }).decode()


@dataclass(frozen=True)
class Received:
    """A decoded envelope: which task, its single argument, and where it came from."""

    task_name: str | None
    payload: Any
    queue: str


def open_envelope(raw: bytes | str) -> Received:
    """Decode an envelope written by :func:`envelope` or by any Celery producer.

    Raises ``ValueError`` for anything that is not a JSON Celery task message.
    """
    try:
        message = orjson.loads(raw)
        if message.get("content-type") != "application/json":
            raise ValueError(f"content type {message.get('content-type')!r} is not JSON")
        body = message["body"]
        if message["properties"].get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = orjson.loads(body)[0]
        queue = message["properties"]["delivery_info"]["routing_key"]
        return Received(message["headers"].get("task"), args[0] if args else None, queue)
    except (KeyError, IndexError, TypeError, AttributeError, json.JSONDecodeError) as error:
        raise ValueError(f"not a Celery task message: {error}") from error
