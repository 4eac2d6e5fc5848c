"""The live event stream: a capped Redis stream (for ``GET /events``) and pub/sub.

The stream keeps the last ~10,000 events, so a client that reconnects with
``Last-Event-ID`` (a stream entry id) gets what it missed, as long as it is still there.
Each event is also published on the ``stellwerk:events`` channel for listeners that only
want what happens from now on. The notify runner appends (``scheduler.notify.intake``),
the REST API reads (``GET /events``): the keys are theirs to share, so they live here.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis

from common.messaging.messages import Event

STREAM_KEY = "stellwerk:events:stream"
STREAM_FIELD = "event"
EVENTS_CHANNEL = "stellwerk:events"
STREAM_MAXLEN = 10_000


def append_events(client: redis.Redis, events: Sequence[Event]) -> None:
    """Add the events to the stream (trimmed approximately, which is cheap) and publish them."""
    if not events:
        return
    with client.pipeline(transaction=False) as pipe:
        for event in events:
            data = event.model_dump_json()
            pipe.xadd(STREAM_KEY, {STREAM_FIELD: data}, maxlen=STREAM_MAXLEN, approximate=True)
            pipe.publish(EVENTS_CHANNEL, data)
        pipe.execute()
