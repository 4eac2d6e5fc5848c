"""``GET /metrics``: Prometheus text format, computed at scrape time.

Runs and tasks by state (PostgreSQL), queue depths (``LLEN`` of Stellwerk's queues and
of the task queues of every type that is served or has READY tasks; for
``stellwerk.notify`` the event rows waiting in PostgreSQL), live workers, the engine's
and beat's loop timings (``common.messaging.loop_timings``), and flow control's usage,
held attempts and limits by key.
A registry is built per scrape, so nothing lives at import time and no process-wide
state is shared between apps.

A tenant-bound token gets its tenant's runs, tasks and deliveries only: queue depths,
workers and loop timings are the whole system's, so they are left out (issue 14). No
label is called ``instance``: Prometheus sets that one to the scraped target and
renames a scraped ``instance`` to ``exported_instance``; the process a loop timing
comes from is ``process``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from sqlalchemy.orm import Session

from common.domain.states import RunState, TaskState
from common.messaging.liveness import live_workers
from common.messaging.loop_timings import TimingSnapshot, read_timings
from common.messaging.messages import (
    ACTIVATION_QUEUE,
    JOBS_QUEUE,
    RESULTS_QUEUE,
    task_queue,
)
from scheduler.api.deps import PrincipalDep, ResourcesDep, SessionDep, scope
from scheduler.api.resources import Resources
from scheduler.services.flow_limits import LimitView, list_limits
from scheduler.services.metrics import (
    DeliveryCount,
    StateCounts,
    delivery_counts,
    pending_notify_events,
    state_counts,
)
from scheduler.services.processors import worker_types

router = APIRouter(tags=["metrics"])
_FIXED_QUEUES = (ACTIVATION_QUEUE, RESULTS_QUEUE, JOBS_QUEUE)
# Notify's events wait in PostgreSQL (issue 13); reported under the queue's old name.
_NOTIFY_QUEUE = "stellwerk.notify"
_TARGETS = ("webhook", "celery_task")
_DELIVERY_STATES = ("pending", "delivered", "dead")


@router.get(
    "/metrics", response_class=Response, dependencies=[Depends(scope("job.read"))],
    responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}},
                     "description": "Prometheus text exposition format."}},
)
def metrics(session: SessionDep, resources: ResourcesDep, principal: PrincipalDep) -> Response:
    """Runs and tasks by state, queue depths and live workers, for Prometheus.

    For a tenant-bound token: its tenant's runs, tasks and deliveries only.
    """
    counts = state_counts(session, principal.tenant)
    families = [*_state_families(counts),
                *_delivery_families(delivery_counts(session, principal.tenant))]
    if principal.tenant is None:
        families += _system_families(session, resources, counts)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(families))
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


def _system_families(
    session: Session, resources: Resources, counts: StateCounts | None,
) -> list[Metric]:
    """Queue depths, live workers and loop timings: the whole system's."""
    workers = live_workers(resources.redis)
    types = {t for w in workers for t in worker_types(w)}
    types |= {type_ for type_, _ in counts.tasks} if counts else set()
    queues = [*_FIXED_QUEUES, *(task_queue(t) for t in sorted(types))]
    with resources.redis.pipeline(transaction=False) as pipe:
        for queue in queues:
            pipe.llen(queue)
        depths: Sequence[Any] = pipe.execute()
    samples = [((q,), int(d)) for q, d in zip(queues, depths, strict=True)]
    if (pending := pending_notify_events(session)) is not None:
        samples.insert(2, ((_NOTIFY_QUEUE,), pending))
    return [
        _gauge("stellwerk_queue_depth", "Messages waiting in a queue (for stellwerk.notify: "
               "event rows in PostgreSQL).", ["queue"], samples),
        _gauge("stellwerk_workers", "Live workers.", [], [((), len(workers))]),
        _loop_family(read_timings(resources.redis)),
        *_flow_families(list_limits(session)),
    ]


def _flow_families(views: list[LimitView]) -> list[Metric]:
    """Flow control by key: its slots in use, attempts held for it, its limit."""
    return [
        _gauge("stellwerk_flow_active", "A flow key's slots in use (issue 16; a lane of "
               "attempts run one after another holds one).",
               ["key"], [((v.key,), v.active) for v in views]),
        _gauge("stellwerk_flow_held", "READY attempts held back waiting for a flow key.",
               ["key"], [((v.key,), v.waiting) for v in views]),
        _gauge("stellwerk_flow_limit", "An operator's limit on a flow key (keys whose "
               "limit only their tasks state are not listed).", ["key"],
               [((v.key,), v.limit) for v in views if v.limit is not None]),
    ]


def _state_families(counts: StateCounts | None) -> list[Metric]:
    up = _gauge("stellwerk_state_counts_up", "1 if the run and task counts below are "
                "current, 0 if the database query timed out.", [], [((), int(counts is not None))])
    if counts is None:
        return [up]
    runs = [((s.value,), counts.runs.get(s.value, 0)) for s in RunState]
    tasks_by_state = {s.value: 0 for s in TaskState}
    for (_type, state), n in counts.tasks.items():
        tasks_by_state[state] = tasks_by_state.get(state, 0) + n
    return [
        up,
        _gauge("stellwerk_runs", "Runs by state.", ["state"], runs),
        _gauge("stellwerk_tasks", "Task runs by state.", ["state"],
               [((s,), n) for s, n in tasks_by_state.items()]),
        _gauge("stellwerk_tasks_by_type", "Task runs by type and state.", ["type", "state"],
               [((t, s), n) for (t, s), n in sorted(counts.tasks.items())]),
    ]


def _delivery_families(counts: dict[tuple[str, str], DeliveryCount] | None) -> list[Metric]:
    """Notify deliveries (webhooks, Celery tasks) by target and state, and their tries."""
    if counts is None:
        return []
    keys = sorted({(t, s) for t in _TARGETS for s in _DELIVERY_STATES} | set(counts))
    empty = DeliveryCount(0, 0)
    return [
        _gauge("stellwerk_deliveries", "Notify deliveries by target (webhook, celery_task) and "
               "state (pending, delivered, dead), finished ones kept a week.",
               ["target", "state"], [(k, counts.get(k, empty).deliveries) for k in keys]),
        _gauge("stellwerk_delivery_attempts", "Tries made for those deliveries.",
               ["target", "state"], [(k, counts.get(k, empty).attempts) for k in keys]),
    ]


def _loop_family(timings: list[TimingSnapshot]) -> HistogramMetricFamily:
    """Engine batches and beat steps: how long each took, per live process."""
    family = HistogramMetricFamily(
        "stellwerk_loop_seconds", "Duration of one loop iteration (engine_batch: applying "
        "one batch of messages; beat_step: one beat step), per process since it started.",
        labels=["loop", "process"],
    )
    for snap in timings:
        buckets = [("+Inf" if bound == float("inf") else repr(bound), n)
                   for bound, n in snap.buckets]
        family.add_metric([snap.loop, snap.instance], buckets, snap.sum_s)
    return family


def _gauge(
    name: str, documentation: str, labels: list[str],
    samples: Iterable[tuple[tuple[str, ...], int]],
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for values, value in samples:
        family.add_metric(list(values), value)
    return family


class _Snapshot:
    """A collector that yields families computed before the scrape's rendering."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families
