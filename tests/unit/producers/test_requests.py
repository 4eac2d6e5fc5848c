"""Pure parts of the producers' requests: parsing, and who an invalid one is answered to."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from pydantic import ValidationError

from common.messaging.requests import CreateJob, DeleteJob, parse_request
from scheduler.producers.validation import (
    Refused,
    Sender,
    job_body,
    request_faults,
)
from scheduler.services.limits import Limits

LIMITS = Limits(max_body_bytes=1024 * 1024, max_params_bytes=64 * 1024)


def envelope(**fields: Any) -> dict[str, Any]:
    return {"message_id": str(uuid.uuid4()), "request_id": "r-1", **fields}


def faults(payload: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        parse_request(payload)
    return request_faults(caught.value)


def test_each_kind_parses_to_its_model() -> None:
    created = parse_request(envelope(kind="create_job", body={"name": "x"}, reply_to="mine"))
    assert isinstance(created, CreateJob) and created.reply_to == "mine"
    deleted = parse_request(envelope(kind="delete_job", job_id=str(uuid.uuid4())))
    assert isinstance(deleted, DeleteJob) and deleted.force is False


def test_faults_name_the_request_fields_without_the_union_tag() -> None:
    assert faults(envelope(kind="delete_job")) == "job_id: Field required"
    several = faults({"kind": "delete_job", "job_id": "nope", "request_id": ""})
    assert several.startswith(
        "message_id: Field required; request_id: String should have at least 1 character; "
        "job_id: Input should be a valid UUID"
    )
    assert faults(envelope()).startswith("kind: Unable to extract tag using discriminator")


@pytest.mark.parametrize("queue", ["stellwerk.notify", "stellwerk.jobs", "tasks.noop"])
def test_answers_never_go_to_stellwerks_own_queues(queue: str) -> None:
    reason = faults(envelope(kind="create_job", body={}, reply_to=queue))
    assert reason.startswith("reply_to: may not name one of Stellwerk's own queues")


def test_an_invalid_request_is_answered_with_what_is_valid_of_it() -> None:
    message_id = uuid.uuid4()
    sender = Sender.guess({"message_id": str(message_id), "request_id": "r", "reply_to": "mine",
                           "kind": "unknown"})
    assert sender == Sender(message_id, "r", "mine")
    assert Sender.guess({"message_id": "x", "request_id": 5, "reply_to": "tasks.x"}) == Sender(
        None, None, None)
    assert Sender.guess(["not", "a", "mapping"]) == Sender(None, None, None)


def test_a_body_is_refused_for_what_the_api_refuses() -> None:
    with pytest.raises(Refused, match=r"^the body exceeds the limit of 100 bytes"):
        job_body({"name": "x" * 200, "tasks": []}, Limits(100, 100))
    with pytest.raises(Refused, match=r"^name: String should have at most 200 characters$"):
        job_body({"name": "x" * 201, "tasks": [{"name": "a", "type": "noop"}]}, LIMITS)
    spec = job_body({"name": "ok", "tasks": [{"name": "a", "type": "noop"}]}, LIMITS)
    assert spec.name == "ok"
