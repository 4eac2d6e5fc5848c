"""The webhook request: body, signature and headers (SPEC §5), pure.

``X-Stellwerk-Signature: sha256=<hex>`` is the HMAC-SHA256, keyed with the
subscription's secret, of ``"<timestamp>.<body>"``, where the timestamp is the
``X-Stellwerk-Timestamp`` header (unix seconds): a receiver recomputes it over the raw
body and refuses an old timestamp, so a captured request cannot be replayed later.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

SIGNATURE_PREFIX = "sha256="
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
    }
    taken = {name.lower() for name in ours}
    return {**{k: v for k, v in extra.items() if k.lower() not in taken}, **ours}
