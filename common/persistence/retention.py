"""Deleting old history in small batches (issue 14): finished runs and past cron fires.

A run goes with everything that hangs off it: its task runs, their logs and its
journal follow by ``ON DELETE CASCADE`` (indexed on both sides, so a cascade costs
O(rows deleted)). Cron fires have no foreign key to their run: a fire older than the
cutoff goes once its run has gone or if it had none, never while it waits
(``buffered``). Deliveries of webhooks have their own pruning (the notify runner, 7 days
after they finish); consumed message ids theirs (the beat, after a day).

Each batch is one short transaction that locks only the rows it deletes, taken with
``FOR UPDATE SKIP LOCKED``: an engine restarting a finished run holds its row, so
retention passes it by rather than waiting, and two beats (HA) delete disjoint
batches instead of queueing behind each other. A run the engine restarts in the
meantime has lost its ``finished_at`` when the batch looks again, and is kept; a
restart that comes after the delete finds no run (a 404, as for any unknown run).
A crash between batches loses nothing: what is left is found by the next pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, TextClause
from sqlalchemy.orm import Session, sessionmaker

from common.domain.states import RUN_TERMINAL
from common.persistence.queries import PRUNE_FIRES, PRUNE_RUNS

# Runs per transaction: a run of a 10,000-task fan-out drags tens of thousands of rows
# with it, so batches are counted in runs and kept small.
BATCH_RUNS = 200


@dataclass(frozen=True)
class PruneScope:
    """What may go: history finished before ``cutoff``, beyond each job's last runs.

    ``tenant`` None means every tenant's jobs.
    """

    cutoff: datetime
    keep_runs: int
    tenant: str | None = None


@dataclass(frozen=True)
class Pruned:
    """How many runs and fires were deleted, and whether more were left to delete."""

    runs: int = 0
    fires: int = 0
    more: bool = False

    def __add__(self, other: Pruned) -> Pruned:
        """Totals of two passes; ``more`` is the later one's."""
        return Pruned(self.runs + other.runs, self.fires + other.fires, other.more)


def prune_batch(session: Session, scope: PruneScope, limit: int = BATCH_RUNS) -> Pruned:
    """Delete at most ``limit`` runs (with what hangs off them) and ``limit`` fires."""
    params: dict[str, Any] = {
        "cutoff": scope.cutoff, "tenant": scope.tenant, "limit": limit,
        "keep": scope.keep_runs, "terminal": sorted(RUN_TERMINAL),
    }
    runs = _deleted(session, PRUNE_RUNS, params)
    fires = _deleted(session, PRUNE_FIRES, params)
    return Pruned(runs, fires, more=max(runs, fires) >= limit)


def prune(
    sessions: sessionmaker[Session], scope: PruneScope, max_batches: int,
    limit: int = BATCH_RUNS,
) -> Pruned:
    """Up to ``max_batches`` batches, each committed on its own; stop early when done."""
    total = Pruned()
    for _ in range(max_batches):
        with sessions.begin() as session:
            total += prune_batch(session, scope, limit)
        if not total.more:
            break
    return total


def _deleted(session: Session, statement: TextClause, params: dict[str, Any]) -> int:
    """How many rows a DELETE removed."""
    return cast(CursorResult[Any], session.execute(statement, params)).rowcount
