"""Which task types are served, by which live workers, and how many tasks wait for them.

Liveness comes from the workers' own Redis records (read by the caller); the READY
counts from the database, so that a type nobody serves shows up as unserved with the
tasks stuck on it (docs/decisions.md, "Every type served, and said when one is not").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from common.domain.states import TaskState
from common.persistence.models import Job, Run, TaskRun


@dataclass(frozen=True)
class ProcessorView:
    """One task type, the live workers serving it and its READY task count."""

    type: str
    workers: list[Mapping[str, Any]]
    ready: int

    @property
    def served(self) -> bool:
        """Whether at least one live worker serves the type."""
        return bool(self.workers)


def processors(
    session: Session, workers: Sequence[Mapping[str, Any]], tenant: str | None = None,
) -> list[ProcessorView]:
    """Every type that a live worker serves or a READY task needs, sorted by name.

    Given a ``tenant`` (a tenant-bound token's), the READY tasks are that tenant's only,
    so another tenant's waiting work is neither counted nor named (issue 14). Workers
    are shared by every tenant: they are listed all the same.
    """
    query = (select(TaskRun.type, func.count())
             .where(TaskRun.state == TaskState.READY).group_by(TaskRun.type))
    if tenant is not None:
        query = (query.join(Run, Run.id == TaskRun.run_id).join(Job, Job.id == Run.job_id)
                 .where(Job.tenant == tenant))
    ready = {type_: int(n) for type_, n in session.execute(query).all()}
    serving: defaultdict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for worker in workers:
        for type_ in worker_types(worker):
            serving[type_].append(worker)
    return [
        ProcessorView(type_, serving.get(type_, []), ready.get(type_, 0))
        for type_ in sorted(set(serving) | set(ready))
    ]


def worker_types(worker: Mapping[str, Any]) -> list[str]:
    """The types a worker record lists (a list, or a comma-separated string)."""
    types = worker.get("types", [])
    if isinstance(types, str):
        types = types.split(",")
    if not isinstance(types, list):
        return []
    return [t.strip() for t in types if isinstance(t, str) and t.strip()]
