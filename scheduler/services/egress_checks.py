"""Refusing, when it is written, a target the egress policy would refuse at call time.

A URL whose host is an IP literal, a cloud metadata name or ``localhost``, or whose
scheme is not http(s), can be judged without a lookup: a job, subscription or worker
type naming one is a 422 naming the field and the rule (``common.egress``), rather
than a task that fails on every run. A host *name* is not looked up here: what it
resolves to when the call is made is all that counts (DNS may change, or answer the
API differently from the connector), so names are judged at connect time only.

The calls made for a user are those of ``http`` tasks, ``webservice`` tasks (and tasks
of registered worker types, whose ``params.url`` may replace the type's URL), a job's
``webservice.url``, worker types' URLs and webhooks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from common.domain.patch import JobPatch
from common.domain.spec import JobSpec, TaskSpec
from common.domain.subscriptions import SubscriptionSpec
from common.domain.worker_types import BUILTIN_TYPES, WorkerTypeSpec
from common.egress import EgressPolicy
from common.persistence.models import WorkerType
from scheduler.services.errors import InvalidInput

Location = tuple[str | int, ...]
CALLING_TYPES = frozenset({"http", "webservice"})


def check_url(policy: EgressPolicy, url: object, loc: Location) -> None:
    """:class:`InvalidInput` at ``loc`` when ``url`` is refused without a lookup."""
    if not isinstance(url, str):
        return  # not a URL: the params' own validation names it
    refusal = policy.refusal_of_url(url)
    if refusal is not None:
        raise InvalidInput(loc, str(refusal))


def check_subscription(policy: EgressPolicy, spec: SubscriptionSpec) -> None:
    """A webhook's URL."""
    if spec.target.webhook is not None:
        check_url(policy, str(spec.target.webhook.url), ("body", "target", "webhook", "url"))


def check_worker_type(policy: EgressPolicy, spec: WorkerTypeSpec) -> None:
    """A worker type's URL."""
    check_url(policy, spec.url, ("body", "url"))


def check_job(session: Session, policy: EgressPolicy, spec: JobSpec | JobPatch) -> None:
    """A job's ``webservice.url`` and the ``params.url`` of its tasks that make calls."""
    if spec.webservice is not None:
        check_url(policy, spec.webservice.url, ("body", "webservice", "url"))
    tasks = spec.tasks or []
    calling = CALLING_TYPES | _registered(session, {task.type for task in tasks})
    for position, url in _task_urls(tasks, calling):
        check_url(policy, url, ("body", "tasks", position, "params", "url"))


def _task_urls(tasks: Iterable[TaskSpec], calling: frozenset[str]) -> Iterator[tuple[int, Any]]:
    for position, task in enumerate(tasks):
        if task.type in calling and "url" in task.params:
            yield position, task.params["url"]


def _registered(session: Session, types: set[str]) -> frozenset[str]:
    """Those of ``types`` that are registered worker types (one query; none: no query)."""
    names = types - BUILTIN_TYPES
    if not names:
        return frozenset()
    return frozenset(session.scalars(select(WorkerType.name).where(WorkerType.name.in_(names))))
