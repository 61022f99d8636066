"""The merged list's cursor: sealed, bound to route, list and principal; forged ones are refused."""

from __future__ import annotations

import pytest

from proxy.handle import HandleError, KeyRing
from proxy.routes.cursor import ListPosition, open_cursor, seal_cursor
from proxy.tasks.ids import TASK_ID_VERSION

BOUND = {"route": "fleet", "method": "tools/list", "principal": "alice"}


def test_round_trip_across_replicas_sharing_keys() -> None:
    ring = KeyRing.ephemeral()
    token = seal_cursor(ring, position=ListPosition(2, "upstream-cursor"), **BOUND)
    assert "upstream-cursor" not in token  # opaque: the upstream's cursor is sealed
    assert open_cursor(ring, token, **BOUND) == ListPosition(2, "upstream-cursor")
    assert open_cursor(ring, seal_cursor(ring, position=ListPosition(1), **BOUND), **BOUND) == ListPosition(1)


@pytest.mark.parametrize("field", ["route", "method", "principal"])
def test_a_cursor_for_another_route_list_or_principal_is_refused(field: str) -> None:
    ring = KeyRing.ephemeral()
    token = seal_cursor(ring, position=ListPosition(0, "c"), **BOUND)
    with pytest.raises(HandleError) as info:
        open_cursor(ring, token, **{**BOUND, field: "other"})
    assert info.value.reason == "wrong_target"


@pytest.mark.parametrize("token", ["", "abc", None, 7, "x" * 5000])
def test_garbage_is_refused(token: object) -> None:
    with pytest.raises(HandleError):
        open_cursor(KeyRing.ephemeral(), token, **BOUND)


def test_a_flipped_byte_or_another_key_or_another_kind_of_token_is_refused() -> None:
    ring = KeyRing.ephemeral()
    token = seal_cursor(ring, position=ListPosition(0, "c"), **BOUND)
    flipped = token[:-3] + ("A" if token[-3] != "A" else "B") + token[-2:]
    for bad in (flipped, seal_cursor(KeyRing.ephemeral(), position=ListPosition(0), **BOUND)):
        with pytest.raises(HandleError):
            open_cursor(ring, bad, **BOUND)
    task_id = ring.seal(b'{"r":"fleet","m":"tools/list","p":"alice","i":0,"c":null}', version=TASK_ID_VERSION)
    with pytest.raises(HandleError) as info:
        open_cursor(ring, task_id, **BOUND)
    assert info.value.reason == "unknown_version"
