"""Traces (issue 17): one run's spans form one trace across API, engine, worker,
connector and notify, and the trace goes out with an ``http`` task's request and a
webhook delivery. Each part runs in this process, on real PostgreSQL and Redis, with
the SDK's in-memory exporter; off, no span is made and no event says anything of it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import redis
from cryptography.fernet import Fernet
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from common.config import Settings
from common.egress import EgressPolicy
from common.messaging.messages import TaskDispatch
from common.messaging.publisher import Publisher
from common.secure_params import SecretBox
from common.tracing import install, span, tracing_on, wanted
from connectors.calls import new_session
from connectors.http_task import HttpTask
from scheduler.api.app import create_app
from scheduler.engine.batch import BatchApplier
from scheduler.notify.deliveries import Claimed
from scheduler.notify.senders import WebhookSender
from tests.integration.api.conftest import Recorded, auth_headers, start_run
from tests.webhook_receiver import Receiver
from workers.context import TaskContext
from workers.executor import Executor
from workers.outcomes import Completed
from workers.registry import Registry


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on for this test only, every span kept in memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    install(provider)
    try:
        yield exporter
    finally:
        install(None)


def trace_of(traceparent: str) -> str:
    """The trace id of a W3C ``traceparent`` (``00-<trace>-<span>-<flags>``)."""
    return traceparent.split("-")[1]


def test_one_run_s_spans_form_one_trace_and_go_out_with_its_calls(
    spans: InMemorySpanExporter, api_settings: Settings, engine: BatchApplier,
    rds: redis.Redis, recorded: Recorded,
) -> None:
    job, task_type, dispatch = started(api_settings, engine, rds)
    assert dispatch.traceparent is not None
    trace_id = trace_of(dispatch.traceparent)

    run_in_a_worker(dispatch, task_type, rds)
    outbound = call_from_the_connector(dispatch)
    delivered = deliver_an_event(recorded, job["run_id"])

    made = spans.get_finished_spans()
    names = {s.name for s in made if f"{s.context.trace_id:032x}" == trace_id}
    assert {"POST /api/v1/jobs", "stellwerk.run.created", "stellwerk.engine.apply",
            "stellwerk.task", "stellwerk.notify.deliver"} <= names, names
    assert len({f"{s.context.trace_id:032x}" for s in made if _of_run(s, job)}) == 1
    assert trace_of(outbound) == trace_id and trace_of(delivered) == trace_id


def test_off_no_span_is_made_and_no_event_carries_a_trace(
    api_settings: Settings, engine: BatchApplier, rds: redis.Redis, recorded: Recorded,
) -> None:
    assert not tracing_on() and not wanted({}) and not wanted({"OTEL_SDK_DISABLED": "true",
                                                              "OTEL_TRACES_EXPORTER": "otlp"})
    assert wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    job, _, dispatch = started(api_settings, engine, rds)
    assert dispatch.traceparent is None
    with span("nothing") as traced:
        assert traced is None
    events = [e for e in recorded() if e.get("run_id") == job["run_id"]]
    assert events and all("traceparent" not in e for e in events)


def started(
    settings: Settings, engine: BatchApplier, rds: redis.Redis,
) -> tuple[dict[str, Any], str, TaskDispatch]:
    """A job of one task of a type of its own, its run started: job, type, dispatch.

    The API app is created now: after the test turned tracing on, or not.
    """
    task_type = f"traced_{uuid.uuid4().hex[:6]}"
    with TestClient(create_app(settings), headers=auth_headers()) as client:
        job = client.post("/api/v1/jobs", json={
            "name": f"traced-{uuid.uuid4().hex[:6]}",
            "tasks": [{"name": "a", "type": task_type}]}).json()
    start_run(engine, job["run_id"])
    return job, task_type, next_dispatch(rds, f"tasks.{task_type}")


def _of_run(made: ReadableSpan, job: dict[str, Any]) -> bool:
    return bool((made.attributes or {}).get("stellwerk.run_id") == job["run_id"])


def next_dispatch(rds: redis.Redis, queue: str) -> TaskDispatch:
    """The dispatch waiting in ``queue`` (alone or in a bundle), from Celery's format."""
    raw = rds.rpop(queue)
    assert isinstance(raw, bytes), f"nothing in {queue}"
    args, _, _ = json.loads(base64.b64decode(json.loads(raw)["body"]))
    payload = args[0]
    return TaskDispatch.model_validate(payload["dispatches"][0] if "dispatches" in payload
                                       else payload)


def run_in_a_worker(dispatch: TaskDispatch, task_type: str, rds: redis.Redis) -> None:
    registry = Registry()

    @registry.processor(task_type)
    def done(ctx: TaskContext) -> Completed:
        return Completed({})

    executor = Executor(registry, rds, Publisher(rds), heartbeat_interval=timedelta(seconds=1))
    executor.handle(dispatch.model_dump(mode="json"), worker="traced-worker")


def call_from_the_connector(dispatch: TaskDispatch) -> str:
    """An ``http`` task's call, as the connector makes it: the receiver's traceparent."""
    with Receiver() as receiver:
        http = dispatch.model_copy(update={
            "type": "http", "params": {"url": receiver.url, "method": "POST", "json": {}}})

        async def call() -> None:
            async with new_session(EgressPolicy.parse("127.0.0.0/8")) as session:
                with span("stellwerk.task", http.traceparent):
                    await HttpTask(session, SecretBox(None))(http)

        asyncio.run(call())
        (got,) = receiver.wait_for(1)
    return got.headers["traceparent"]


def deliver_an_event(recorded: Recorded, run_id: str) -> str:
    """One of the run's events, posted as the notify runner does: its traceparent."""
    event = next(e for e in recorded() if e.get("run_id") == run_id)
    assert event.get("traceparent")
    secrets = SecretBox(Fernet.generate_key().decode())
    with Receiver() as receiver, httpx.Client(timeout=10) as http:
        claimed = Claimed(
            id=uuid.uuid4(), subscription_id=uuid.uuid4(), event_id=uuid.UUID(event["id"]),
            event=event["event"], payload=event, attempt=1, claim=uuid.uuid4(),
            target="webhook", url=receiver.url, sealed_secret=secrets.seal({"secret": "s"}),
            sealed_headers=None, celery_task=None, queue=None,
        )
        sent = WebhookSender(http, secrets, lambda: datetime.now(UTC)).send(claimed)
        assert sent.ok, sent
        (got,) = receiver.wait_for(1)
    return got.headers["traceparent"]
