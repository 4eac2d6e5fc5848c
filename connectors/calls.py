"""Making one HTTP call on the shared async client: a total time limit, a capped body.

httpx's own timeouts bound each read, not the call; ``timeout`` here bounds the whole
call, connecting included, as a person setting "30 s" means it. The body is streamed
and reading stops at the cap, so a large answer costs neither memory nor time.

A kept-alive connection may be closed by the server just as the pool hands it out
(uvicorn and Node close idle ones after 5 s, the same as httpx keeps them): the
request then dies with no answer although the server never saw it. Such a request is
sent once more on a new connection, as Go's ``net/http`` does for a request with an
``Idempotency-Key``; every call made here carries one (or the key in its body), so the
endpoint can tell the repeat should the first have reached it after all.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import httpx

from connectors.responses import MAX_BODY_BYTES, Answer


class CallError(Exception):
    """The call got no HTTP answer: no connection, a broken one, or none in time."""


async def call(
    client: httpx.AsyncClient,
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
            request = client.build_request(method, url, headers=dict(headers), json=json_body)
            response = await _send(client, request)
            try:
                body, truncated = await _read_capped(response, cap_bytes)
            finally:
                await response.aclose()
    except TimeoutError:
        raise CallError(f"no answer within {timeout_s:g} s") from None
    except (httpx.HTTPError, httpx.InvalidURL) as error:
        raise CallError(f"{type(error).__name__}: {error}".rstrip(": ")) from None
    return Answer(
        status=response.status_code,
        reason=response.reason_phrase,
        headers=dict(response.headers),
        body=body,
        truncated=truncated,
        elapsed_s=time.monotonic() - began,
    )


DROPPED = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
"""How a request ends whose connection closed before any answer came."""


async def _send(client: httpx.AsyncClient, request: httpx.Request) -> httpx.Response:
    """The answer's head, the request sent again once when its connection was dropped."""
    try:
        return await client.send(request, stream=True)
    except DROPPED:
        return await client.send(request, stream=True)


async def _read_capped(response: httpx.Response, cap_bytes: int) -> tuple[bytes, bool]:
    """Up to ``cap_bytes`` of the body, and whether there was more."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > cap_bytes:
            return b"".join(chunks)[:cap_bytes], True
    return b"".join(chunks), False
