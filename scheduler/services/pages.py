"""Keyset pagination: a page of rows and an opaque cursor for the next one.

Keyset rather than offset, so that rows inserted while a client pages never make it
skip or repeat a row, and a deep page costs what the first one does.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar
from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import dict_row

from scheduler.services.errors import InvalidInput

T = TypeVar("T")
# What every cursor looks like (unpadded base64url); the published schema says it.
CURSOR_PATTERN = "^[A-Za-z0-9_-]+$"


@dataclass(frozen=True)
class Page(Generic[T]):
    """Up to ``limit`` items; ``next_cursor`` is None on the last page."""

    items: list[T]
    next_cursor: str | None


def encode_cursor(key: list[Any]) -> str:
    """An opaque token for the sort key of the last row of a page."""
    raw = json.dumps(key, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, size: int) -> list[Any]:
    """The sort key inside ``cursor``; a cursor we did not issue is a 422 on ``cursor``."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = json.loads(raw)
    except (binascii.Error, ValueError) as error:
        raise _bad_cursor() from error
    if not isinstance(key, list) or len(key) != size:
        raise _bad_cursor()
    return key


def encode_time_and_id(created_at: datetime, row_id: UUID) -> str:
    """The cursor after a row of a list ordered by ``(created_at, id)``."""
    return encode_cursor([created_at.isoformat(), str(row_id)])


def decode_time_and_id(cursor: str) -> tuple[datetime, UUID]:
    """The ``(created_at, id)`` key of a list ordered by both; else as :func:`decode_cursor`."""
    key = decode_cursor(cursor, 2)
    try:
        return datetime.fromisoformat(key[0]), UUID(key[1])
    except (TypeError, ValueError) as error:
        raise _bad_cursor() from error


def _bad_cursor() -> InvalidInput:
    return InvalidInput(("query", "cursor"), "not a cursor returned by this API")


async def page_rows(
    conn: AsyncConnection[Any], statement: str, clauses: Mapping[str, str],
    params: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """The rows of ``statement``, its ``{where}`` the ``clauses`` AND-ed that apply.

    A clause applies when ``params`` gives its name a value other than None.
    """
    cursor = await conn.cursor(row_factory=dict_row).execute(
        filtered(statement, clauses, params), params)
    return await cursor.fetchall()


def filtered(statement: str, clauses: Mapping[str, str], params: Mapping[str, Any]) -> str:
    """``statement`` with its ``{where}`` the ``clauses`` AND-ed that apply (as above)."""
    where = " AND ".join(clause for name, clause in clauses.items()
                         if params.get(name) is not None)
    return statement.format(where=where or "true")
