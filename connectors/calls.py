"""Making one HTTP call on the shared aiohttp session: a total time limit, a capped body.

``timeout`` bounds the whole call, connecting included, as a person setting "30 s"
means it. The body is streamed and reading stops at the cap, so a large answer costs
neither memory nor time.

The session is aiohttp's, not httpx's: a connector holds hundreds of calls at once,
and httpx's connection pool pays for its bookkeeping per request and per connection
(500 slow calls in flight cost 3-8 s of CPU against aiohttp's 0.4-0.6 s, measured side
by side; ``docs/decisions.md``).

Every connection is held to the egress policy (``connectors.egress_connector``): a
refused target is a :class:`CallError` naming the rule. Proxies from the environment
are not used: through a proxy, names would be resolved where the policy cannot see
the addresses (docs/decisions.md, "Egress policy").

A kept-alive connection may be closed by the server just as the pool hands it out:
the request then dies with no answer although the server never saw it. aiohttp sends
an idempotent method once more on a new connection (RFC 9112 §9.3.1.1); the others
are sent once more here, as Go's ``net/http`` does for a request with an
``Idempotency-Key``. Every call made here carries one (or the key in its body), so
the endpoint can tell the repeat should the first have reached it after all.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import aiohttp
from aiohttp.client import IDEMPOTENT_METHODS as RESENT_BY_AIOHTTP
from multidict import CIMultiDictProxy

from common.egress import EgressPolicy, EgressRefused
from connectors.egress_connector import EgressConnector
from connectors.responses import MAX_BODY_BYTES, Answer

# RESENT_BY_AIOHTTP: the methods aiohttp itself sends again when a kept-alive connection
# drops them. Its own set (not exported in ``__all__``), so the two cannot drift apart.

IDLE_CONNECTION_KEPT = timedelta(seconds=4)
"""Under the 5 s after which uvicorn, Node and Apache close an idle connection."""


def new_session(egress: EgressPolicy) -> aiohttp.ClientSession:
    """The session every call shares (open it inside the event loop that uses it).

    No limit on connections (``--concurrency`` bounds the calls in flight), no time
    limit of its own (each call has one); connections only to what ``egress`` allows.
    """
    connector = EgressConnector(
        egress, limit=0, keepalive_timeout=IDLE_CONNECTION_KEPT.total_seconds()
    )
    return aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=None), trust_env=False
    )


class CallError(Exception):
    """The call got no HTTP answer: no connection, a broken one, or none in time."""


async def call(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    *,
    headers: Mapping[str, str],
    timeout_s: float,
    json_body: Any = None,
    cap_bytes: int = MAX_BODY_BYTES,
) -> Answer:
    """Send one request and read its answer; :class:`CallError` when there is none."""
    began = time.monotonic()
    try:
        async with asyncio.timeout(timeout_s):
            response = await _send(session, method, url, dict(headers), json_body)
            async with response:
                body, truncated = await _read_capped(response, cap_bytes)
    except TimeoutError:
        raise CallError(f"no answer within {timeout_s:g} s") from None
    except EgressRefused as error:
        raise CallError(str(error)) from None
    except (aiohttp.ClientError, ValueError) as error:  # ValueError: a URL yarl refuses
        raise CallError(f"{type(error).__name__}: {error}".rstrip(": ")) from None
    return Answer(
        status=response.status,
        reason=response.reason or "",
        headers=_joined(response.headers),
        body=body,
        truncated=truncated,
        elapsed_s=time.monotonic() - began,
    )


async def _send(
    session: aiohttp.ClientSession, method: str, url: str, headers: dict[str, str],
    json_body: Any,
) -> aiohttp.ClientResponse:
    """The answer's head; a request aiohttp would not resend goes again once if dropped."""
    async def send() -> aiohttp.ClientResponse:
        return await session.request(
            method, url, headers=headers, json=json_body, allow_redirects=False
        )

    if method.upper() in RESENT_BY_AIOHTTP:
        return await send()
    try:
        return await send()
    except aiohttp.ClientConnectorError:
        raise  # it never connected: nothing was dropped
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
        return await send()


def _joined(headers: CIMultiDictProxy[str]) -> dict[str, str]:
    """Header names in lower case, a repeated header's values joined by ", "."""
    joined: dict[str, str] = {}
    for name, value in headers.items():
        key = name.lower()
        joined[key] = f"{joined[key]}, {value}" if key in joined else value
    return joined


async def _read_capped(response: aiohttp.ClientResponse, cap_bytes: int) -> tuple[bytes, bool]:
    """Up to ``cap_bytes`` of the body, and whether there was more."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        chunks.append(chunk)
        size += len(chunk)
        if size > cap_bytes:
            return b"".join(chunks)[:cap_bytes], True
    return b"".join(chunks), False
