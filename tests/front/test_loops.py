"""front/loops.py: this proxy's Via entry, and the refusal of a request that has been here before."""

from __future__ import annotations

import pytest

from proxy.front.checks import Refusal
from proxy.front.loops import LONG_VIA, LOOP, LOOP_STATUS, MAX_VIA, Hop


def test_own_entry_is_added_to_what_came() -> None:
    hop = Hop("mrtr-proxy-aaaaaaaaaaaa")
    assert hop.via(None) == "1.1 mrtr-proxy-aaaaaaaaaaaa"
    assert hop.via("1.1 nginx") == "1.1 nginx, 1.1 mrtr-proxy-aaaaaaaaaaaa"
    other = "1.1 mrtr-proxy-bbbbbbbbbbbb"
    assert hop.via(other) == f"{other}, 1.1 mrtr-proxy-aaaaaaaaaaaa"


@pytest.mark.parametrize(
    "incoming",
    ["1.1 mrtr-proxy-aaaaaaaaaaaa", "1.0 edge, 1.1 mrtr-proxy-aaaaaaaaaaaa, 1.1 mrtr-proxy-bbbbbbbbbbbb"],
)
def test_a_request_that_names_this_proxy_is_a_loop(incoming: str) -> None:
    with pytest.raises(Refusal) as refused:
        Hop("mrtr-proxy-aaaaaaaaaaaa").via(incoming)
    assert refused.value.status == LOOP_STATUS == 508
    assert refused.value.error.code == -32600 and refused.value.error.message == LOOP


def test_a_via_over_the_limit_is_refused() -> None:
    hop = Hop()
    assert hop.via("x" * MAX_VIA).endswith(hop.entry)
    with pytest.raises(Refusal) as refused:
        hop.via("x" * (MAX_VIA + 1))
    assert refused.value.status == 400 and refused.value.error.message == LONG_VIA


def test_each_app_has_its_own_pseudonym() -> None:
    """Two proxies in one process (tests, or a gateway chain run in one) must not take each other for
    themselves."""
    assert Hop().entry != Hop().entry
