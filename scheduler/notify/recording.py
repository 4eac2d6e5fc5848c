"""Turning notify events into deliveries, in the intake's transaction.

For a batch of events the runner finds the subscriptions that may want any of them in
one indexed query, and inserts one pending delivery per (event, subscription) that
matches; an event recorded twice makes no second delivery (unique per subscription
and event). Nothing is sent here: the delivery loop takes the rows once they are
committed, so an event is never lost between its change and its subscribers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from uuid import UUID, uuid4

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from common.domain.subscriptions import EventFacts, Rule, selects
from common.messaging.messages import Event
from common.persistence.db import driver
from common.persistence.models import Subscription
from common.persistence.queries import INSERT_DELIVERIES


def record_deliveries(session: Session, events: Sequence[Event], now: datetime) -> int:
    """Insert the deliveries the events make, in order; return how many matched."""
    if not events:
        return 0
    rules = matching_rules(session, events)
    pairs = [(event, sid) for event in events for facts in [_facts(event)]
             for sid, rule in rules if selects(rule, facts)]
    if pairs:
        driver(session).execute(INSERT_DELIVERIES, (
            now, now, [uuid4() for _ in pairs], [sid for _, sid in pairs],
            [event.run_id for event, _ in pairs], [event.id for event, _ in pairs],
            [event.event for event, _ in pairs],
            [json.dumps(event.model_dump(mode="json")) for event, _ in pairs],
        ))
    return len(pairs)


def matching_rules(session: Session, events: Sequence[Event]) -> list[tuple[UUID, Rule]]:
    """The subscriptions that may select any of the events: one query, on the indexes.

    Narrowed by job id and tenant in SQL (the indexed, most selective fields); the
    patterns and the other fields are checked per event by :func:`selects`.
    """
    job_ids = {event.job_id for event in events if event.job_id is not None}
    tenants = {event.tenant for event in events}
    rows = session.execute(
        select(Subscription.id, Subscription.events, Subscription.job_id, Subscription.job_type,
               Subscription.application, Subscription.tenant)
        .where(or_(Subscription.job_id.is_(None), Subscription.job_id.in_(job_ids)))
        .where(or_(Subscription.tenant.is_(None), Subscription.tenant.in_(tenants)))
    ).all()
    return [(row.id, Rule(tuple(row.events), row.job_id, row.job_type, row.application,
                          row.tenant)) for row in rows]


def _facts(event: Event) -> EventFacts:
    return EventFacts(event.event, event.job_id, event.job_type, event.application, event.tenant)
