"""The client's address from the TCP peer or the ingress's header: every line of it as one list (RFC 9110
§5.3), the entry `front.trusted_hops` from the end (issue 29, item 7). The attack itself, on the real proxy:
tests/e2e/test_client_address.py."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict

from proxy.front.address import AddressSource, normalise, pick


def address(source: AddressSource, *lines: tuple[str, str], peer: str = "10.1.1.1") -> str:
    request = make_mocked_request("POST", "/mcp", headers=CIMultiDict(lines))
    request = request.clone(remote=peer)
    return source.of(request)


XFF = AddressSource("X-Forwarded-For")


def test_no_header_configured_is_the_tcp_peer() -> None:
    assert address(AddressSource(), ("X-Forwarded-For", "6.6.6.6")) == "10.1.1.1"
    assert address(XFF) == "10.1.1.1"  # nothing sent: the peer


@pytest.mark.parametrize(
    ("lines", "hops", "expected"),
    [
        # nginx ($proxy_add_x_forwarded_for) and Envoy append to the client's own line
        ([("X-Forwarded-For", "6.6.6.6, 203.0.113.9")], 1, "203.0.113.9"),
        # HAProxy's `option forwardfor` adds a line of its own after the client's: the reported bypass
        ([("X-Forwarded-For", "6.6.6.6"), ("X-Forwarded-For", "203.0.113.9")], 1, "203.0.113.9"),
        ([("X-Forwarded-For", "6.6.6.6, 7.7.7.7"), ("X-Forwarded-For", "203.0.113.9")], 1, "203.0.113.9"),
        # ingress-nginx by default replaces the header with what it saw: one entry
        ([("X-Forwarded-For", "203.0.113.9")], 1, "203.0.113.9"),
        # a cloud load balancer, then the ingress: the entry two from the end
        ([("X-Forwarded-For", "6.6.6.6, 203.0.113.9"), ("X-Forwarded-For", "10.0.0.2")], 2, "203.0.113.9"),
        # fewer entries than hops: the leftmost, the one a trusted proxy wrote
        ([("X-Forwarded-For", "203.0.113.9")], 3, "203.0.113.9"),
        # ports, brackets and spelling do not make a new client
        ([("X-Forwarded-For", "203.0.113.9:51000")], 1, "203.0.113.9"),
        ([("X-Forwarded-For", "[2001:DB8::0:1]:443")], 1, "2001:db8::1"),
        ([("X-Forwarded-For", "2001:db8:0::1")], 1, "2001:db8::1"),
    ],
)
def test_x_forwarded_for_lines_are_one_list(lines: list[tuple[str, str]], hops: int, expected: str) -> None:
    assert address(AddressSource("X-Forwarded-For", hops), *lines) == expected


def test_forwarded_rfc_7239_for_parameters_across_lines() -> None:
    source = AddressSource("Forwarded")
    spoof = ("Forwarded", "for=6.6.6.6;proto=https")
    assert address(source, spoof, ("Forwarded", 'for="[2001:db8:cafe::17]:4711";by=10.0.0.1')) == (
        "2001:db8:cafe::17"
    )
    assert address(source, ("Forwarded", "for=6.6.6.6, for=192.0.2.43")) == "192.0.2.43"
    assert address(AddressSource("Forwarded", 2), ("Forwarded", "for=6.6.6.6, for=192.0.2.43")) == "6.6.6.6"


def test_x_real_ip_a_single_address_header() -> None:
    source = AddressSource("X-Real-IP")
    assert address(source, ("X-Real-IP", "198.51.100.4")) == "198.51.100.4"
    assert address(source, ("X-Real-IP", "6.6.6.6"), ("X-Real-IP", "198.51.100.4")) == "198.51.100.4"


def test_an_empty_entry_falls_back_to_the_peer_and_junk_is_bounded() -> None:
    assert address(XFF, ("X-Forwarded-For", "6.6.6.6, ")) == "10.1.1.1"
    assert pick([], 1) == ""
    assert normalise(" unknown ") == "unknown"
    assert normalise("x" * 500) == "x" * 64
    assert normalise("fe80::1%eth0") == "fe80::1"
