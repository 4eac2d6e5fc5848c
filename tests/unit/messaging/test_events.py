"""An event's JSON: the trace context appears only while tracing set one."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from common.messaging.messages import Event

AT = datetime(2026, 11, 26, 8, 0, tzinfo=UTC)


def test_an_event_without_a_trace_says_nothing_of_it() -> None:
    event = Event(event="run.started", at=AT)
    assert "traceparent" not in json.loads(event.model_dump_json())
    assert "traceparent" not in event.model_dump(mode="json")
    assert event.model_dump()["reason"] == ""  # other empty fields stay


def test_an_event_with_a_trace_carries_it() -> None:
    trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    event = Event(event="run.started", at=AT, traceparent=trace)
    assert json.loads(event.model_dump_json())["traceparent"] == trace
    assert Event.model_validate_json(event.model_dump_json()).traceparent == trace
