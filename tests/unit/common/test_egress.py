"""The egress policy's pure core: which addresses, names and URLs are refused, and why."""

from __future__ import annotations

import ipaddress

import pytest

from common.config import load_settings
from common.egress import EgressPolicy, Refusal

NONE_ALLOWED = EgressPolicy()
LOOPBACK_ALLOWED = EgressPolicy.parse("127.0.0.0/8, ::1")


def shown(address: str) -> str:
    """How Python writes the address (IPv4-mapped ones differ between versions)."""
    return str(ipaddress.ip_address(address))


def refusal(address: str, policy: EgressPolicy = NONE_ALLOWED) -> Refusal | None:
    return policy.refusal_of_address(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", [
    "169.254.169.254",  # AWS, GCP, Azure, OpenStack metadata
    "169.254.170.2",  # ECS task metadata
    "100.100.100.200",  # Alibaba metadata, inside CGNAT's range
    "fd00:ec2::254",  # AWS metadata over IPv6, inside unique-local
    "::ffff:169.254.169.254",  # IPv4-mapped
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
])
def test_cloud_metadata_addresses_are_always_refused(address: str) -> None:
    found = refusal(address, EgressPolicy.parse("0.0.0.0/0, ::/0"))
    assert found is not None and found.always
    assert "cloud metadata" in str(found) and "always refused" in str(found)


@pytest.mark.parametrize("address", ["169.254.1.1", "fe80::1", "fe80::1%eth0", "febf::1"])
def test_link_local_is_always_refused_even_when_allowed(address: str) -> None:
    found = refusal(address, EgressPolicy.parse("169.254.0.0/16, fe80::/10"))
    assert found is not None
    assert str(found) == f"egress: {shown(address)} is link-local, always refused"


@pytest.mark.parametrize("address", ["0.0.0.0", "0.1.2.3", "::"])
def test_this_network_is_always_refused(address: str) -> None:
    found = refusal(address, EgressPolicy.parse("0.0.0.0/0, ::/0"))
    assert found is not None and found.always and "this network" in found.reason


@pytest.mark.parametrize("address", ["224.0.0.1", "255.255.255.255", "240.0.0.1", "ff02::1"])
def test_what_is_no_unicast_destination_is_always_refused(address: str) -> None:
    found = refusal(address, EgressPolicy.parse("0.0.0.0/0, ::/0"))
    assert found is not None and found.always


@pytest.mark.parametrize("address", ["127.0.0.1", "127.255.0.9", "::1", "::ffff:127.0.0.1"])
def test_loopback_is_refused_unless_allowed(address: str) -> None:
    found = refusal(address)
    assert found is not None and not found.always
    assert str(found) == (f"egress: {shown(address)} is a loopback address; "
                          "allow it with STELLWERK_EGRESS_ALLOW")
    assert refusal(address, LOOPBACK_ALLOWED) is None


@pytest.mark.parametrize("address", [
    "10.0.0.5", "172.16.0.1", "172.31.255.254", "192.168.1.1",
    "100.64.0.1", "100.127.255.254",  # CGNAT (shared address space)
    "192.0.0.8", "198.18.0.1", "fc00::1", "fd12:3456::1", "fec0::1",
    "::ffff:10.0.0.5", "64:ff9b::a00:5", "2002:a00:5::1",  # IPv4 carried in IPv6
])
def test_private_ranges_are_refused_unless_allowed(address: str) -> None:
    found = refusal(address)
    assert found is not None and not found.always
    assert str(found) == (f"egress: {shown(address)} is a private address; "
                          "allow it with STELLWERK_EGRESS_ALLOW")
    everything = EgressPolicy.parse("10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,"
                                    "192.0.0.0/24,198.18.0.0/15,fc00::/7,fec0::/10")
    assert refusal(address, everything) is None


def test_an_allowance_lifts_only_its_own_range() -> None:
    policy = EgressPolicy.parse("10.1.0.0/16")
    assert refusal("10.1.2.3", policy) is None
    assert refusal("10.2.0.1", policy) is not None
    assert refusal("127.0.0.1", policy) is not None


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700::1111",
                                     "172.32.0.1", "100.128.0.1", "11.0.0.1"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert refusal(address) is None


def test_an_allowed_name_lifts_private_rules_for_what_it_resolves_to_but_not_metadata() -> None:
    policy = EgressPolicy.parse("hooks.internal, *.svc.cluster.local")
    private = ipaddress.ip_address("10.0.0.7")
    assert policy.refusal_of_address(private, "hooks.internal") is None
    assert policy.refusal_of_address(private, "HOOKS.internal.") is None
    assert policy.refusal_of_address(private, "api.svc.cluster.local") is None
    assert policy.refusal_of_address(private, "other.internal") is not None
    metadata = ipaddress.ip_address("169.254.169.254")
    assert policy.refusal_of_address(metadata, "hooks.internal") is not None


