"""The engine's dispatch body: what the model would have written, without the model."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from common.messaging.messages import TaskDispatch, dispatch_body

INSTANTS = st.none() | st.datetimes(  # hypothesis bounds are naive; zones from ``timezones``
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1),  # noqa: DTZ001
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5))]),
)
JSON = st.dictionaries(st.text(max_size=5), st.none() | st.integers(-9, 9) | st.text(max_size=5),
                       max_size=3)


@given(start=INSTANTS, finish=INSTANTS, params=JSON, storage=JSON,
       timeout=st.integers(1, 10**6) | st.floats(0.5, 1e6),
       sealed=st.none() | st.text(max_size=8), trace=st.none() | st.text(max_size=8))
def test_the_body_is_the_model_s_json_dump(
    *, start: datetime | None, finish: datetime | None, params: dict[str, Any],
    storage: dict[str, Any], timeout: float, sealed: str | None, trace: str | None,
) -> None:
    fields: dict[str, Any] = {
        "task_run_id": uuid.uuid4(), "run_id": uuid.uuid4(), "job_id": uuid.uuid4(),
        "job_name": "nightly", "tenant": "acme", "task": "t", "type": "noop", "attempt": 3,
        "params": params, "sealed_secure_params": sealed, "job_params": {"a": 1},
        "sealed_job_secure_params": None, "storage": storage, "timeout_s": timeout,
        "last_success_start": start, "last_success_finish": finish, "traceparent": trace,
    }
    body = dispatch_body(**fields)
    model = TaskDispatch(**fields, message_id=uuid.UUID(body["message_id"]))
    assert body == model.model_dump(mode="json")
    assert list(body) == list(model.model_dump(mode="json"))
