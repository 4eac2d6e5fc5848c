"""The beat's flow control duty: admit what waits, once a tick (issue 16).

The engine admits waiters when slots are released in its own transactions; what no
release announces is the beat's: a rate's window moving on, a limit raised or removed,
a run deleted with the slots it held, an engine that died between a release and the
admission it would have made. The duty also forgets starts older than any window.

For a few seconds after a limit on a type or tenant is set, it also has that limit's
attempts in flight take their slots again (``flow_limits.adopt_in_flight``): an engine
whose cache of the limits was up to a second old dispatched some without one. For a few
seconds more it frees the key's slots whose attempts have ended: such an engine ended
some without a release, and an attempt that ended while an adoption that had read it in
flight was committing keeps the slot it took (row locks would prevent that, at the risk
of deadlocks with the engines: the tick holds the rows its other duties claimed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from common.domain.flow_spec import LONGEST_WINDOW
from common.messaging.signals import activation
from common.persistence.db import driver
from common.persistence.outbox import enqueue
from common.persistence.queries import (
    PRUNE_FLOW_STARTS,
    RECENTLY_LIMITED,
    RELEASE_LEFT_SLOTS,
    WAITING_FLOW_KEYS,
)
from scheduler.services.flow_admission import (
    LIMITS_TTL,
    OperatorLimits,
    admit_waiting,
    in_key_order,
)
from scheduler.services.flow_limits import adopt_in_flight

PRUNE_EVERY = timedelta(minutes=1)
# How long after a type's or tenant's limit changed its attempts are adopted again (a
# few times the age of an engine's cache of the limits), and its ended attempts' slots
# freed (longer: the last adoption's leftovers too).
ADOPT_FOR = 5 * LIMITS_TTL
REPAIR_FOR = 2 * ADOPT_FOR
# A concurrency key an engine took a slot of this recently is left to the engines (they
# admit as its slots are released); one whose newest slot is older (an engine died
# between a release and its admission, a limit was raised) is the beat's again.
ENGINES_ADMIT_FOR = LIMITS_TTL


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
        (waiting,) = in_key_order(conn, (WAITING_FLOW_KEYS, (now - ENGINES_ADMIT_FOR,)))
        keys = [row[0] for row in waiting.fetchall()]
        if not keys:
            return []
        admission = admit_waiting(conn, OperatorLimits.read(conn), now, self._turns, keys=keys)
        admission.take.write(conn)
        return enqueue(session, [activation(a.run_id, "redeliver", a.task, a.attempt)
                                 for a in admission.admitted])


def adopt_for_new_limits(session: Session, now: datetime) -> list[int]:
    """A watch duty: slots for what limits set in the last seconds count, none for ends.

    It runs when ``WATCH_DUE`` says a type's or tenant's limit changed lately, before
    :class:`AdmitWaiting` (which then sees the slots). It sends nothing.
    """
    conn = driver(session)
    changed = conn.execute(RECENTLY_LIMITED, (now - REPAIR_FOR,)).fetchall()
    if changed:
        conn.execute(RELEASE_LEFT_SLOTS, ([key for key, _ in changed],))
    for key, updated_at in changed:
        if updated_at > now - ADOPT_FOR:
            adopt_in_flight(conn, key, now)
    return []
