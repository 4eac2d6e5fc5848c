"""The beat's flow control duty: admit what waits, once a tick (issue 16).

The engine admits waiters when slots are released in its own transactions; what no
release announces is the beat's: a rate's window moving on, a limit raised or removed,
a run deleted with the slots it held, an engine that died between a release and the
admission it would have made. The duty also forgets starts older than any window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from common.domain.flow_spec import LONGEST_WINDOW
from common.messaging.signals import activation
from common.persistence.db import driver
from common.persistence.outbox import enqueue
from common.persistence.queries import PRUNE_FLOW_STARTS, WAITING_FLOW_KEYS
from scheduler.services.flow_admission import OperatorLimits, admit_waiting

PRUNE_EVERY = timedelta(minutes=1)


@dataclass
class AdmitWaiting:
    """A watch duty: admit the waiters of every key, tell their runs' engines."""

    _turns: dict[str, str] = field(default_factory=dict)
    _pruned_at: datetime | None = None

    def __call__(self, session: Session, now: datetime) -> list[int]:
        """Admit in the tick's transaction; the outbox ids of the ``redeliver`` signals."""
        conn = driver(session)
        if self._pruned_at is None or now - self._pruned_at >= PRUNE_EVERY:
            conn.execute(PRUNE_FLOW_STARTS, (now - LONGEST_WINDOW,))
            self._pruned_at = now
        keys = [row[0] for row in conn.execute(WAITING_FLOW_KEYS)]
        if not keys:
            return []
        admission = admit_waiting(conn, OperatorLimits.read(conn), now, self._turns, keys=keys)
        admission.take.write(conn)
        return enqueue(session, [activation(a.run_id, "redeliver", a.task, a.attempt)
                                 for a in admission.admitted])
