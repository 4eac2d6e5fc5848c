"""The webhook client connects only to addresses it checked (issue 14).

A stand-in resolver plays DNS, so that a name resolving to loopback, or answering
differently on each lookup (rebinding), does not depend on the machine; a loopback
server counts the connections it is offered.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta

import httpcore
import httpx
import pytest

from common.egress import EgressPolicy, EgressRefused, IPAddress
from scheduler.notify.egress_transport import EgressBackend, webhook_client

LOOPBACK_RULE = "is a loopback address; allow it with STELLWERK_EGRESS_ALLOW"


class Listener:
    """A loopback TCP server answering each connection with 200 and counting them."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.socket.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n"
                             b"connection: close\r\n\r\nok")


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.socket.close()


def resolver(answer: Callable[[int], list[str]]) -> Callable[[str, int], list[IPAddress]]:
    """A resolver whose n-th lookup answers ``answer(n)``."""
    lookups = [0]

    def resolve(host: str, port: int) -> list[IPAddress]:
        lookups[0] += 1
        return [ipaddress.ip_address(a) for a in answer(lookups[0])]

    return resolve


def client(policy: EgressPolicy, resolve: Callable[[str, int], list[IPAddress]]) -> httpx.Client:
    pool = httpcore.ConnectionPool(network_backend=EgressBackend(policy, resolve))
    transport = httpx.HTTPTransport()
    transport._pool = pool
    return httpx.Client(transport=transport, timeout=5, trust_env=False)


def outcome(http: httpx.Client, url: str) -> str:
    try:
        return str(http.post(url, content=b"{}").status_code)
    except EgressRefused as error:
        return f"refused: {error}"


def test_a_name_resolving_to_loopback_is_refused_without_a_connection(
    listener: Listener,
) -> None:
    with client(EgressPolicy(), resolver(lambda _: ["127.0.0.1"])) as http:
        found = outcome(http, f"http://hooks.example:{listener.port}/")
    assert found == f"refused: egress: hooks.example (127.0.0.1) {LOOPBACK_RULE}"
    assert listener.connections == 0


def test_rebinding_gains_nothing_each_connection_uses_the_addresses_it_checked(
    listener: Listener,
) -> None:
    # First lookup: an allowed address; every later one: another loopback address.
    policy = EgressPolicy.parse("127.0.0.1/32")
    answers = resolver(lambda n: ["127.0.0.1"] if n == 1 else ["127.0.0.2"])
    with client(policy, answers) as http:
        first = outcome(http, f"http://rebind.example:{listener.port}/")
        second = outcome(http, f"http://rebind.example:{listener.port}/")
    assert first == "200"
    assert second == f"refused: egress: rebind.example (127.0.0.2) {LOOPBACK_RULE}"
    assert listener.connections == 1


def test_refused_addresses_of_a_name_are_skipped(listener: Listener) -> None:
    answers = resolver(lambda _: ["169.254.169.254", "10.0.0.1", "127.0.0.1"])
    with client(EgressPolicy.parse("127.0.0.0/8"), answers) as http:
        assert outcome(http, f"http://mixed.example:{listener.port}/") == "200"


@pytest.mark.parametrize(("url", "message"), [
    ("http://169.254.169.254/latest/meta-data/",
     "egress: 169.254.169.254 is a cloud metadata address, always refused"),
    ("http://[::ffff:169.254.169.254]/", "always refused"),
    ("http://metadata.google.internal/", "cloud metadata name, always refused"),
    ("http://127.0.0.1:6379/", f"egress: 127.0.0.1 {LOOPBACK_RULE}"),
    ("http://[::1]:8080/", f"egress: ::1 {LOOPBACK_RULE}"),
    ("http://localhost:8080/", f"egress: localhost (127.0.0.1) {LOOPBACK_RULE}"),
    ("http://192.168.0.10/", "egress: 192.168.0.10 is a private address"),
])
def test_the_webhook_client_refuses_literals_and_names_before_connecting(
    url: str, message: str,
) -> None:
    with webhook_client(EgressPolicy(), timedelta(seconds=2)) as http:
        assert message in outcome(http, url)


def test_the_webhook_client_reaches_an_allowed_loopback_receiver(listener: Listener) -> None:
    with webhook_client(EgressPolicy.parse("127.0.0.0/8"), timedelta(seconds=2)) as http:
        assert outcome(http, f"http://127.0.0.1:{listener.port}/") == "200"
    assert listener.connections == 1


def test_a_name_that_does_not_resolve_is_a_connect_error_retried_as_usual() -> None:
    def fails(host: str, port: int) -> list[IPAddress]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with client(EgressPolicy(), fails) as http, pytest.raises(httpx.ConnectError):
        http.post("http://nowhere.example/", content=b"{}")


def test_the_webhook_client_takes_no_proxy_and_follows_no_redirect() -> None:
    with webhook_client(EgressPolicy(), timedelta(seconds=2)) as http:
        assert http.trust_env is False
        assert http.follow_redirects is False
