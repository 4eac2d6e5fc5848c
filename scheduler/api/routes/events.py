"""``GET /events``: state changes as Server-Sent Events, live.

The rules: docs/decisions.md, "Notify: subscriptions, webhooks, Celery-task targets"
("The live stream").

The notify runner appends every event to a capped Redis stream
(``scheduler.services.live_events``); each client reads it with its own ``XREAD`` loop on
``redis.asyncio``, so a stream costs the API no thread and no database connection (the
session that authenticated the request is closed before the first event). The SSE
``id`` of an event is its stream entry id: a client that reconnects with
``Last-Event-ID`` gets every event after it that the stream still holds. The events
of one read of the stream go to the client in one write (a keep-alive comment when
nothing was sent for 15-20 s): sent one by one, through FastAPI's generator of events,
each cost ~0.12 ms of the API's event loop, and three clients of a busy run took half
a core (``bench/live_stream.py``). The route is exempt from the API's admission limit
(``scheduler.api.admission``).

A stream of one run (``run_id``, issue 17) first replays the run's events so far, from
its journal (``scheduler.services.run_history``): the live stream's position is fixed
before the journal is read, and a live event the replay already showed is not sent
twice. It ends after the run's final event, ``run.done``, at once for a run that
has ended already. Replayed events have no SSE ``id`` (``Last-Event-ID`` resumes the
live stream only). ``history=false`` skips the replay: the web UI's run page reads the
run, then only needs to know when to read it again, and a 10,000-task run's replay is
some 40,000 events.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any
from uuid import UUID

import redis.asyncio as aioredis
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse
from fastapi.sse import KEEPALIVE_COMMENT, format_sse_event

from common.domain.event_names import FINAL_EVENT
from scheduler.api.deps import PrincipalDep, SessionDep, scope
from scheduler.api.openapi import EVENT_STREAM
from scheduler.services.live_events import STREAM_FIELD, STREAM_KEY
from scheduler.services.run_history import RunHistory, run_ended, run_history
from scheduler.services.tenancy import visible_job, visible_run

EVENTS_PATH = "/events"
READ_BLOCK = timedelta(seconds=5)
READ_SOCKET_TIMEOUT_S = READ_BLOCK.total_seconds() + 10
READ_COUNT = 500
KEEPALIVE = timedelta(seconds=15)
# Replayed history goes out this many events a write (a wide run's is 40,000).
REPLAY_CHUNK = 500

router = APIRouter(tags=["events"])
# What XREAD answers (the client does not decode): [(stream, [(entry id, fields)])].
_Reply = list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]] | None


@dataclass(frozen=True)
class LiveEvents:
    """Where the live stream is: set on the app by ``create_app``."""

    redis_url: str | None


@dataclass(frozen=True)
class EventFilter:
    """Which events a client gets: its tenant's (None: all), optionally one job's or run's.

    For one run: its events so far (``history``) and whether it has ended.
    """

    tenant: str | None = None
    job_id: str | None = None
    run_id: str | None = None
    history: tuple[dict[str, Any], ...] = ()
    finished: bool = False

    def admits(self, event: dict[str, Any]) -> bool:
        """Whether the event passes every filter that is set."""
        return all(want is None or event.get(field) == want for field, want in (
            ("tenant", self.tenant), ("job_id", self.job_id), ("run_id", self.run_id)))


def event_filter(
    session: SessionDep, principal: PrincipalDep,
    after: Annotated[str, Depends(start_after)],  # fixed first: see the docstring
    *,
    job_id: Annotated[UUID | None, Query(description="Only this job's events.")] = None,
    run_id: Annotated[UUID | None, Query(
        description="Only this run's events: those so far first (unless resuming after "
        "`Last-Event-ID`), and the stream ends after the run's final event (`run.done`).",
    )] = None,
    history: Annotated[bool, Query(
        description="With `run_id`: `false` replays nothing, only what happens from now "
        "on (a page that has just read the run needs no more).",
    )] = True,
    last_event_id: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> EventFilter:
    """Check the filters (another tenant's job or run is 404), then free the connection.

    ``after`` is fixed before a run's history is read, so that no event falls between;
    a client resuming after an event it got has seen the history already.
    """
    replayed: RunHistory | None = None
    try:
        if job_id is not None:
            visible_job(session, job_id, principal.tenant)
        if run_id is not None:
            visible_run(session, run_id, principal.tenant)
            if last_event_id is None:
                replayed = (run_history(session, run_id) if history
                            else RunHistory([], run_ended(session, run_id)))
    finally:
        session.close()  # hands the connection back: the stream may last for hours
    return EventFilter(principal.tenant, _text(job_id), _text(run_id),
                       tuple(replayed.events) if replayed else (),
                       replayed.finished if replayed else False)


async def live_client(request: Request) -> AsyncIterator[aioredis.Redis]:
    """A Redis client for one stream, closed when the stream ends."""
    live: LiveEvents = request.app.state.live_events
    if not live.redis_url:  # the lifespan has refused to start without one already
        raise RuntimeError("STELLWERK_REDIS_URL is not resolved")
    # The read blocks for READ_BLOCK when nothing happens: the socket must wait longer
    # (redis-py 8 gives up reading after 5 s by default, which broke quiet streams).
    client = aioredis.Redis.from_url(live.redis_url, socket_timeout=READ_SOCKET_TIMEOUT_S)
    try:
        yield client
    finally:
        await client.aclose()


LiveClient = Annotated[aioredis.Redis, Depends(live_client)]


async def start_after(
    client: LiveClient,
    last_event_id: Annotated[str | None, Header(
        pattern=r"^\d{1,20}-\d{1,20}$",
        description="Resume after this event (the `id` of the last one received).",
    )] = None,
) -> str:
    """Where the stream starts, fixed before the answer begins.

    A client that has the response headers therefore gets every event published after
    that moment, even before the first one reaches it.
    """
    return last_event_id or await _newest(client)


class EventStream(StreamingResponse):
    """Server-Sent Events, written by :func:`events` itself.

    Not FastAPI's ``EventSourceResponse``: as a route's class it turns on FastAPI's own
    generator of events, one write each.
    """

    media_type = EVENT_STREAM


@router.get(
    EVENTS_PATH, response_class=EventStream, dependencies=[Depends(scope("job.read"))],
    responses={200: {"content": {EVENT_STREAM: {}}, "description": "Successful Response"}},
)
async def events(
    filters: Annotated[EventFilter, Depends(event_filter)], client: LiveClient,
    after: Annotated[str, Depends(start_after)],
) -> EventStream:
    """Every state change from now on (or after ``Last-Event-ID``), as it happens.

    Each message has ``event:`` (e.g. ``run.started``), ``id:`` and ``data:`` (the event
    as JSON, as webhooks get it). With ``run_id``: the run's events so far first, and
    the stream ends after its final event.
    """
    return EventStream(_stream(filters, client, after),
                       headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _stream(
    filters: EventFilter, client: aioredis.Redis, after: str,
) -> AsyncIterator[bytes]:
    """The replayed history, then each read's admitted events in one chunk."""
    for chunk in _replay(filters.history):
        yield chunk
    if filters.finished:
        return
    seen = {_key(event) for event in filters.history}
    sent_at = time.monotonic()
    async for entries in _reads(client, after):
        chunk, final = _admitted(filters, seen, entries)
        if chunk:
            yield chunk
            sent_at = time.monotonic()
        elif time.monotonic() - sent_at >= KEEPALIVE.total_seconds():
            yield KEEPALIVE_COMMENT
            sent_at = time.monotonic()
        if final:
            return


def _replay(history: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    """A run's events so far, without ids, ``REPLAY_CHUNK`` to a chunk."""
    events = [format_sse_event(data_str=json.dumps(e), event=e.get("event")) for e in history]
    for start in range(0, len(events), REPLAY_CHUNK):
        yield b"".join(events[start:start + REPLAY_CHUNK])


def _admitted(
    filters: EventFilter, seen: set[tuple[Any, ...]], entries: list[tuple[str, str]],
) -> tuple[bytes, bool]:
    """The entries the filters admit (and the replay did not show) as one chunk.

    And whether the run's final event was among them: nothing after it is sent.
    """
    out = []
    for entry_id, data in entries:
        if filters.run_id is not None and filters.run_id not in data:
            continue  # not the run's: its id is in every event of it (no JSON to parse)
        event = json.loads(data)
        if not filters.admits(event) or _key(event) in seen:
            continue
        out.append(format_sse_event(data_str=data, event=event.get("event"), id=entry_id))
        if filters.run_id is not None and event.get("event") == FINAL_EVENT:
            return b"".join(out), True
    return b"".join(out), False


def _key(event: dict[str, Any]) -> tuple[Any, ...]:
    """What makes an event the same change, replayed or live (its id differs)."""
    at = event.get("at")
    return (event.get("event"), event.get("task"), event.get("attempt"),
            datetime.fromisoformat(at) if isinstance(at, str) else at)


async def _reads(
    client: aioredis.Redis, after: str,
) -> AsyncIterator[list[tuple[str, str]]]:
    """Each read's stream entries after the entry id ``after``, forever.

    An empty list after a quiet ``READ_BLOCK``.
    """
    last = after
    while True:
        reply: _Reply = await client.xread(  # type: ignore[assignment]
            {STREAM_KEY: last}, count=READ_COUNT, block=int(READ_BLOCK.total_seconds() * 1000),
        )
        entries = []
        for _stream, read in reply or []:
            for entry_id, fields in read:
                last = entry_id.decode()
                data = fields.get(STREAM_FIELD.encode())
                if data is not None:
                    entries.append((last, data.decode()))
        yield entries


async def _newest(client: aioredis.Redis) -> str:
    """The id of the newest entry, so that only later ones are read (``0-0``: empty)."""
    newest = await client.xrevrange(STREAM_KEY, count=1)
    return _text(newest[0][0]) or "0-0" if newest else "0-0"


def _text(value: object) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)
