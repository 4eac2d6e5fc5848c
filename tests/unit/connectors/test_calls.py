"""A call whose kept-alive connection is dropped before any answer is sent once more.

A raw loopback server plays each script: it reads request heads and, per request it
sees, answers, drops the connection, or answers a head and then drops mid-body. The
requests it saw (with the connection each came on) show what the client sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import pytest

from common.egress import EgressPolicy
from connectors.calls import CallError, call, new_session

ANSWER = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
HALF_ANSWER = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npartial"
LOOPBACK = EgressPolicy.parse("127.0.0.0/8")  # the server plays on loopback


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
                length = _content_length(head)
                if length:
                    await reader.readexactly(length)
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


def _content_length(head: bytes) -> int:
    for line in head.decode().split("\r\n"):
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            return int(value)
    return 0


Calls = Callable[[aiohttp.ClientSession, str, str], Awaitable[list[str]]]


def against(script: list[str], calls: Calls, method: str = "GET"
            ) -> tuple[list[str], ScriptedServer]:
    """The outcomes of ``calls`` on one client against a server playing ``script``."""
    server = ScriptedServer(script)

    async def main() -> list[str]:
        listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        port = listening.sockets[0].getsockname()[1]
        async with listening, new_session(LOOPBACK) as session:
            return await calls(session, method, f"http://127.0.0.1:{port}/thing")

    return asyncio.run(main()), server


async def send(session: aiohttp.ClientSession, method: str, url: str) -> str:
    try:
        answer = await call(session, method, url, headers={"Idempotency-Key": "k"},
                            timeout_s=5, json_body={"n": 1} if method == "POST" else None)
    except CallError as error:
        return f"error: {error}"
    return f"{answer.status} {answer.body.decode()}"


async def twice(session: aiohttp.ClientSession, method: str, url: str) -> list[str]:
    return [await send(session, method, url), await send(session, method, url)]


async def once(session: aiohttp.ClientSession, method: str, url: str) -> list[str]:
    return [await send(session, method, url)]


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_request_on_a_kept_alive_connection_closed_under_it_goes_again_on_a_new_one(
    method: str,
) -> None:
    outcomes, server = against(["answer", "drop", "answer"], twice, method)

    assert outcomes == ["200 ok", "200 ok"]
    line = f"{method} /thing HTTP/1.1"
    assert server.seen == [(1, line), (1, line), (2, line)]


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_request_dropped_twice_fails_naming_the_drop_and_is_not_sent_a_third_time(
    method: str,
) -> None:
    outcomes, server = against(["drop"], once, method)

    assert outcomes == ["error: ServerDisconnectedError: Server disconnected"]
    assert len(server.seen) == 2


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("script", [["half"], ["answer", "half"]])
def test_a_request_whose_answer_had_begun_is_never_sent_again(
    script: list[str], method: str,
) -> None:
    outcomes, server = against(script, once if len(script) == 1 else twice, method)

    assert outcomes[-1].startswith("error: ClientPayloadError: Response payload is not completed")
    assert len(server.seen) == len(script)
