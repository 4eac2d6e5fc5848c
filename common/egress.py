"""The egress policy: which addresses a call made for a user may reach (issue 14).

Pure: it decides, the HTTP clients enforce (``connectors.egress_connector`` for the
connector's aiohttp session, ``scheduler.notify.egress_transport`` for webhooks) and the
API refuses literal targets at creation (``scheduler.services.egress_checks``). A tenant
names the URL; without this, it could reach the cloud metadata service, the API, Redis
or anything else on the network the scheduler sits in.

The rules, in order (the first that matches an address refuses it):

- always refused, whatever ``STELLWERK_EGRESS_ALLOW`` says: cloud metadata addresses,
  link-local (169.254.0.0/16, fe80::/10), "this network" (0.0.0.0/8, ::) and what is no
  unicast destination (multicast, 240.0.0.0/4, broadcast);
- refused unless allowed: loopback (127.0.0.0/8, ::1) and *private* ranges: RFC 1918,
  CGNAT's shared 100.64.0.0/10, IPv6 unique-local fc00::/7 and site-local fec0::/10,
  192.0.0.0/24 (IETF protocol assignments) and 198.18.0.0/15 (benchmarking). These are
  the ranges that lead into the operator's own network rather than the internet.

An IPv6 address that carries an IPv4 one (``::ffff:a.b.c.d``, NAT64's ``64:ff9b::/96``,
6to4's ``2002::/16``) is judged by the IPv4 address it reaches. Allowances are CIDRs or
host names (``*.example.com`` for the names under it); an allowed name lifts the
"unless allowed" rules for every address it resolves to, never the "always" ones.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

SCHEMES = frozenset({"http", "https"})
ALLOW_SETTING = "STELLWERK_EGRESS_ALLOW"
# Names of cloud metadata services (GCP, AWS, Azure's DNS alias): refused before any
# lookup, so that a resolver that answers them cannot matter.
METADATA_NAMES = frozenset({
    "metadata", "metadata.google.internal", "metadata.goog", "instance-data",
    "instance-data.ec2.internal", "metadata.azure.internal",
})
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_HOST_NAME = re.compile(r"^(\*\.)?([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.?)+$")
_NUMERIC_HOST = re.compile(r"^(0x[0-9a-f]+|[0-9]+)(\.(0x[0-9a-f]+|[0-9]+))*\.?$")


@dataclass(frozen=True)
class Rule:
    """A class of addresses and whether an allowance can lift its refusal."""

    name: str
    networks: tuple[Network, ...]
    always: bool

    def matches(self, address: IPAddress) -> bool:
        """Whether ``address`` is in one of the rule's networks."""
        return any(address in network for network in self.networks)


def _nets(*cidrs: str) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(cidr) for cidr in cidrs)


# Metadata before link-local and private: fd00:ec2::254 (AWS, IPv6) is unique-local,
# 100.100.100.200 (Alibaba) is in CGNAT's range; both must stay refused when allowed.
RULES = (
    Rule("a cloud metadata address", _nets(
        "169.254.169.254/32", "169.254.170.2/32", "fd00:ec2::254/128", "100.100.100.200/32",
    ), always=True),
    Rule("link-local", _nets("169.254.0.0/16", "fe80::/10"), always=True),
    Rule("an unspecified ('this network') address", _nets("0.0.0.0/8", "::/128"),
         always=True),
    Rule("not a unicast address (multicast, reserved or broadcast)",
         _nets("224.0.0.0/4", "240.0.0.0/4", "ff00::/8"), always=True),
    Rule("a loopback address", _nets("127.0.0.0/8", "::1/128"), always=False),
    Rule("a private address", _nets(
        "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "192.0.0.0/24",
        "198.18.0.0/15", "fc00::/7", "fec0::/10",
    ), always=False),
)


