"""The connector's session connects only where the egress policy allows (issue 14).

A loopback server counts the connections it is offered: a refused call must fail
naming the rule without the server ever seeing a connection. Names go through a
stand-in resolver, so that "resolves to loopback" does not depend on the machine's
DNS; IP literals go through no resolver at all (aiohttp skips it for them), which is
why they are tested apart.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from common.egress import EgressPolicy
from connectors.calls import CallError, call, new_session
from connectors.egress_connector import EgressConnector

NONE_ALLOWED = EgressPolicy()
ANSWER = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"


class Resolver(AbstractResolver):
    """Answers every name with the addresses ``answer`` gives for its n-th lookup."""

    def __init__(self, answer: Callable[[int], list[str]]) -> None:
        self.answer = answer
        self.lookups = 0

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.lookups += 1
        return [
            {"hostname": host, "host": address, "port": port, "family": socket.AF_INET,
             "proto": 0, "flags": socket.AI_NUMERICHOST}
            for address in self.answer(self.lookups)
        ]

    async def close(self) -> None:
        return None


class Server:
    """A loopback HTTP server that answers 200 and counts its connections."""

    def __init__(self) -> None:
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        await reader.readuntil(b"\r\n\r\n")
        writer.write(ANSWER)
        await writer.drain()
        writer.close()


async def outcome(session: aiohttp.ClientSession, url: str) -> str:
    try:
        answer = await call(session, "GET", url, headers={}, timeout_s=5)
    except CallError as error:
        return f"error: {error}"
    return f"{answer.status} {answer.body.decode()}"


def against_server(
    policy: EgressPolicy, url: str, resolver: AbstractResolver | None = None,
    host: str = "127.0.0.1",
) -> tuple[list[str], Server]:
    """The outcome of two calls to ``url`` (``{port}`` filled in), and the server."""
    server = Server()

    async def main() -> list[str]:
        listening = await asyncio.start_server(server.handle, host, 0)
        port = listening.sockets[0].getsockname()[1]
        extra: dict[str, Any] = {} if resolver is None else {"resolver": resolver}
        connector = EgressConnector(policy, use_dns_cache=False, **extra)
        async with listening, aiohttp.ClientSession(connector=connector) as session:
            target = url.format(port=port)
            return [await outcome(session, target), await outcome(session, target)]

    return asyncio.run(main()), server


def test_loopback_without_an_allowance_is_refused_before_any_connection() -> None:
    outcomes, server = against_server(NONE_ALLOWED, "http://127.0.0.1:{port}/")
    assert outcomes == ["error: egress: 127.0.0.1 is a loopback address; allow it with "
                        "STELLWERK_EGRESS_ALLOW"] * 2
    assert server.connections == 0


def test_loopback_with_an_allowance_is_reached() -> None:
    outcomes, server = against_server(EgressPolicy.parse("127.0.0.0/8"),
                                      "http://127.0.0.1:{port}/")
    assert outcomes == ["200 ok"] * 2
    assert server.connections == 2


def test_ipv6_loopback_literal_is_refused() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        outcomes, server = against_server(NONE_ALLOWED, "http://[::1]:{port}/", host="::1")
    except OSError:
        pytest.skip("cannot listen on ::1 here")
    assert outcomes[0] == ("error: egress: ::1 is a loopback address; allow it with "
                           "STELLWERK_EGRESS_ALLOW")
    assert server.connections == 0


def test_a_name_resolving_to_loopback_is_refused_after_the_lookup() -> None:
    resolver = Resolver(lambda _: ["127.0.0.1"])
    outcomes, server = against_server(NONE_ALLOWED, "http://hooks.example:{port}/", resolver)
    assert outcomes[0] == ("error: egress: hooks.example (127.0.0.1) is a loopback address; "
                           "allow it with STELLWERK_EGRESS_ALLOW")
    assert server.connections == 0
    assert resolver.lookups == 2  # looked up, judged and refused for each call


def test_rebinding_gains_nothing_each_connection_uses_the_addresses_it_checked() -> None:
    # The first lookup answers an allowed address, every later one loopback: a
    # rebinding DNS. The first call connects (allowed by CIDR); the second call is
    # judged on its own lookup and refused, however the first went.
    resolver = Resolver(lambda n: ["127.0.0.1"] if n == 1 else ["127.0.0.2"])
    policy = EgressPolicy.parse("127.0.0.1/32")
    outcomes, server = against_server(policy, "http://rebind.example:{port}/", resolver)
    assert outcomes == ["200 ok", "error: egress: rebind.example (127.0.0.2) is a loopback "
                        "address; allow it with STELLWERK_EGRESS_ALLOW"]
    assert server.connections == 1


def test_only_the_allowed_addresses_of_a_name_are_tried() -> None:
    resolver = Resolver(lambda _: ["169.254.169.254", "127.0.0.1"])
    outcomes, server = against_server(EgressPolicy.parse("127.0.0.0/8"),
                                      "http://mixed.example:{port}/", resolver)
    assert outcomes == ["200 ok"] * 2


def test_a_name_allowed_by_name_is_reached_at_its_private_address() -> None:
    resolver = Resolver(lambda _: ["127.0.0.1"])
    outcomes, server = against_server(EgressPolicy.parse("hooks.example"),
                                      "http://hooks.example:{port}/", resolver)
    assert outcomes == ["200 ok"] * 2


@pytest.mark.parametrize(("url", "message"), [
    ("http://169.254.169.254/latest/meta-data/",
     "egress: 169.254.169.254 is a cloud metadata address, always refused"),
    ("http://metadata.google.internal/computeMetadata/v1/",
     "egress: metadata.google.internal is a cloud metadata name, always refused"),
    ("http://0.0.0.0:6379/", "egress: 0.0.0.0 is an unspecified ('this network') address, "
     "always refused"),
    ("http://10.0.0.5:8080/", "egress: 10.0.0.5 is a private address; allow it with "
     "STELLWERK_EGRESS_ALLOW"),
    ("http://localhost:6379/", "egress: localhost (127.0.0.1) is a loopback address; "
     "allow it with STELLWERK_EGRESS_ALLOW"),
])
def test_the_session_refuses_metadata_private_and_loopback_targets(
    url: str, message: str
) -> None:
    async def main() -> str:
        async with new_session(NONE_ALLOWED) as session:
            return await outcome(session, url)

    assert asyncio.run(main()) == f"error: {message}"


def test_the_session_does_not_take_proxies_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")

    async def main() -> bool:
        async with new_session(NONE_ALLOWED) as session:
            return session.trust_env

    assert asyncio.run(main()) is False
