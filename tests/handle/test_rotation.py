"""Staged rotation: which key seals, by role and by how long it has been loadable."""

from __future__ import annotations

import pytest

from proxy.handle import HandleError, Key, KeyRing
from proxy.handle.rotation import Rotation, StagedKey, choose_sealing, role_of

OLD, NEW, OTHER = Key.generate(), Key.generate(), Key.generate()


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("0-current", "current"),
        ("current", "current"),
        ("1-previous", "previous"),
        ("2-next", "next"),
        ("next", "next"),
        ("MRTR_PROXY_KEY_NEXT", "next"),
        ("key.previous", "previous"),
        ("0-key", "key"),
        ("nextcloud", "key"),
        ("my-key", "key"),
    ],
)
def test_role_of(name: str, role: str) -> None:
    assert role_of(name) == role


def test_a_next_key_unseals_but_never_seals_without_promotion() -> None:
    keys = [StagedKey.of("0-current", OLD), StagedKey.of("2-next", NEW)]
    assert choose_sealing(keys, {}, None) == OLD.kid
    rotation = Rotation(None)
    ring = rotation.ring(keys, now=0.0)
    assert ring.sealing_kid == OLD.kid
    # a handle another replica sealed with the staged key opens here
    assert ring.unseal(KeyRing([NEW]).seal(b"x", version=1)) == (1, b"x")
    assert rotation.due(ring, now=10_000.0) is None  # never promoted by itself


def test_the_operator_promotes_by_renaming() -> None:
    rotation = Rotation(None)
    ring = rotation.ring([StagedKey.of("0-current", NEW), StagedKey.of("1-previous", OLD)], now=0.0)
    assert ring.sealing_kid == NEW.kid
    assert ring.unseal(KeyRing([OLD]).seal(b"y", version=1)) == (1, b"y")


def test_previous_seals_only_when_nothing_else_can() -> None:
    assert choose_sealing([StagedKey.of("1-previous", OLD), StagedKey.of("2-next", NEW)], {}, None) == OLD.kid
    assert choose_sealing([StagedKey.of("2-next", NEW)], {}, None) == NEW.kid


def test_automatic_promotion_of_next_after_the_delay() -> None:
    rotation = Rotation(30.0)
    ring = rotation.ring([StagedKey.of("0-current", OLD)], now=0.0)
    ring = rotation.ring([StagedKey.of("0-current", OLD), StagedKey.of("next", NEW)], now=100.0)
    assert ring.sealing_kid == OLD.kid
    assert rotation.due(ring, now=129.0) is None
    promoted = rotation.due(ring, now=130.0)
    assert promoted is not None and promoted.sealing_kid == NEW.kid
    assert set(promoted.kids) == {OLD.kid, NEW.kid}


def test_with_a_delay_a_one_step_rotation_waits_for_the_new_key_to_propagate() -> None:
    rotation = Rotation(30.0)
    ring = rotation.ring([StagedKey.of("0-current", OLD)], now=0.0)
    # the documented one-step rename reaches this replica: the new key must not seal yet
    ring = rotation.ring([StagedKey.of("0-current", NEW), StagedKey.of("1-previous", OLD)], now=50.0)
    assert ring.sealing_kid == OLD.kid
    later = rotation.due(ring, now=80.0)
    assert later is not None and later.sealing_kid == NEW.kid


def test_a_key_that_goes_away_waits_the_whole_delay_again() -> None:
    rotation = Rotation(30.0)
    rotation.ring([StagedKey.of("0-current", OLD)], now=0.0)
    rotation.ring([StagedKey.of("0-current", OLD), StagedKey.of("next", NEW)], now=10.0)
    rotation.ring([StagedKey.of("0-current", OLD)], now=20.0)
    ring = rotation.ring([StagedKey.of("0-current", OLD), StagedKey.of("next", NEW)], now=45.0)
    assert rotation.due(ring, now=60.0) is None  # 15 s loadable since it came back, not 50


def test_at_start_up_nothing_has_propagated_and_the_first_candidate_seals() -> None:
    ring = Rotation(30.0).ring([StagedKey.of("0-current", OLD), StagedKey.of("next", NEW)], now=0.0)
    assert ring.sealing_kid == OLD.kid


def test_describe_names_roles_and_never_the_secret() -> None:
    rotation = Rotation(30.0)
    ring = rotation.ring([StagedKey.of("0-current", OLD), StagedKey.of("next", NEW)], now=0.0)
    rows = rotation.describe(ring, now=5.0)
    assert rows[0] == {
        "key_id": OLD.kid,
        "name": "0-current",
        "role": "current",
        "sealing": True,
        "loadable_s": 5.0,
    }
    assert rows[1]["role"] == "next" and rows[1]["sealing"] is False
    assert OLD.secret.hex() not in repr(rows)


def test_a_sealing_id_outside_the_ring_is_refused() -> None:
    with pytest.raises(ValueError, match="not in the ring"):
        KeyRing([OLD], sealing=NEW.kid)


def test_unknown_key_is_its_own_reason() -> None:
    token = KeyRing([OTHER]).seal(b"z", version=1)
    with pytest.raises(HandleError) as info:
        KeyRing([OLD, NEW]).unseal(token)
    assert info.value.reason == "unknown_key"


def test_a_sealing_key_gone_too_early_keeps_sealing_until_another_propagated() -> None:
    rotation = Rotation(30.0)
    rotation.ring([StagedKey.of("0-current", OLD)], now=0.0)
    # a non-atomic update: for a moment only the new key is in the files
    ring = rotation.ring([StagedKey.of("0-current", NEW)], now=100.0)
    assert ring.sealing_kid == OLD.kid
    assert set(ring.kids) == {OLD.kid, NEW.kid}
    assert rotation.retained is not None
    # the rest of the update arrives: the old key is back as previous
    ring = rotation.ring([StagedKey.of("0-current", NEW), StagedKey.of("1-previous", OLD)], now=101.0)
    assert rotation.retained is None and ring.sealing_kid == OLD.kid
    promoted = rotation.due(ring, now=130.0)
    assert promoted is not None and promoted.sealing_kid == NEW.kid


def test_a_retained_key_goes_once_a_loaded_key_has_propagated() -> None:
    rotation = Rotation(30.0)
    rotation.ring([StagedKey.of("0-current", OLD)], now=0.0)
    ring = rotation.ring([StagedKey.of("0-current", NEW)], now=100.0)
    later = rotation.due(ring, now=131.0)
    assert later is not None and later.kids == (NEW.kid,) and later.sealing_kid == NEW.kid
    assert rotation.retained is None


def test_without_a_delay_nothing_is_retained() -> None:
    rotation = Rotation(None)
    rotation.ring([StagedKey.of("0-current", OLD)], now=0.0)
    ring = rotation.ring([StagedKey.of("0-current", NEW)], now=1.0)
    assert ring.kids == (NEW.kid,)


def test_a_new_key_soon_after_start_up_still_waits_for_the_delay() -> None:
    """Nothing has been loadable for the delay yet (the process just started): the key sealing now keeps
    sealing, rather than the newest candidate."""
    rotation = Rotation(30.0)
    ring = rotation.ring([StagedKey.of("0-current", OLD)], now=0.0)
    ring = rotation.ring([StagedKey.of("0-current", NEW), StagedKey.of("1-previous", OLD)], now=5.0)
    assert ring.sealing_kid == OLD.kid
    assert rotation.due(ring, now=30.0) is None  # OLD qualifies (30 s), NEW not yet: OLD is previous
    promoted = rotation.due(ring, now=35.0)
    assert promoted is not None and promoted.sealing_kid == NEW.kid
