"""Operators' flow limits: ``GET/PUT/DELETE /limits`` and ``stellwerk limit`` (issue 16).

A limit is a row of ``flow_limits``; engines read them at most a second old, so a
change takes effect within a second. Usage is read from the slots and waits, the record
the engines keep. A limit on a type or tenant counts what already runs: its attempts in
flight take a slot of the key when it is set (:func:`adopt_in_flight`), and again from
the beat while the engines' caches catch up.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import Connection
from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import InstrumentedAttribute, Session

from common.domain.flow_spec import KEY, RATE, TENANT, TYPE
from common.persistence.db import driver
from common.persistence.models import FlowLimit, FlowWaiter
from common.persistence.queries import ADOPT_TENANT_SLOTS, ADOPT_TYPE_SLOTS, FLOW_SLOTS_BY_KEY
from scheduler.services.errors import InvalidInput, NotFound

PREFIXES = (TYPE, TENANT, KEY, RATE)
MAX_NAME = 200


@dataclass(frozen=True)
class LimitView:
    """A limit with what uses it now: its slots in use (a lane is one), attempts waiting."""

    key: str
    limit: int | None
    per_s: float | None
    weight: int | None
    active: int
    waiting: int


def check_key(key: str) -> str:
    """A key an operator may limit: a known prefix and a name of at most 200 characters."""
    prefix = next((p for p in PREFIXES if key.startswith(p)), None)
    if prefix is None:
        raise InvalidInput(("path", "key"), f"{key!r} must start with one of {', '.join(PREFIXES)}")
    name = key.removeprefix(prefix)
    if not name and prefix != TENANT:
        raise InvalidInput(("path", "key"), f"{key!r} names no {prefix.rstrip(':')}")
    if len(name) > MAX_NAME:
        raise InvalidInput(("path", "key"), f"is {len(name)} characters after {prefix!r}; "
                           f"the limit is {MAX_NAME}")
    return key


def set_limit(
    session: Session, key: str, *, limit: int | None, per_s: float | None, weight: int | None,
    now: datetime,
) -> None:
    """Create or replace the key's limit, rate window and weight."""
    check_key(key)
    if weight is not None and not key.startswith(TENANT):
        raise InvalidInput(("body", "weight"), "only a tenant's key (tenant:NAME) has a weight")
    if per_s is not None and not key.startswith(RATE):
        raise InvalidInput(("body", "per"), "only a rate's key (rate:NAME) has a window")
    if key.startswith(RATE) and limit is not None and per_s is None:
        raise InvalidInput(("body", "per"), "a rate's limit needs its window (per, seconds)")
    values = {"limit": limit, "per_s": per_s, "weight": weight, "updated_at": now}
    session.execute(insert(FlowLimit).values(key=key, **values)
                    .on_conflict_do_update(index_elements=[FlowLimit.key], set_=values))
    if limit is not None:
        adopt_in_flight(driver(session), key, now)


def adopt_in_flight(conn: Connection[Any], key: str, now: datetime) -> None:
    """The attempts in flight of a limited type or tenant take a slot of its key.

    They were dispatched before the limit, so they hold none; without one the limit
    would count only what starts after it (``limit set type:render 10`` with 50 running
    would let 10 more start). Their ends release it as any slot. Other keys: nothing
    (a task's own keys are taken when it is admitted; a rate counts starts).
    """
    for prefix, statement in ((TYPE, ADOPT_TYPE_SLOTS), (TENANT, ADOPT_TENANT_SLOTS)):
        if key.startswith(prefix):
            conn.execute(statement, {"key": key, "name": key.removeprefix(prefix), "now": now})


def delete_limit(session: Session, key: str) -> None:
    """Remove the key's limit (404 when it has none): its waiters go as room allows."""
    deleted = session.scalars(delete(FlowLimit).where(FlowLimit.key == key)
                              .returning(FlowLimit.key)).all()
    if not deleted:
        raise NotFound("limit", key)


def list_limits(session: Session, tenant: str | None = None) -> list[LimitView]:
    """Every operator's limit, and every key attempts hold or wait for, by key.

    For a ``tenant`` (a tenant-bound token's): the shared keys and that tenant's own
    ``tenant:`` key, not other tenants'.
    """
    limits = {row.key: row for row in session.scalars(select(FlowLimit))}
    active: dict[str, int] = dict(driver(session).execute(FLOW_SLOTS_BY_KEY).fetchall())
    waiting = _counts(session, FlowWaiter.key)
    views = []
    keys = set(limits) | set(active) | set(waiting)
    if tenant is not None:
        keys = {k for k in keys if not k.startswith(TENANT) or k == TENANT + tenant}
    for key in sorted(keys):
        row = limits.get(key)
        views.append(LimitView(
            key, row.limit if row else None, row.per_s if row else None,
            row.weight if row else None, int(active.get(key, 0)), int(waiting.get(key, 0)),
        ))
    return views


def _counts(session: Session, key: InstrumentedAttribute[str]) -> dict[str, int]:
    """Rows per key of ``key``'s table."""
    return {name: int(n) for name, n in session.execute(select(key, func.count()).group_by(key))}
