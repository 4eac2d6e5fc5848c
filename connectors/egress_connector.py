"""The connector's aiohttp connections, held to the egress policy (``common.egress``).

The check sits where aiohttp turns a host into the addresses it then connects to
(``TCPConnector._resolve_host``): every address is judged after DNS, and the
connection is made only to addresses that passed, so a name that resolves to a public
address when checked and to 169.254.169.254 a moment later (DNS rebinding) gains
nothing: there is no second lookup. aiohttp answers an IP literal without its resolver,
but still through ``_resolve_host``, so literals are judged here too
(``tests/unit/connectors/test_egress_connector.py`` holds aiohttp to both).

Addresses that are refused are dropped; a host none of whose addresses pass raises
:class:`~common.egress.EgressRefused` with the first one's rule, which
``connectors.calls`` turns into the call's error message.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

import aiohttp
from aiohttp.abc import ResolveResult

from common.egress import EgressPolicy, EgressRefused, Refusal


class EgressConnector(aiohttp.TCPConnector):
    """A ``TCPConnector`` that connects only to addresses the policy allows."""

    def __init__(self, policy: EgressPolicy, **kwargs: Any) -> None:
        """``kwargs`` go to ``TCPConnector``."""
        super().__init__(**kwargs)
        self.policy = policy

    async def _resolve_host(
        self, host: str, port: int, traces: Sequence[Any] | None = None
    ) -> list[ResolveResult]:
        """The addresses of ``host`` the policy allows; :class:`EgressRefused` if none."""
        refused = self.policy.refusal_of_host(host)
        if refused is not None:
            raise EgressRefused(refused)
        found = await super()._resolve_host(host, port, traces=traces)
        allowed, first = allowed_addresses(self.policy, host, found)
        if not allowed:
            raise EgressRefused(first or Refusal(host, "resolved to no address", always=False))
        return allowed


def allowed_addresses(
    policy: EgressPolicy, host: str, found: Sequence[ResolveResult]
) -> tuple[list[ResolveResult], Refusal | None]:
    """Those of ``found`` the policy allows, and the first refusal among the others."""
    allowed: list[ResolveResult] = []
    first: Refusal | None = None
    for result in found:
        address = ipaddress.ip_address(result["host"])
        refusal = policy.refusal_of_address(address, host)
        if refusal is None:
            allowed.append(result)
        elif first is None:
            first = refusal
    return allowed, first
