"""The webhook client, held to the egress policy (``common.egress``) at connect time.

httpx connects through an httpcore *network backend*; :class:`EgressBackend` is one
that resolves the host itself, judges every address, and connects to an address it
judged (the TLS handshake still names the URL's host, so certificates are checked
against the name). A name that resolves to a public address when checked and to
169.254.169.254 a moment later (DNS rebinding) gains nothing: there is no second
lookup. An IP literal goes through the same path.

The client follows no redirects and takes no proxy from the environment: through a
proxy, names would be resolved where the policy cannot see the addresses
(docs/decisions.md, "Egress policy").
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from datetime import timedelta

import httpcore
import httpx

from common.egress import EgressPolicy, EgressRefused, IPAddress, Refusal

# The addresses of a host, in the resolver's order of preference; may raise OSError.
Resolve = Callable[[str, int], list[IPAddress]]
# httpcore's ``SOCKET_OPTION``, written out: httpcore does not export it.
SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)


def system_resolve(host: str, port: int) -> list[IPAddress]:
    """The host's addresses from the system resolver (``getaddrinfo``), once each."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = [ipaddress.ip_address(str(info[4][0])) for info in found]
    return list(dict.fromkeys(addresses))


class EgressBackend(httpcore.NetworkBackend):
    """Connects only to addresses the policy allows; :class:`EgressRefused` otherwise."""

    def __init__(
        self, policy: EgressPolicy, resolve: Resolve = system_resolve,
        inner: httpcore.NetworkBackend | None = None,
    ) -> None:
        """``inner`` makes the connection to the checked address (httpcore's own)."""
        self._policy = policy
        self._resolve = resolve
        self._inner = inner or httpcore.SyncBackend()

    def connect_tcp(
        self, host: str, port: int, timeout: float | None = None,
        local_address: str | None = None, socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.NetworkStream:
        """Resolve, judge, and connect to the first allowed address that answers."""
        addresses = self.allowed(host, port)
        options = list(socket_options or [])
        failure: httpcore.ConnectError | httpcore.ConnectTimeout | None = None
        for address in addresses:
            try:
                return self._inner.connect_tcp(
                    str(address), port, timeout, local_address, options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                failure = error
        assert failure is not None  # ``allowed`` returns at least one address
        raise failure

    def allowed(self, host: str, port: int) -> list[IPAddress]:
        """The addresses of ``host`` the policy allows (at least one), or raise."""
        refused = self._policy.refusal_of_host(host)
        if refused is not None:
            raise EgressRefused(refused)
        try:
            found = self._resolve(host, port)
        except OSError as error:
            raise httpcore.ConnectError(f"cannot resolve {host}: {error}") from error
        allowed: list[IPAddress] = []
        first: Refusal | None = None
        for address in found:
            refusal = self._policy.refusal_of_address(address, host)
            if refusal is None:
                allowed.append(address)
            first = first or refusal
        if not allowed:
            raise EgressRefused(first or Refusal(host, "resolved to no address", always=False))
        return allowed

    def connect_unix_socket(
        self, path: str, timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.NetworkStream:
        """Never: a webhook is an http(s) URL."""
        raise EgressRefused(Refusal(path, "a Unix socket", always=True))

    def sleep(self, seconds: float) -> None:
        """As httpcore's own backend."""
        self._inner.sleep(seconds)


def webhook_client(egress: EgressPolicy, timeout: timedelta) -> httpx.Client:
    """The client the notify runner POSTs webhooks with (shared by its threads).

    httpx takes no network backend in its public API; the transport's connection pool
    is replaced by one built with :class:`EgressBackend`, with httpx's default limits
    and TLS settings (``tests/integration/notify/test_notify_egress.py`` shows it used).
    """
    transport = httpx.HTTPTransport()
    limits = httpx.Limits()
    transport._pool = httpcore.ConnectionPool(
        ssl_context=httpx.create_ssl_context(),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=EgressBackend(egress),
    )
    return httpx.Client(
        transport=transport, timeout=timeout.total_seconds(), follow_redirects=False,
        trust_env=False,
    )
