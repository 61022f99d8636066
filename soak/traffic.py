"""The kinds of traffic the soak drives, each one request sequence whose every answer is classified: an
expected result or an expected JSON-RPC error (its code named) gives an outcome label; anything else raises
Unexpected with what came back, and fails the soak."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from soak import wire

INVALID_PARAMS = -32602  # a forged requestState: refused before anything goes upstream
KEY_NOT_HELD = -31012  # a well-formed call handle sealed with a key this replica does not hold
UPSTREAM_FAILED = -31001  # the upstream is down (the restart's outage only)
BIG_ARGUMENT = 200 * 1024
HANGUP_AFTER_S = 0.3  # the client goes away this long into a call that takes SLOW_S
SLOW_S = 3.0
TIMEOUT_S = 30.0  # no answer in this long is itself unexpected


class Unexpected(Exception):
    """An answer the soak did not expect: what was asked and what came back."""


@dataclass
class Ctx:
    http: aiohttp.ClientSession
    url: str  # the proxy's /mcp
    principal: str  # each worker is one user (its own Authorization)
    n: int  # this worker's request count, to make every argument distinct


def _result(answer: wire.Answer, what: str) -> dict[str, Any]:
    message = answer.message
    if answer.status != 200 or message is None or not isinstance(message.get("result"), dict):
        raise Unexpected(f"{what}: {answer.describe()}")
    result: dict[str, Any] = message["result"]
    return result


def _error_code(answer: wire.Answer, what: str, expected: int, status: int = 200) -> int:
    message = answer.message or {}
    error = message.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    if answer.status != status or code != expected:
        raise Unexpected(f"{what}: expected HTTP {status} error {expected}, got {answer.describe()}")
    return expected


async def _call(ctx: Ctx, name: str, arguments: dict[str, Any], **extra: Any) -> wire.Answer:
    body, headers = wire.modern("tools/call", {"name": name, "arguments": arguments, **extra}, ctx.principal)
    return await wire.post(ctx.http, ctx.url, body, headers, TIMEOUT_S)


def _text(result: dict[str, Any], what: str, expected: str) -> None:
    got = wire.text_of(result)
    if result.get("isError") or got != expected:
        shown = got if got is None or len(got) < 200 else f"{got[:80]}… ({len(got)} chars)"
        raise Unexpected(
            f"{what}: expected text {expected[:80]!r}, got {shown!r} (isError={result.get('isError')})"
        )


async def passthrough(ctx: Ctx) -> str:
    text = f"soak-{ctx.principal}-{ctx.n}"
    _text(_result(await _call(ctx, "echo", {"text": text}), "echo"), "echo", text)
    return "result"


async def tools_list(ctx: Ctx) -> str:
    body, headers = wire.modern("tools/list", {}, ctx.principal)
    result = _result(await wire.post(ctx.http, ctx.url, body, headers, TIMEOUT_S), "tools/list")
    names = {tool.get("name") for tool in result.get("tools", [])}
    if not {"echo", "ask_name", "slow_echo"} <= names:
        raise Unexpected(
            f"tools/list: echo, ask_name, slow_echo not all listed: {sorted(map(str, names))[:20]}"
        )
    return "result"


# The MRTR tools and what each returns once answered as wire.answer_input answers (the name is the worker's).
MRTR_TOOLS: tuple[tuple[str, dict[str, Any], Callable[[str], str]], ...] = (
    ("ask_name", {}, lambda who: f"accept:{who}"),
    ("two_questions", {}, lambda who: f"accept:{who}|accept:{who}"),
    ("sample_inline", {"prompt": "p"}, lambda who: f"sampled-{who}"),
    ("roots_inline", {}, lambda who: f"file:///soak/{who}"),
)


async def mrtr_completed(ctx: Ctx) -> str:
    """An MRTR call answered round after round until its result (at most 4 rounds)."""
    name, arguments, expect = MRTR_TOOLS[ctx.n % len(MRTR_TOOLS)]
    who = f"{ctx.principal}-{ctx.n}"
    extra: dict[str, Any] = {}
    for rounds in range(1, 5):
        result = _result(await _call(ctx, name, arguments, **extra), f"{name} round {rounds}")
        if result.get("resultType") != "input_required":
            _text(result, f"{name} after {rounds} rounds", expect(who))
            return f"result after {rounds} rounds"
        requests = result.get("inputRequests")
        state = result.get("requestState")
        if not isinstance(requests, dict) or not requests or not isinstance(state, str):
            raise Unexpected(f"{name} round {rounds}: input_required without requests/state: {result}")
        responses = {key: wire.answer_input(request, who) for key, request in requests.items()}
        extra = {"inputResponses": responses, "requestState": state}
    raise Unexpected(f"{name}: still input_required after 4 rounds")


async def mrtr_abandoned(ctx: Ctx) -> str:
    """Round one, then the client never comes back: the call stays parked until calls.parked_ttl_s."""
    result = _result(await _call(ctx, "ask_name", {}), "ask_name (abandoned)")
    if result.get("resultType") != "input_required" or not isinstance(result.get("requestState"), str):
        raise Unexpected(f"ask_name (abandoned): expected input_required, got {result}")
    return "input_required, left parked"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _tampered(state: str) -> str:
    """A real requestState with one bit of its sealed part flipped (its clear header kept)."""
    raw = bytearray(base64.urlsafe_b64decode(state + "=" * (-len(state) % 4)))
    raw[len(raw) // 2] ^= 0x01
    return _b64(bytes(raw))


async def _retry_with(ctx: Ctx, state: str) -> wire.Answer:
    responses = {"q": {"action": "accept", "content": {"name": "mallory"}}}
    return await _call(ctx, "ask_name", {}, inputResponses=responses, requestState=state)


async def forged_state(ctx: Ctx) -> str:
    """A retry carrying a requestState nobody sealed, three ways (proxy/handle/keyring.py's token layout:
    a version byte, an 8-byte key id, nonce, sealed claims):
    - garbage that is no call handle: -32602, nothing runs upstream;
    - a real round's requestState with a bit flipped: -32602, and the real one still completes after it;
    - a call handle's header naming a key this replica does not hold: -31012 with HTTP 503 (another
      replica may hold it)."""
    variant = ctx.n % 3
    if variant == 0:
        forged = _b64(b"\xee" + os.urandom(48 + ctx.n % 64))
        answer = await _retry_with(ctx, forged)
        return f"garbage: error {_error_code(answer, 'garbage requestState', INVALID_PARAMS)}"
    if variant == 2:
        forged = _b64(b"\x01" + os.urandom(8 + 12 + 40))
        answer = await _retry_with(ctx, forged)
        return (
            f"unknown key: error {_error_code(answer, 'unknown-key requestState', KEY_NOT_HELD, status=503)}"
        )
    first = _result(await _call(ctx, "ask_name", {}), "ask_name (to tamper with)")
    state, requests = first.get("requestState"), first.get("inputRequests")
    if not isinstance(state, str) or not isinstance(requests, dict):
        raise Unexpected(f"ask_name (to tamper with): expected input_required, got {first}")
    code = _error_code(await _retry_with(ctx, _tampered(state)), "tampered requestState", INVALID_PARAMS)
    who = f"{ctx.principal}-{ctx.n}"
    responses = {key: wire.answer_input(request, who) for key, request in requests.items()}
    answer = await _call(ctx, "ask_name", {}, inputResponses=responses, requestState=state)
    _text(
        _result(answer, "ask_name after the tampered retry"),
        "ask_name after the tampered retry",
        f"accept:{who}",
    )
    return f"tampered: error {code}, then the real round completed"


async def big_argument(ctx: Ctx) -> str:
    text = f"{ctx.n}:" + "x" * BIG_ARGUMENT
    _text(_result(await _call(ctx, "echo", {"text": text}), "200 KB echo"), "200 KB echo", text)
    return "result"


async def hangup(ctx: Ctx) -> str:
    """The client goes away while the call runs upstream: no answer is read; the proxy must let go of it."""
    try:
        answer = await asyncio.wait_for(
            _call(ctx, "slow_echo", {"text": "never read", "delay_s": SLOW_S}), HANGUP_AFTER_S
        )
    except TimeoutError:
        return "hung up"
    raise Unexpected(f"slow_echo answered within {HANGUP_AFTER_S}s: {answer.describe()}")


async def _legacy(ctx: Ctx, close: bool) -> str:
    """A legacy client: initialize, initialized, a call; then DELETE, or leave it for pool.idle_ttl_s."""
    init = await wire.post(
        ctx.http, ctx.url, wire.legacy_initialize(), wire.legacy_headers(ctx.principal, None), TIMEOUT_S
    )
    _result(init, "legacy initialize")
    if init.session is None:
        raise Unexpected(f"legacy initialize without Mcp-Session-Id: {init.describe()}")
    headers = wire.legacy_headers(ctx.principal, init.session)
    notify = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    limit = aiohttp.ClientTimeout(total=TIMEOUT_S)
    async with ctx.http.post(ctx.url, json=notify, headers=headers, timeout=limit) as resp:
        if resp.status != 202:
            raise Unexpected(
                f"legacy notifications/initialized: HTTP {resp.status} {(await resp.text())[:200]}"
            )
    text = f"legacy-{ctx.principal}-{ctx.n}"
    call = wire.legacy_request("tools/call", {"name": "echo", "arguments": {"text": text}})
    _text(
        _result(await wire.post(ctx.http, ctx.url, call, headers, TIMEOUT_S), "legacy echo"),
        "legacy echo",
        text,
    )
    if not close:
        return "result, session left open"
    async with ctx.http.delete(ctx.url, headers=headers, timeout=limit) as resp:
        if resp.status not in (200, 204):
            raise Unexpected(f"legacy DELETE: HTTP {resp.status} {(await resp.text())[:200]}")
    return "result, session closed"


async def legacy_closed(ctx: Ctx) -> str:
    return await _legacy(ctx, close=True)


async def legacy_open(ctx: Ctx) -> str:
    return await _legacy(ctx, close=False)


async def two_at_once(ctx: Ctx) -> str:
    """Two calls at once: the principal's pool then holds (at least) two upstream sessions."""
    texts = [f"pair-{ctx.principal}-{ctx.n}-{i}" for i in range(2)]
    answers = await asyncio.gather(*(_call(ctx, "slow_echo", {"text": t, "delay_s": 0.3}) for t in texts))
    for text, answer in zip(texts, answers, strict=True):
        _text(_result(answer, "slow_echo (two at once)"), "slow_echo (two at once)", text)
    return "results"


async def during_outage(ctx: Ctx) -> str:
    """A call while the upstream is down (the restart): the expected answer is -31001, nothing else."""
    answer = await _call(ctx, "echo", {"text": "outage"})
    return f"error {_error_code(answer, 'echo during the outage', UPSTREAM_FAILED)}"


Kind = Callable[[Ctx], Awaitable[str]]
# One cycle of a worker's traffic: mostly plain calls, every other kind in it at least once.
MIX: tuple[tuple[str, Kind], ...] = (
    ("pass-through", passthrough),
    ("mrtr completed", mrtr_completed),
    ("pass-through", passthrough),
    ("tools/list", tools_list),
    ("mrtr abandoned", mrtr_abandoned),
    ("pass-through", passthrough),
    ("hang-up", hangup),
    ("mrtr completed", mrtr_completed),
    ("forged requestState", forged_state),
    ("200 KB argument", big_argument),
    ("pass-through", passthrough),
    ("legacy closed", legacy_closed),
    ("mrtr completed", mrtr_completed),
    ("legacy open", legacy_open),
)
