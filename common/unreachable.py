"""Telling "the server is not there" from every other error.

A loop waits out the first kind (:class:`common.outage.Outage`: logged once, retried
with capped backoff) and handles the second as it always did (a failed batch is
requeued, a failed tick logged with its traceback). The line matters: a deadlock or a
serialization failure is an ``OperationalError`` too, yet the server answered, and
waiting for it to "come back" would hide a bug behind a warning.
"""

from __future__ import annotations

import psycopg
import redis
from sqlalchemy import exc as sa_exc

from common.outage import Outage

# SQLSTATE classes and codes that mean the server or the connection went away:
# 08 connection exception; 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot
# connect now (starting up or shutting down).
_GONE_CLASSES = ("08",)
_GONE_CODES = frozenset({"57P01", "57P02", "57P03"})
# For ``except`` clauses: every Redis error that means "not there" (see below).
REDIS_UNREACHABLE: tuple[type[Exception], ...] = (redis.ConnectionError, redis.TimeoutError)


def redis_unreachable(error: BaseException) -> bool:
    """Whether ``error`` says Redis could not be reached (down, restarting, loading).

    ``BusyLoadingError`` (a restarted Redis reading its append-only file) is a
    ``ConnectionError``; a ``ResponseError`` (a bad command) is not, and is a bug.
    """
    return isinstance(error, REDIS_UNREACHABLE)


def outage_wait(error: BaseException, redis_down: Outage, database_down: Outage) -> float | None:
    """Count ``error`` on the tracker of the server it says is unreachable.

    Returns how long to wait before the next try, or None when the error is no outage
    (a bug, a bad message: the caller handles it as such).
    """
    if redis_unreachable(error):
        return redis_down.failed(error)
    if database_unreachable(error):
        return database_down.failed(error)
    return None


def database_unreachable(error: BaseException) -> bool:
    """Whether ``error`` says PostgreSQL could not be reached, or dropped the connection."""
    if isinstance(error, sa_exc.DBAPIError):
        if error.connection_invalidated:
            return True
        return database_unreachable(error.orig) if error.orig is not None else False
    if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
        state = error.sqlstate
        # No SQLSTATE: the client failed (refused, reset, closed) before any answer.
        return state is None or state.startswith(_GONE_CLASSES) or state in _GONE_CODES
    return False
