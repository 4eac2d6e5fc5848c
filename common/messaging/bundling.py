"""Bundling dispatches: one broker message for several attempts of one task type.

A worker pays Celery's per-message cost (fetch, reserve, ack: about 2 ms of CPU here)
once per message, not per attempt, so a fan-out's dispatches travel together.
Bundling changes only the transport: each attempt keeps its own outbox row, its own
claim on the worker and its own result, so every exactly-once argument made for a
single dispatch holds for each item of a bundle. A worker that is slow to get
through a bundle hands the rest back as single dispatches (``workers.bundle``).

A lane (attempts flow control admitted to one slot, ``common.domain.flow.lanes``) is a
bundle too, made by the engine (:func:`lane_message`): its attempts must run one after
another, so it is never split, merged or handed back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from math import ceil

from common.messaging.messages import EXECUTE_BUNDLE_TASK, EXECUTE_TASK, bundle_body
from common.messaging.publisher import Outgoing


def bundle_dispatches(messages: Iterable[Outgoing], size: int) -> list[Outgoing]:
    """``messages`` with the dispatches of each queue grouped in bundles of ``size``.

    Other messages keep their order and come first; a queue with one dispatch keeps
    it as a plain ``stellwerk.execute`` message. ``size`` 1 changes nothing.
    """
    others: list[Outgoing] = []
    by_queue: dict[str, list[Outgoing]] = {}
    for message in messages:
        if size > 1 and message.task_name == EXECUTE_TASK:
            by_queue.setdefault(message.queue, []).append(message)
        else:
            others.append(message)
    for queue, dispatches in by_queue.items():
        others.extend(_bundles(queue, dispatches, size))
    return others


def lane_message(dispatches: Sequence[Outgoing]) -> Outgoing:
    """The one message of a lane's dispatches (of one queue), in the order they run."""
    if len(dispatches) == 1:
        return dispatches[0]
    return _bundle(dispatches[0].queue, dispatches, lane=True)


def _bundles(queue: str, dispatches: Sequence[Outgoing], size: int) -> list[Outgoing]:
    """Even bundles (40 at size 32 make 20 + 20, not 32 + 8), so they finish together."""
    if len(dispatches) == 1:
        return list(dispatches)
    count = ceil(len(dispatches) / size)
    bounds = [round(i * len(dispatches) / count) for i in range(count + 1)]
    out = []
    for start, end in zip(bounds, bounds[1:], strict=False):
        part = dispatches[start:end]
        if len(part) == 1:
            out.append(part[0])
            continue
        out.append(_bundle(queue, part))
    return out


def _bundle(queue: str, dispatches: Sequence[Outgoing], *, lane: bool = False) -> Outgoing:
    """One ``stellwerk.execute_bundle`` message of ``dispatches``, its id the bundle's."""
    body = bundle_body(queue, [m.payload for m in dispatches], lane=lane)
    return Outgoing(queue, EXECUTE_BUNDLE_TASK, body, body["message_id"])