def test_a_refusal_of_a_resolved_name_names_the_name_and_the_address() -> None:
    found = NONE_ALLOWED.refusal_of_address(ipaddress.ip_address("10.0.0.5"), "db.corp")
    assert str(found) == ("egress: db.corp (10.0.0.5) is a private address; "
                          "allow it with STELLWERK_EGRESS_ALLOW")


@pytest.mark.parametrize("name", ["metadata.google.internal", "METADATA.GOOGLE.INTERNAL.",
                                  "metadata.goog", "metadata", "instance-data"])
def test_metadata_names_are_refused_before_any_lookup(name: str) -> None:
    found = EgressPolicy.parse(name.lower().rstrip(".")).refusal_of_host(name)
    assert found is not None and found.always and "cloud metadata name" in str(found)


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST.", "api.localhost"])
def test_localhost_is_loopback_by_definition(host: str) -> None:
    found = NONE_ALLOWED.refusal_of_host(host)
    assert found is not None and found.reason == "a loopback address"
    assert LOOPBACK_ALLOWED.refusal_of_host(host) is None


@pytest.mark.parametrize("host", ["2130706433", "127.1", "0x7f.0.0.1", "0177.0.0.1"])
def test_numeric_hosts_that_are_no_canonical_address_are_refused(host: str) -> None:
    found = LOOPBACK_ALLOWED.refusal_of_host(host)
    assert found is not None and "canonical" in str(found)


def test_other_names_are_left_to_the_lookup() -> None:
    assert NONE_ALLOWED.refusal_of_host("example.com") is None


@pytest.mark.parametrize(("url", "reason"), [
    ("file:///etc/passwd", "egress: scheme 'file' is not http or https, always refused"),
    ("gopher://example.com/", "egress: scheme 'gopher' is not http or https, always refused"),
    ("ftp://example.com/x", "egress: scheme 'ftp' is not http or https, always refused"),
    ("http://169.254.169.254/latest/meta-data/",
     "egress: 169.254.169.254 is a cloud metadata address, always refused"),
    ("http://[::ffff:169.254.169.254]/", f"egress: {shown('::ffff:169.254.169.254')} is a "
     "cloud metadata address, always refused"),
    ("http://127.0.0.1:8080/api/v1/jobs", "egress: 127.0.0.1 is a loopback address; "
     "allow it with STELLWERK_EGRESS_ALLOW"),
    ("http://[::1]:6379/", "egress: ::1 is a loopback address; "
     "allow it with STELLWERK_EGRESS_ALLOW"),
    ("https://10.0.0.5/hook", "egress: 10.0.0.5 is a private address; "
     "allow it with STELLWERK_EGRESS_ALLOW"),
    ("http://0.0.0.0:6379/", "egress: 0.0.0.0 is an unspecified ('this network') address, "
     "always refused"),
    ("http://metadata.google.internal/computeMetadata/v1/",
     "egress: metadata.google.internal is a cloud metadata name, always refused"),
])
def test_literal_urls_are_judged_without_a_lookup(url: str, reason: str) -> None:
    assert str(NONE_ALLOWED.refusal_of_url(url)) == reason


@pytest.mark.parametrize("url", ["https://example.com/hook", "HTTP://93.184.215.14/",
                                 "http://internal.example/hook"])
def test_urls_with_public_literals_or_names_pass_the_literal_check(url: str) -> None:
    assert NONE_ALLOWED.refusal_of_url(url) is None


def test_parse_takes_cidrs_addresses_and_names() -> None:
    policy = EgressPolicy.parse(" 127.0.0.0/8 ,::1, 10.0.0.9, Hooks.Example.com, *.svc , ")
    assert [str(n) for n in policy.allowed_networks] == [
        "127.0.0.0/8", "::1/128", "10.0.0.9/32"]
    assert policy.allowed_names == {"hooks.example.com", "*.svc"}
    assert EgressPolicy.parse("") == EgressPolicy()


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "not a host", "http://x", "127.1", "a..b"])
def test_parse_refuses_an_entry_that_is_neither_cidr_nor_name(entry: str) -> None:
    with pytest.raises(ValueError, match="STELLWERK_EGRESS_ALLOW"):
        EgressPolicy.parse(entry)


def test_settings_carry_the_policy_and_refuse_a_bad_allowance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("STELLWERK_EGRESS_ALLOW", raising=False)
    assert load_settings().egress == EgressPolicy()
    assert load_settings(egress_allow="127.0.0.0/8").egress.allowed_networks == (
        ipaddress.ip_network("127.0.0.0/8"),)
    with pytest.raises(ValueError, match="neither a CIDR nor a host name"):
        load_settings(egress_allow="10.0.0.0/99")
