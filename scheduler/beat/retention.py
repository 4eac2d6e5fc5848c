"""The beat's retention duty: finished runs older than ``STELLWERK_RETENTION_DAYS`` go.

Looked at once a minute (more often when the retention is shorter than ten minutes,
so that the history kept never outgrows the retention by more than a tenth). A look
deletes a few small batches (``common.persistence.retention``) and, while more are
left, comes back the next tick instead of a minute later: a backlog (retention just
turned on over years of history) is worked off at about ``BATCHES_PER_TICK`` x
``BATCH_RUNS`` runs a second without ever holding the beat's firing for long.

Every beat of an HA pair runs it: the batches skip rows another beat holds, so two
beats share a backlog rather than repeat each other's work.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from common.persistence.retention import BATCH_RUNS, Pruned, PruneScope, prune

log = logging.getLogger(__name__)
LOOK_EVERY = timedelta(minutes=1)
BATCHES_PER_TICK = 4


class Retention:
    """Deletes finished runs past ``max_age`` (keeping each job's last ``keep_runs``)."""

    def __init__(
        self, sessions: sessionmaker[Session], max_age: timedelta, keep_runs: int,
        batches_per_tick: int = BATCHES_PER_TICK, batch_runs: int = BATCH_RUNS,
    ) -> None:
        self._sessions = sessions
        self._max_age = max_age
        self._keep_runs = keep_runs
        self._batches = batches_per_tick
        self._batch_runs = batch_runs
        self._every = min(LOOK_EVERY, max_age / 10)
        self._next_look: datetime | None = None

    def __call__(self, now: datetime) -> Pruned:
        """Delete a few batches if a look is due; plan the next look. Return what went."""
        if self._next_look is not None and now < self._next_look:
            return Pruned()
        pruned = prune(self._sessions, PruneScope(now - self._max_age, self._keep_runs),
                       self._batches, self._batch_runs)
        if pruned.runs or pruned.fires:
            log.info("retention deleted %d runs and %d cron fires finished before %s%s",
                     pruned.runs, pruned.fires, (now - self._max_age).isoformat(),
                     "; more are left" if pruned.more else "")
        self._next_look = now if pruned.more else now + self._every
        return pruned
