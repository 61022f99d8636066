"""KeyRing sealing, hostile tokens, and key loading."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.handle import (
    MAX_TOKEN_CHARS,
    HandleError,
    Key,
    KeyLoadError,
    KeyRing,
    derive_kid,
    generate_key_b64,
    load_keys,
    parse_key,
)

SECRET_A = bytes(range(32))
SECRET_B = bytes(range(100, 132))
KEY_A = Key.from_secret(SECRET_A)
KEY_B = Key.from_secret(SECRET_B)
RING = KeyRing([KEY_A])
PLAINTEXT = b'{"hello":"world","n":42}'
TOKEN = RING.seal(PLAINTEXT, version=1)
RAW = base64.urlsafe_b64decode(TOKEN + "=" * (-len(TOKEN) % 4))


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def reason_of(token: object, ring: KeyRing = RING) -> str:
    with pytest.raises(HandleError) as info:
        ring.unseal(token)  # type: ignore[arg-type]
    assert str(info.value) == info.value.reason  # nothing but the reason
    return info.value.reason


# --- keys and rings ----------------------------------------------------------------------------


def test_kid_is_derived_and_stable() -> None:
    assert KEY_A.kid == derive_kid(SECRET_A) == Key.from_secret(bytes(range(32))).kid
    assert len(KEY_A.kid) == 8 and KEY_A.kid != KEY_B.kid
    assert KEY_A.kid.replace("-", "").replace("_", "").isalnum()


def test_key_repr_hides_secret() -> None:
    for text in (repr(KEY_A), str(KEY_A), repr(RING), repr([KEY_A])):
        assert KEY_A.kid in text
        assert repr(SECRET_A) not in text and SECRET_A.hex() not in text and b64(SECRET_A) not in text


def test_key_validation() -> None:
    with pytest.raises(ValueError):
        Key.from_secret(b"short")
    with pytest.raises(ValueError):
        Key(kid="AAAAAAAA", secret=SECRET_A)
    with pytest.raises(ValueError):
        KeyRing([])
    with pytest.raises(ValueError):
        KeyRing([KEY_A, Key.from_secret(SECRET_A)])


def test_round_trip_and_fresh_nonce() -> None:
    assert RING.unseal(TOKEN) == (1, PLAINTEXT)
    assert RING.seal(PLAINTEXT, version=1) != TOKEN
    assert RING.unseal(RING.seal(b"", version=1)) == (1, b"")
    assert RAW[0] == 1 and RAW[1:9] == KEY_A.kid.encode()


def test_rotation() -> None:
    old = KeyRing([KEY_A])
    token = old.seal(PLAINTEXT, version=1)
    rotated = KeyRing([KEY_B, KEY_A])
    assert rotated.kids == (KEY_B.kid, KEY_A.kid)
    assert rotated.unseal(token) == (1, PLAINTEXT)
    new_token = rotated.seal(PLAINTEXT, version=1)
    assert base64.urlsafe_b64decode(new_token + "==")[1:9] == KEY_B.kid.encode()
    assert old.unseal(TOKEN) == (1, PLAINTEXT)
    assert reason_of(new_token, old) == "unknown_key"
    assert reason_of(token, KeyRing([KEY_B])) == "unknown_key"


def test_ephemeral_rings_are_independent() -> None:
    r1, r2 = KeyRing.ephemeral(), KeyRing.ephemeral()
    assert r1.unseal(r1.seal(b"x", version=1)) == (1, b"x")
    assert reason_of(r1.seal(b"x", version=1), r2) == "unknown_key"


def test_versions() -> None:
    t2 = RING.seal(PLAINTEXT, version=2)
    assert reason_of(t2) == "unknown_version"
    assert RING.unseal(t2, versions=(1, 2)) == (2, PLAINTEXT)
    # The version is in the associated data: relabelling a v1 token as v2 fails authentication.
    relabelled = b64(b"\x02" + RAW[1:])
    with pytest.raises(HandleError) as info:
        RING.unseal(relabelled, versions=(1, 2))
    assert info.value.reason == "auth_failed"
    for bad in (-1, 256):
        with pytest.raises(ValueError):
            RING.seal(b"", version=bad)


def test_kid_is_authenticated() -> None:
    ring = KeyRing([KEY_A, KEY_B])
    swapped = b64(RAW[:1] + KEY_B.kid.encode() + RAW[9:])
    assert reason_of(swapped, ring) == "auth_failed"


def test_seal_refuses_oversized_token() -> None:
    with pytest.raises(ValueError):
        RING.seal(b"x" * MAX_TOKEN_CHARS, version=1)


# --- hostile tokens ------------------------------------------------------------------------------


@pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF])
def test_every_byte_flipped(mask: int) -> None:
    for i in range(len(RAW)):
        flipped = bytearray(RAW)
        flipped[i] ^= mask
        expected = "unknown_version" if i == 0 else "unknown_key" if i < 9 else "auth_failed"
        assert reason_of(b64(bytes(flipped))) == expected, i


def test_truncated_at_every_byte_length() -> None:
    for n in range(len(RAW)):
        expected = "too_short" if n < 37 else "auth_failed"
        assert reason_of(b64(RAW[:n])) == expected, n


def expected_for_chars(s: str) -> str:
    """Independent oracle for a prefix of a valid token."""
    if len(s) % 4 == 1:
        return "malformed"
    raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    if b64(raw) != s:
        return "malformed"  # non-zero unused bits: not the canonical spelling
    return "too_short" if len(raw) < 37 else "auth_failed"


def test_truncated_at_every_char_length() -> None:
    for n in range(len(TOKEN)):
        assert reason_of(TOKEN[:n]) == expected_for_chars(TOKEN[:n]), n


HOSTILE: list[tuple[object, str]] = [
    ("", "too_short"),
    ("AAAA", "too_short"),
    ("A" * 52, "unknown_version"),  # 39 zero bytes: version 0
    (b64(b"\x01" + b"ZZZZZZZZ" + bytes(40)), "unknown_key"),
    (b64(b"\x01" + b"\xff" * 8 + bytes(40)), "unknown_key"),
    (b64(RAW + b"\x00"), "auth_failed"),
    (b64(RAW + RAW), "auth_failed"),
    (TOKEN + "A", "malformed" if len(TOKEN) % 4 == 0 else "auth_failed"),
    (TOKEN + "=", "malformed"),
    (TOKEN + "==", "malformed"),
    (TOKEN + "=" * (-len(TOKEN) % 4), "malformed" if len(TOKEN) % 4 else "auth_failed"),
    (base64.b64encode(RAW).decode(), "malformed"),  # standard alphabet with padding
    ("+" + TOKEN[1:], "malformed"),
    ("/" + TOKEN[1:], "malformed"),
    (" " + TOKEN, "malformed"),
    (TOKEN + "\n", "malformed"),
    (TOKEN[:10] + "." + TOKEN[11:], "malformed"),
    ("é" * 60, "malformed"),
    ("\uff21" * 60, "malformed"),  # fullwidth A
    ("\ud800" * 60, "malformed"),  # lone surrogates
    (TOKEN[:20] + "\x00" + TOKEN[21:], "malformed"),
    ("A" * MAX_TOKEN_CHARS, "unknown_version"),
    ("A" * (MAX_TOKEN_CHARS + 1), "too_long"),
    ("é" * (MAX_TOKEN_CHARS + 1), "too_long"),
    ("A" * 10_000_000, "too_long"),
    (None, "malformed"),
    (12345, "malformed"),
    (TOKEN.encode(), "malformed"),
    ({"requestState": TOKEN}, "malformed"),
]


# ids by position: a token is random per process, and pytest-xdist workers must collect the same ids
@pytest.mark.parametrize(("token", "reason"), HOSTILE, ids=[f"{i}-{r}" for i, (_, r) in enumerate(HOSTILE)])
def test_hostile_token(token: object, reason: str) -> None:
    assert reason_of(token) == reason


@given(st.text(max_size=200))
def test_arbitrary_text_only_raises_handle_error(s: str) -> None:
    with pytest.raises(HandleError):
        RING.unseal(s)


@given(st.binary(max_size=200))
def test_arbitrary_bytes_only_raise_handle_error(raw: bytes) -> None:
    with pytest.raises(HandleError) as info:
        RING.unseal(b64(raw))
    assert info.value.reason in {"too_short", "unknown_version", "unknown_key", "auth_failed"}


@given(st.binary(min_size=28, max_size=200))
def test_forged_header_fails_auth(tail: bytes) -> None:
    assert reason_of(b64(b"\x01" + KEY_A.kid.encode() + tail)) == "auth_failed"


def test_error_has_no_plaintext() -> None:
    secret_pt = b"TOP-SECRET-PLAINTEXT"
    token = RING.seal(secret_pt, version=1)
    with pytest.raises(HandleError) as info:
        KeyRing([KEY_B]).unseal(token)
    assert "TOP-SECRET" not in str(info.value) and "TOP-SECRET" not in repr(info.value)


# --- key loading -------------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_parse_key_formats() -> None:
    std = base64.b64encode(SECRET_A).decode()  # with '=' padding
    url = base64.urlsafe_b64encode(SECRET_B).decode().rstrip("=")
    for text in (std, std.rstrip("="), f"  {std}\n", url, url + "=", f"\n{url}\r\n"):
        assert parse_key(text, "x").secret in (SECRET_A, SECRET_B)
    assert parse_key(std.encode(), "x") == KEY_A


def test_generate_key_b64() -> None:
    a, b = generate_key_b64(), generate_key_b64()
    assert a != b and len(a) == 43
    assert len(parse_key(a, "gen").secret) == 32


def test_load_from_files_dirs_env_in_order(tmp_path: Path) -> None:
    secrets = [os.urandom(32) for _ in range(5)]
    f1 = write(tmp_path / "f1", base64.b64encode(secrets[0]).decode() + "\n")
    f2 = write(tmp_path / "f2", b64(secrets[1]))
    d = tmp_path / "d"
    d.mkdir()
    write(d / "b-key", b64(secrets[3]))
    write(d / "a-key", b64(secrets[2]))
    write(d / ".hidden", "not a key")
    (d / "subdir").mkdir()
    env = {"K1": b64(secrets[4]), "EMPTY": "  ", "OTHER": "junk"}
    keys = load_keys(files=[f2, f1], dirs=[d], env=env, env_vars=["K1", "EMPTY", "UNSET"])
    assert [k.secret for k in keys] == [secrets[1], secrets[0], secrets[2], secrets[3], secrets[4]]
    ring = KeyRing(keys)
    assert ring.kids[0] == Key.from_secret(secrets[1]).kid


def test_k8s_secret_layout(tmp_path: Path) -> None:
    s_a, s_b = os.urandom(32), os.urandom(32)
    mount = tmp_path / "keys"
    stamp = mount / "..2024_01_01_00_00_00.123"
    stamp.mkdir(parents=True)
    write(stamp / "key-a", b64(s_a) + "\n")
    write(stamp / "key-b", base64.b64encode(s_b).decode())
    (mount / "..data").symlink_to(stamp.name)
    (mount / "key-a").symlink_to("..data/key-a")
    (mount / "key-b").symlink_to("..data/key-b")
    keys = load_keys(dirs=[mount])
    assert [k.secret for k in keys] == [s_a, s_b]


def test_duplicates_are_kept_once(tmp_path: Path) -> None:
    f = write(tmp_path / "k", b64(SECRET_A))
    keys = load_keys(files=[f, f], env={"K": base64.b64encode(SECRET_A).decode()}, env_vars=["K"])
    assert keys == [KEY_A]


def test_default_env_is_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MRTR_TEST_KEY", b64(SECRET_B))
    assert load_keys(env_vars=["MRTR_TEST_KEY"]) == [KEY_B]
    assert load_keys() == []


BAD_KEYS = [
    ("wrong length", b64(os.urandom(16)), "16 bytes"),
    ("too long", b64(os.urandom(33)), "33 bytes"),
    ("not base64", "this is not base64 at all!!", "not base64"),
    ("inner space", b64(SECRET_A)[:20] + " " + b64(SECRET_A)[20:], "not base64"),
    ("bad padding", b64(SECRET_A) + "===", "not base64"),
    ("padding mid", b64(SECRET_A)[:20] + "=" + b64(SECRET_A)[20:], "not base64"),
    ("non-ascii", "ключ" + b64(SECRET_A), "not base64"),
    ("empty", "   \n", "empty"),
]


@pytest.mark.parametrize(("label", "text", "why"), BAD_KEYS, ids=[b[0] for b in BAD_KEYS])
def test_bad_key_file(tmp_path: Path, label: str, text: str, why: str) -> None:
    path = tmp_path / "badkey"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(KeyLoadError) as info:
        load_keys(files=[path])
    msg = str(info.value)
    assert str(path) in msg and why in msg
    assert (text.strip() or "\x00") not in msg
    assert info.value.__cause__ is None


@pytest.mark.parametrize(("label", "text", "why"), BAD_KEYS, ids=[b[0] for b in BAD_KEYS])
def test_bad_key_env(label: str, text: str, why: str) -> None:
    if not text.strip():
        assert load_keys(env={"MRTR_KEY": text}, env_vars=["MRTR_KEY"]) == []
        return
    with pytest.raises(KeyLoadError) as info:
        load_keys(env={"MRTR_KEY": text}, env_vars=["MRTR_KEY"])
    msg = str(info.value)
    assert "MRTR_KEY" in msg and why in msg and text.strip() not in msg


def test_bad_key_in_dir_names_the_file(tmp_path: Path) -> None:
    write(tmp_path / "good", b64(SECRET_A))
    write(tmp_path / "zbad", "nope")
    with pytest.raises(KeyLoadError) as info:
        load_keys(dirs=[tmp_path])
    assert str(tmp_path / "zbad") in str(info.value)


def test_binary_and_oversized_files(tmp_path: Path) -> None:
    binary = tmp_path / "bin"
    binary.write_bytes(b"\xff\xfe" + SECRET_A)
    big = write(tmp_path / "big", "A" * 5000)
    for path, why in ((binary, "not base64"), (big, "too large")):
        with pytest.raises(KeyLoadError) as info:
            load_keys(files=[path])
        assert str(path) in str(info.value) and why in str(info.value)


def test_missing_and_odd_sources(tmp_path: Path) -> None:
    cases: list[tuple[dict[str, Any], Path, str]] = [
        ({"files": [tmp_path / "missing"]}, tmp_path / "missing", "cannot read"),
        ({"files": [tmp_path]}, tmp_path, ""),
        ({"dirs": [tmp_path / "nodir"]}, tmp_path / "nodir", "cannot list"),
    ]
    empty = tmp_path / "empty"
    empty.mkdir()
    cases.append(({"dirs": [empty]}, empty, "no key files"))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "key").symlink_to("..data/key")
    cases.append(({"dirs": [broken]}, broken / "key", "broken symlink"))
    for kwargs, source, why in cases:
        with pytest.raises(KeyLoadError) as info:
            load_keys(**kwargs)
        assert str(source) in str(info.value) and why in str(info.value), kwargs
