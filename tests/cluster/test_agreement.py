"""Judging whether the peers hold this replica's keys (pure part of proxy/cluster/agreement.py)."""

from __future__ import annotations

from proxy.cluster.agreement import PeerKeys, assess
from proxy.handle import Key, KeyRing

K, NEXT, WRONG = Key.generate(), Key.generate(), Key.generate()
RING = KeyRing([K, NEXT])


def peer(name: str, *keys: Key, sealing: Key | None = None) -> PeerKeys:
    return PeerKeys(name, tuple(k.kid for k in keys), (sealing or keys[0]).kid)


def test_no_peer_answering_is_alone() -> None:
    assert assess(RING, [PeerKeys("a:1", problem="unreachable: X")]).verdict == "alone"
    assert assess(RING, []).verdict == "alone"


def test_same_keys_agree_even_mid_rotation() -> None:
    # one peer has promoted NEXT already; both hold both keys
    verdict = assess(RING, [peer("a:1", K, NEXT), peer("b:1", NEXT, K)])
    assert verdict.verdict == "agrees"


def test_the_odd_replica_out_sees_a_mismatch() -> None:
    wrong = KeyRing([WRONG])
    verdict = assess(wrong, [peer("a:1", K, NEXT), peer("b:1", K, NEXT)])
    assert verdict.verdict == "mismatch"
    assert verdict.lacking_ours == ("a:1", "b:1")
    assert verdict.theirs_unknown == ("a:1", "b:1")


def test_the_healthy_ones_see_only_a_minority_differ() -> None:
    verdict = assess(RING, [peer("a:1", K, NEXT), peer("w:1", WRONG)])
    assert verdict.verdict == "differs"
    assert verdict.lacking_ours == ("w:1",)
    detail = verdict.detail()
    assert detail["agreement"] == "differs"
    assert detail["peers"]["w:1"] == {"key_ids": [WRONG.kid], "sealing": WRONG.kid}


def test_a_peer_that_cannot_verify_us_counts_as_lacking_our_key() -> None:
    no_common = PeerKeys("w:1", (WRONG.kid,), WRONG.kid, problem="no key in common", started_at=100.0)
    assert assess(RING, [no_common, peer("a:1", K)]).verdict == "differs"


def test_two_replicas_that_disagree_the_newer_one_is_the_odd_one() -> None:
    """A tie (one against one): the replica that started later loses; the other has been serving."""
    older = PeerKeys("a:1", (K.kid,), K.kid, started_at=100.0)
    newer = PeerKeys("w:1", (WRONG.kid,), WRONG.kid, started_at=200.0)
    assert assess(KeyRing([WRONG]), [older], started_at=200.0).verdict == "mismatch"
    assert assess(RING, [newer], started_at=100.0).verdict == "differs"
    unknown_age = PeerKeys("w:1", (WRONG.kid,), WRONG.kid)
    assert assess(RING, [unknown_age], started_at=100.0).verdict == "differs"  # no proof it is older


def test_a_peer_sealing_with_a_key_we_lack_is_reported() -> None:
    verdict = assess(KeyRing([K]), [peer("a:1", NEXT, K, sealing=NEXT)])
    assert verdict.verdict == "differs"
    assert verdict.theirs_unknown == ("a:1",)
