"""The engine's events as fields: the same JSON as the model's, byte for byte.

Subscribers, the live stream and the notify runner read ``notify_events`` rows with
``Event``; the engine writes them from ``event_fields`` without the model.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from common.messaging.messages import Event, event_fields
from common.persistence.notify_events import events_json, fields_json

TEXT = st.text(max_size=30)
INSTANTS = st.datetimes(  # hypothesis bounds are naive; the zones come from ``timezones``
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1),  # noqa: DTZ001
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=2))]),
)
TRACES = st.none() | st.just("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")


@given(at=INSTANTS, name=TEXT, reason=TEXT, tenant=TEXT, trace=TRACES,
       task=st.none() | st.tuples(TEXT, st.integers(0, 2**31)))
def test_fields_are_written_as_the_model_would_write_the_event(
    *, at: datetime, name: str, reason: str, tenant: str, trace: str | None,
    task: tuple[str, int] | None,
) -> None:
    fields = event_fields(
        "task.completed", at, job_id=uuid.uuid4(), job_name=name, job_type="t",
        application="app", tenant=tenant, run_id=uuid.uuid4(), previous="ACTIVE",
        state="COMPLETED", reason=reason, traceparent=trace,
        task=task and task[0], task_id=task and uuid.uuid4(), attempt=task and task[1],
    )
    model = Event(**fields)
    assert fields_json([fields, fields]).obj == events_json([model, model]).obj
    assert Event.model_validate_json(fields_json([fields]).obj[1:-1]) == model


def test_each_event_gets_its_own_id() -> None:
    at = datetime(2026, 11, 28, tzinfo=UTC)
    made = [event_fields("run.started", at, job_id=uuid.uuid4(), job_name="j", job_type="",
                         application="", tenant="", run_id=uuid.uuid4(), previous="READY",
                         state="ACTIVE", reason="") for _ in range(3)]
    assert len({fields["id"] for fields in made}) == 3
