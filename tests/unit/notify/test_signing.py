"""The webhook signature of SPEC §5, checked against an independent computation."""

from __future__ import annotations

import hashlib
import hmac
import json

from hypothesis import given
from hypothesis import strategies as st

from scheduler.notify.signing import signature, verify, webhook_body, webhook_headers


def test_the_signature_is_hmac_sha256_over_timestamp_dot_body() -> None:
    body = b'{"event":"run.started"}'
    expected = hmac.new(b"key", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert signature("key", 1700000000, body) == f"sha256={expected}"


@given(secret=st.text(min_size=1), ts=st.integers(0, 2**40), body=st.binary())
def test_verify_accepts_the_signature_and_nothing_changed(secret: str, ts: int,
                                                          body: bytes) -> None:
    header = signature(secret, ts, body)
    assert verify(secret, str(ts), body, header)
    assert not verify(secret, str(ts + 1), body, header)
    assert not verify(secret + "x", str(ts), body, header)
    assert not verify(secret, str(ts), body + b" ", header)


def test_headers_carry_event_timestamp_signature_and_ids_and_cannot_be_overridden() -> None:
    body = webhook_body({"event": "run.done", "id": "e1"})
    headers = webhook_headers(
        event="run.done", event_id="e1", delivery_id="d1", timestamp=1234, secret="k",
        body=body, extra={"Authorization": "Bearer x", "user-agent": "mine"},
    )
    assert headers["X-Stellwerk-Event"] == "run.done"
    assert headers["X-Stellwerk-Timestamp"] == "1234"
    assert headers["X-Stellwerk-Signature"] == signature("k", 1234, body)
    assert (headers["X-Stellwerk-Event-Id"], headers["X-Stellwerk-Delivery"]) == ("e1", "d1")
    assert headers["Authorization"] == "Bearer x"
    assert "user-agent" not in headers  # Stellwerk's own User-Agent wins
    assert headers["Content-Type"] == "application/json"


def test_the_body_is_the_same_json_on_every_retry() -> None:
    event = {"state": "ACTIVE", "event": "run.started", "at": "2030-01-01T00:00:00Z"}
    assert webhook_body(event) == webhook_body(dict(reversed(event.items())))
    assert json.loads(webhook_body(event)) == event
