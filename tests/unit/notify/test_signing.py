"""The webhook signatures (legacy and Standard Webhooks), checked against independent ones."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from scheduler.notify.signing import (
    TOLERANCE,
    signature,
    standard_key,
    standard_signature,
    verify,
    webhook_body,
    webhook_headers,
)


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


# Standard Webhooks (issue 14): checked with the standard's own Python library, and with
# the scheme as its specification writes it.
NOW = 1_800_000_000


def _standard_headers(secret: str, body: bytes, timestamp: int = NOW) -> dict[str, str]:
    return webhook_headers(event="run.done", event_id="0b7c4d8e-evt", delivery_id="d1",
                           timestamp=timestamp, secret=secret, body=body, extra={})


@given(secret=st.text(alphabet=st.characters(codec="utf-8"), min_size=1), body=st.binary())
def test_the_standard_library_verifies_a_plain_secret_given_as_bytes(secret: str,
                                                                     body: bytes) -> None:
    body = webhook_body({"event": "run.done", "raw": body.hex()})
    headers = _standard_headers(secret, body, timestamp=int(time.time()))
    assert Webhook(secret.encode()).verify(body, headers) == json.loads(body)


def test_the_standard_library_verifies_a_whsec_secret_as_it_is() -> None:
    secret = "whsec_" + base64.b64encode(bytes(range(32))).decode()
    body = webhook_body({"event": "run.done", "id": "e1"})
    headers = _standard_headers(secret, body, timestamp=int(time.time()))
    assert Webhook(secret).verify(body, headers) == {"event": "run.done", "id": "e1"}
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body + b" ", headers)


def test_the_signature_is_the_specification_s_scheme() -> None:
    """``v1,`` and base64 of HMAC-SHA256 over ``id.timestamp.body``, keyed as documented."""
    body = b'{"event":"run.done"}'
    key = bytes(range(24))
    secret = "whsec_" + base64.b64encode(key).decode()
    mac = hmac.new(key, b"0b7c4d8e-evt.1800000000." + body, hashlib.sha256).digest()
    headers = _standard_headers(secret, body)
    assert headers["webhook-signature"] == "v1," + base64.b64encode(mac).decode()
    assert (headers["webhook-id"], headers["webhook-timestamp"]) == ("0b7c4d8e-evt", str(NOW))
    plain = hmac.new(b"s3cret", b"m.1." + body, hashlib.sha256).digest()
    assert standard_signature("s3cret", "m", 1, body) == "v1," + base64.b64encode(plain).decode()
    assert standard_key("whsec_!not base64") == b"whsec_!not base64"
    assert standard_key("whsec_") == b"whsec_"
    assert standard_key("s3cret") == b"s3cret"


def test_the_id_is_the_event_s_so_every_retry_keeps_it() -> None:
    body = webhook_body({"event": "run.done"})
    first, retry = _standard_headers("k", body, NOW), _standard_headers("k", body, NOW + 60)
    assert first["webhook-id"] == retry["webhook-id"] == first["X-Stellwerk-Event-Id"]
    assert first["webhook-signature"] != retry["webhook-signature"]


def test_the_standard_library_refuses_a_timestamp_outside_the_documented_tolerance() -> None:
    body = webhook_body({"event": "run.done"})
    old = int(time.time() - TOLERANCE.total_seconds()) - 5
    with pytest.raises(WebhookVerificationError, match="too old"):
        Webhook(b"k").verify(body, _standard_headers("k", body, timestamp=old))
