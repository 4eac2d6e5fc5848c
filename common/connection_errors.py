"""The errors that mean a server is unreachable, as a loop's :class:`Outage` counts them.

A loop catches these around its calls to the server, waits what ``Outage.failed``
says and tries again; anything else is a bug or a bad message and is handled as such.
SQLAlchemy wraps psycopg's errors, hand-written SQL through ``driver()`` raises them
bare, hence both.
"""

from __future__ import annotations

import psycopg
import redis
import sqlalchemy.exc

DATABASE_ERRORS: tuple[type[Exception], ...] = (
    sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError,
    psycopg.OperationalError, psycopg.InterfaceError,
)
REDIS_ERRORS: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError)
