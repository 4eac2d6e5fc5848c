"""Signed callback URLs of the web-service worker protocol.

The protocol: docs/decisions.md, "Post-backs, web-service callbacks, worker types".

The connector hands a web-service worker three absolute URLs (``log``, ``storage``,
``status``) that carry their own credential, so the worker needs no API token: the
credential is an HMAC-SHA256 over the attempt (task run id and attempt number) with a
key derived from ``STELLWERK_SECRET_KEY``. It is good for that attempt only; a retry is
a new attempt with new URLs, and the API refuses callbacks of an attempt that is no
longer current (409), as it does post-backs.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Literal
from urllib.parse import urlencode
from uuid import UUID

from pydantic import SecretStr

CallbackKind = Literal["log", "storage", "status"]
CALLBACK_KINDS: tuple[CallbackKind, ...] = ("log", "storage", "status")
# Names the purpose of the derived key: the same secret seals secure params with another.
_PURPOSE = b"stellwerk web-service callbacks v1"


def _key(secret_key: SecretStr | str) -> bytes:
    raw = secret_key.get_secret_value() if isinstance(secret_key, SecretStr) else secret_key
    return hmac.new(raw.encode(), _PURPOSE, hashlib.sha256).digest()


def callback_token(secret_key: SecretStr | str, task_run_id: UUID, attempt: int) -> str:
    """The credential of one attempt's callbacks (hex)."""
    message = f"{task_run_id}:{attempt}".encode()
    return hmac.new(_key(secret_key), message, hashlib.sha256).hexdigest()


def verify_callback_token(
    secret_key: SecretStr | str, task_run_id: UUID, attempt: int, token: str
) -> bool:
    """Whether ``token`` is the credential of this attempt (constant-time compare).

    Compared as bytes: ``compare_digest`` raises for a ``str`` with non-ASCII characters,
    and a token comes from whoever calls.
    """
    expected = callback_token(secret_key, task_run_id, attempt).encode()
    return hmac.compare_digest(expected, token.encode(errors="replace"))


def callback_urls(
    api_base: str, secret_key: SecretStr | str, run_id: UUID, task_run_id: UUID, attempt: int
) -> dict[CallbackKind, str]:
    """The three callback URLs of one attempt.

    ``api_base`` is the API as the worker reaches it, up to and including ``/api/v1``
    (``STELLWERK_CALLBACK_URL``); the task is named by its id, which is unique.
    """
    token = callback_token(secret_key, task_run_id, attempt)
    query = urlencode({"attempt": attempt, "token": token})
    base = api_base.rstrip("/")
    return {
        kind: f"{base}/runs/{run_id}/tasks/{task_run_id}/callbacks/{kind}?{query}"
        for kind in CALLBACK_KINDS
    }
