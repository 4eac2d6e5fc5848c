"""Waking the notify intake: PostgreSQL ``LISTEN`` on a connection of its own.

Writers send ``NOTIFY`` in the transaction that records events
(``common.persistence.notify_events``), so the wake-up arrives when the events are
committed, and not at all if they are rolled back. The intake also polls (once a
second): a wake-up sent while its connection was being re-established is not lost
work, only a second's delay. Nothing here touches Redis (issue 13).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

from common.persistence.db import libpq_url
from common.persistence.queries import NOTIFY_CHANNEL

CONNECT_TIMEOUT = timedelta(seconds=2)


class Wakeup:
    """A listening connection, opened on first use and after it broke."""

    def __init__(self, database_url: str, channel: str = NOTIFY_CHANNEL) -> None:
        """``channel`` is the one writers notify."""
        self._url = libpq_url(database_url)
        self._channel = channel
        self._conn: psycopg.Connection[Any] | None = None

    def listen(self) -> None:
        """Connect and ``LISTEN`` unless already listening; raises if PostgreSQL is down.

        Call it before looking for work, so that a row committed after the look
        still wakes the next :meth:`wait`.
        """
        if self._conn is not None and not self._conn.closed:
            return
        self.close()
        conn = psycopg.connect(self._url, autocommit=True,
                               connect_timeout=int(CONNECT_TIMEOUT.total_seconds()))
        conn.execute(f'LISTEN "{self._channel}"')
        self._conn = conn

    def wait(self, timeout: timedelta) -> bool:
        """Wait for a notification, up to ``timeout``; True if one came."""
        if self._conn is None:
            return False
        notified = self._conn.notifies(timeout=timeout.total_seconds(), stop_after=1)
        return any(True for _ in notified)

    def close(self) -> None:
        """Drop the connection (a broken one, or at the end)."""
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()
