"""The run's events from ``GET /events``, as ``watch`` needs them: a signal per event.

``watch`` re-reads the run (``GET /runs/{id}``) on each, so it shows the run as the API
has it, whatever the event said. ``stellwerk events`` prints the events themselves
(:meth:`stellwerk.client.Client.events`).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from stellwerk.client import Client, ClientError

# The API sends a keep-alive every 15 s: a stream silent for two of them is taken as
# broken, and ``watch`` polls instead.
QUIET_LIMIT = timedelta(seconds=30)


class StreamUnavailable(Exception):
    """The event stream could not be opened or broke off; the caller polls instead."""


def run_events(api: Client, run_id: str) -> Iterator[None]:
    """Yield once when the stream is open, then once per event of the run.

    The first yield lets the caller re-read the run after subscribing, so a change made
    between its first read and the subscription is not missed.
    """
    try:
        with api.events(run_id=run_id, timeout_s=QUIET_LIMIT.total_seconds()) as events:
            yield
            for _ in events:
                yield
    except ClientError as error:
        raise StreamUnavailable(str(error)) from error