@dataclass(frozen=True)
class Refusal:
    """Why a target is refused; ``str()`` is the message users see."""

    target: str
    reason: str
    always: bool

    def __str__(self) -> str:
        """``egress: <target> is <reason>; <what to do>``."""
        if self.always:
            return f"egress: {self.target} is {self.reason}, always refused"
        return f"egress: {self.target} is {self.reason}; allow it with {ALLOW_SETTING}"


class EgressRefused(Exception):
    """A call was not made: its target is refused by the egress policy (permanent)."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(str(refusal))
        self.refusal = refusal


def reached(address: IPAddress) -> IPAddress:
    """The address a connection to ``address`` reaches: the IPv4 one an IPv6 one carries."""
    if isinstance(address, ipaddress.IPv4Address):
        return address
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour or address


def literal_address(host: str) -> IPAddress | None:
    """``host`` as an IP address when it is one (brackets and a zone allowed), else None."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


@dataclass(frozen=True)
class EgressPolicy:
    """What ``STELLWERK_EGRESS_ALLOW`` allows; the rules above are fixed."""

    allowed_networks: tuple[Network, ...] = ()
    allowed_names: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str) -> EgressPolicy:
        """From a comma-separated list of CIDRs, addresses and host names.

        ``ValueError`` names an entry that is none of these, so a typo stops the
        process at start rather than refusing calls later.
        """
        networks: list[Network] = []
        names: set[str] = set()
        for entry in (item.strip().lower() for item in text.split(",")):
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            if not _HOST_NAME.match(entry) or _NUMERIC_HOST.match(entry):
                raise ValueError(f"{ALLOW_SETTING}: {entry!r} is neither a CIDR nor a host name")
            names.add(entry.rstrip("."))
        return cls(tuple(networks), frozenset(names))

    def allows_name(self, host: str) -> bool:
        """Whether ``host`` is allowed by name (exactly, or under a ``*.`` entry)."""
        name = host.lower().rstrip(".")
        return name in self.allowed_names or any(
            entry.startswith("*.") and name.endswith(entry[1:]) for entry in self.allowed_names
        )

    def refusal_of_address(self, address: IPAddress, host: str | None = None) -> Refusal | None:
        """Why a connection to ``address`` (resolved from ``host``) is refused, or None."""
        target = reached(address)
        shown = str(address) if host is None or host == str(address) else (
            f"{host} ({address})"
        )
        for rule in RULES:
            if not rule.matches(target):
                continue
            if rule.always or not self._allows(target, host):
                return Refusal(shown, rule.name, rule.always)
            return None
        return None

    def _allows(self, address: IPAddress, host: str | None) -> bool:
        if host is not None and self.allows_name(host):
            return True
        return any(address in network for network in self.allowed_networks)

    def refusal_of_host(self, host: str) -> Refusal | None:
        """What can be known of ``host`` before a lookup: a literal, or a refused name.

        ``localhost`` (and ``*.localhost``) is loopback by definition (RFC 6761) and
        judged as 127.0.0.1. Other names are judged by what they resolve to, at
        connect time.
        """
        name = host.lower().rstrip(".")
        address = literal_address(name)
        if address is not None:
            return self.refusal_of_address(address)
        if name in METADATA_NAMES:
            return Refusal(host, "a cloud metadata name", always=True)
        if _NUMERIC_HOST.match(name):
            return Refusal(host, "a numeric host that is no canonical IP address", always=True)
        if name == "localhost" or name.endswith(".localhost"):
            return self.refusal_of_address(ipaddress.IPv4Address("127.0.0.1"), host)
        return None

    def refusal_of_url(self, url: str) -> Refusal | None:
        """What can be known of ``url`` without a lookup: its scheme and a literal host."""
        try:
            parts = urlsplit(url)
            host = parts.hostname
        except ValueError:
            return Refusal(url, "no valid URL", always=True)
        if parts.scheme.lower() not in SCHEMES:
            scheme = parts.scheme or "(none)"
            return Refusal(f"scheme {scheme!r}", "not http or https", always=True)
        if not host:
            return Refusal(url, "a URL without a host", always=True)
        return self.refusal_of_host(host)
