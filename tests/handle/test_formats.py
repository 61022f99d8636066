"""Every kind of sealed token has its own key-ring version byte (proxy/handle/formats.py), and each module
seals with the one the list gives it: two kinds on one byte would let one be taken for the other."""

from proxy.handle import claims, formats, mirror_ids, relay_state, relay_task, session_ids
from proxy.routes import cursor
from proxy.tasks import ids


def test_every_kind_has_a_byte_of_its_own() -> None:
    values = [v for k, v in vars(formats).items() if k.isupper()]
    assert len(values) == len(set(values)) == 8


def test_each_module_seals_with_its_listed_byte() -> None:
    assert claims.FORMAT_VERSION == formats.CALL_HANDLE
    assert session_ids.SESSION_ID_VERSION == formats.LEGACY_SESSION_ID
    assert ids.TASK_ID_VERSION == formats.TASK_ID
    assert relay_state.RELAY_STATE_VERSION == formats.RELAY_STATE
    assert mirror_ids.MIRROR_SESSION_VERSION == formats.MIRROR_SESSION
    assert mirror_ids.MIRROR_ASK_VERSION == formats.MIRROR_ASK
    assert cursor.CURSOR_VERSION == formats.LIST_CURSOR
    assert relay_task.RELAY_TASK_VERSION == formats.RELAY_TASK
