"""The webhook request: body, signature and headers, pure.

The rules: docs/decisions.md, "Notify: subscriptions, webhooks, Celery-task targets"
("Webhook request") and "API contract" (Standard Webhooks).

``X-Stellwerk-Signature: sha256=<hex>`` is the HMAC-SHA256, keyed with the
subscription's secret, of ``"<timestamp>.<body>"``, where the timestamp is the
``X-Stellwerk-Timestamp`` header (unix seconds): a receiver recomputes it over the raw
body and refuses an old timestamp, so a captured request cannot be replayed later.

The same request also carries the Standard Webhooks headers (issue 14), so a receiver
can verify it with that project's libraries: ``webhook-id`` (the event id: the same on
every retry, an idempotency key), ``webhook-timestamp`` (the same unix seconds) and
``webhook-signature: v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">``. Its key is
the secret's bytes: a ``whsec_<base64>`` secret (the standard's form) is decoded, any
other is taken as UTF-8 text, as the libraries take a secret given as bytes. Receivers
should refuse a timestamp more than ``TOLERANCE`` away from their clock, as the
libraries do.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

SIGNATURE_PREFIX = "sha256="
STANDARD_SECRET_PREFIX = "whsec_"
STANDARD_VERSION = "v1"
TOLERANCE = timedelta(minutes=5)
USER_AGENT = "stellwerk-notify"


def webhook_body(event: Mapping[str, Any]) -> bytes:
    """The JSON body of an event: compact, keys sorted, the same on every retry."""
    return json.dumps(event, separators=(",", ":"), sort_keys=True).encode()


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """``sha256=<hex>`` over ``"<timestamp>.<body>"``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return SIGNATURE_PREFIX + mac.hexdigest()


def verify(secret: str, timestamp: str, body: bytes, header: str) -> bool:
    """Whether ``header`` is the signature of ``body`` sent at ``timestamp`` (for receivers)."""
    if not timestamp.isdigit():
        return False
    return hmac.compare_digest(signature(secret, int(timestamp), body), header)


def standard_key(secret: str) -> bytes:
    """The HMAC key of the Standard Webhooks signature for a subscription's secret."""
    if secret.startswith(STANDARD_SECRET_PREFIX):
        try:
            key = base64.b64decode(secret.removeprefix(STANDARD_SECRET_PREFIX), validate=True)
        except binascii.Error:
            key = b""  # not the standard's form after all: the text is the key
        if key:
            return key
    return secret.encode()


def standard_signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64>``: HMAC-SHA256 over ``"<message_id>.<timestamp>.<body>"``."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    mac = hmac.new(standard_key(secret), signed, hashlib.sha256).digest()
    return f"{STANDARD_VERSION},{base64.b64encode(mac).decode()}"


def webhook_headers(
    *, event: str, event_id: str, delivery_id: str, timestamp: int, secret: str, body: bytes,
    extra: Mapping[str, str],
) -> dict[str, str]:
    """The subscription's own headers and Stellwerk's, which they cannot override."""
    ours = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Stellwerk-Event": event,
        "X-Stellwerk-Event-Id": event_id,
        "X-Stellwerk-Delivery": delivery_id,
        "X-Stellwerk-Timestamp": str(timestamp),
        "X-Stellwerk-Signature": signature(secret, timestamp, body),
        "webhook-id": event_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": standard_signature(secret, event_id, timestamp, body),
    }
    taken = {name.lower() for name in ours}
    return {**{k: v for k, v in extra.items() if k.lower() not in taken}, **ours}
