"""A call whose kept-alive connection is dropped before any answer is sent once more.

A raw loopback server plays each script: it reads request heads and, per request it
sees, answers, drops the connection, or answers a head and then drops mid-body. The
requests it saw (with the connection each came on) show what the client sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx
import pytest

from connectors.calls import CallError, call

ANSWER = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
HALF_ANSWER = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npartial"


@dataclass
class ScriptedServer:
    """Per request seen, in order: ``answer``, ``drop`` or ``half`` (the last repeats)."""

    script: list[str]
    seen: list[tuple[int, str]] = field(default_factory=list)
    connections: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        connection = self.connections
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                self.seen.append((connection, head.split(b"\r\n")[0].decode()))
                step = self.script[min(len(self.seen), len(self.script)) - 1]
                if step != "answer":
                    writer.write(HALF_ANSWER if step == "half" else b"")
                    await writer.drain()
                    return
                writer.write(ANSWER)
                await writer.drain()
        except asyncio.IncompleteReadError:
            return
        finally:
            writer.close()


def against(script: list[str], calls: Callable[[httpx.AsyncClient, str], Awaitable[list[str]]]
            ) -> tuple[list[str], ScriptedServer]:
    """The outcomes of ``calls`` on one client against a server playing ``script``."""
    server = ScriptedServer(script)

    async def main() -> list[str]:
        listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        port = listening.sockets[0].getsockname()[1]
        async with listening, httpx.AsyncClient() as client:
            return await calls(client, f"http://127.0.0.1:{port}/thing")

    return asyncio.run(main()), server


async def get(client: httpx.AsyncClient, url: str) -> str:
    try:
        answer = await call(client, "GET", url, headers={"Idempotency-Key": "k"}, timeout_s=5)
    except CallError as error:
        return f"error: {error}"
    return f"{answer.status} {answer.body.decode()}"


async def twice(client: httpx.AsyncClient, url: str) -> list[str]:
    return [await get(client, url), await get(client, url)]


async def once(client: httpx.AsyncClient, url: str) -> list[str]:
    return [await get(client, url)]


def test_a_request_on_a_kept_alive_connection_closed_under_it_goes_again_on_a_new_one() -> None:
    outcomes, server = against(["answer", "drop", "answer"], twice)

    assert outcomes == ["200 ok", "200 ok"]
    assert server.seen == [(1, "GET /thing HTTP/1.1"), (1, "GET /thing HTTP/1.1"),
                           (2, "GET /thing HTTP/1.1")]


def test_a_request_dropped_twice_fails_naming_the_drop_and_is_not_sent_a_third_time() -> None:
    outcomes, server = against(["drop"], once)

    assert outcomes == ["error: RemoteProtocolError: Server disconnected without sending a "
                        "response."]
    assert len(server.seen) == 2


@pytest.mark.parametrize("script", [["half"], ["answer", "half"]])
def test_a_request_whose_answer_had_begun_is_never_sent_again(script: list[str]) -> None:
    outcomes, server = against(script, once if len(script) == 1 else twice)

    assert outcomes[-1].startswith("error: RemoteProtocolError: peer closed connection")
    assert len(server.seen) == len(script)
