"""Recording notify events in the transaction of the state change they tell of.

Every event a subscriber can receive is a row of ``notify_events`` until the notify
runner has recorded the deliveries it causes (issue 13: Redis, which carried the
events before, may restart empty). One row per call, the events in order; the
``NOTIFY`` sent with it wakes the runners when the transaction commits, and is dropped
with the row if it rolls back. A runner that misses the wake-up finds the row by
polling, so PostgreSQL alone carries an event from its change to its deliveries.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson
from psycopg.types.json import Jsonb
from sqlalchemy.orm import Session

from common.messaging.messages import Event, EventFields
from common.persistence.db import driver
from common.persistence.queries import (
    NOTIFY_EVENTS_RECORDED_HERE,
    RECORD_NOTIFY_EVENTS,
)


def events_json(events: Sequence[Event]) -> Jsonb:
    """The ``events`` column of one row: the events as JSON, in order.

    Each event is serialized to JSON text by pydantic directly: building Python dicts
    first and handing them to ``json.dumps`` cost twice as much (9% of the engine's CPU
    at 250 fires a second).
    """
    return Jsonb("[" + ",".join(event.model_dump_json() for event in events) + "]",
                 dumps=_as_is)


def fields_json(events: Sequence[EventFields]) -> Jsonb:
    """:func:`events_json` for events as fields (``event_fields``): the engine's.

    orjson writes them as pydantic writes the model (``Z`` for UTC), at a third of the
    cost of the model's dump and none of its validation.
    """
    return Jsonb(orjson.dumps(events, option=orjson.OPT_UTC_Z).decode(), dumps=_as_is)


def _as_is(text: str) -> str:
    """``Jsonb``'s ``dumps`` for text that is JSON already."""
    return text


def record_events(session: Session, events: Sequence[Event]) -> None:
    """Record the events for the notify runner in the caller's transaction (one statement)."""
    if events:
        driver(session).execute(RECORD_NOTIFY_EVENTS, (events_json(events),))


def recorded_here(session: Session, fields: dict[str, str]) -> list[Event]:
    """The events this transaction recorded that have all of ``fields``, in order."""
    rows = driver(session).execute(NOTIFY_EVENTS_RECORDED_HERE, (Jsonb([fields]),)).fetchall()
    return [Event.model_validate(event) for (events,) in rows for event in events
            if all(event.get(k) == v for k, v in fields.items())]
