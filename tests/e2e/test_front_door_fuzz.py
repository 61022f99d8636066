"""The front door under fuzz (issue 29, item 6): whatever a client sends — headers, bodies, bearer tokens,
handles, session ids, forwarded-for lines — the real proxy in front of FastMCP 1.30 never answers 5xx except
the 503s docs/errors.md documents, and never hangs.

Two routes: `/mcp` with `principal.source: jwt_claim` (the proxy reads an unverified JWT) and
`/servers/secure/mcp` in validate mode (the proxy verifies it). The reported attack first: a JWT whose JOSE
header is 5,500 nested `[` was a 500 and a RecursionError traceback per request on both.
"""

from __future__ import annotations

import base64
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oauth_keys import SigningKey, claims, jwks

from e2e.harness import RawClient, RunningProxy, running_proxy
from e2e.oauth_peers import jwks_server
from proxy.auth import challenge
from proxy.config import AuthConfig, FrontConfig, PrincipalConfig, UpstreamConfig

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

ISS = "https://as.example.test"
RESOURCE = "https://mcp.example.test/servers/secure/mcp"
KEY = SigningKey("k1")
# The 503s a client may be given (docs/errors.md): limits and full pools, shutting down, a key not held,
# validate mode without signing keys.
DOCUMENTED_503 = {-31003, -31005, -31012, -32600}
BOUND_S = 30.0


@dataclass
class Door:
    proxy: RunningProxy
    secure: str
    handle: str  # a real requestState, from a call parked by the fuzz principal


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def nested_jwt(depth: int, opener: str = "[") -> str:
    """A compact JWS whose JOSE header opens `depth` arrays (or objects) and never closes them, as the
    report's did (5,500 `[`): the parser recurses before it finds the end. Its header fits aiohttp's
    8,190-byte line up to 6,000 `[` or 1,200 objects."""
    inner = "[" * depth if opener == "[" else '{"a":' * depth
    return f"{b64(inner.encode())}.{b64(json.dumps({'sub': 'alice'}).encode())}.{b64(b'sig')}"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def door(fastmcp_url: str) -> AsyncIterator[Door]:
    async with contextlib.AsyncExitStack() as stack:
        keys = await stack.enter_async_context(jwks_server())
        keys.document = jwks(KEY)
        auth = AuthConfig(
            mode="validate",
            public_url=RESOURCE,
            authorization_servers=(ISS,),
            jwks_url=keys.url,
            jwks_min_refresh_s=0,
        )
        secure = UpstreamConfig(name="secure", url=fastmcp_url, auth=auth)
        proxy = await stack.enter_async_context(
            running_proxy(
                fastmcp_url,
                extra=(secure,),
                principal=PrincipalConfig(source="jwt_claim", claim="sub"),
                front=FrontConfig(client_address_header="X-Forwarded-For"),
            )
        )
        async with aiohttp.ClientSession() as http:
            client = RawClient(proxy.url, http, authorization=f"Bearer {KEY.mint({'sub': 'fuzz'})}")
            parked = await client.call("ask_name")
        handle = parked.result["requestState"]
        yield Door(proxy, proxy.url.replace("/mcp", "/servers/secure/mcp"), handle)


@pytest.mark.parametrize(("opener", "depth"), [("[", 5_500), ("[", 990), ("{", 1_200), ("{", 990)])
async def test_a_deeply_nested_jwt_header_is_401_invalid_token(door: Door, opener: str, depth: int) -> None:
    token = f"Bearer {nested_jwt(depth, opener)}"
    async with aiohttp.ClientSession() as http:
        # validate mode: the proxy is the resource server.
        secure = await RawClient(door.secure, http, authorization=token).call("echo", {"text": "x"})
        assert secure.status == 401
        (bearer,) = challenge.parse(secure.headers["WWW-Authenticate"])
        assert bearer.params["error"] == "invalid_token"
        assert secure.error["code"] == -32600
        # jwt_claim: the proxy only reads the claim; a header it cannot read is refused, never a principal.
        plain = await RawClient(door.proxy.url, http, authorization=token).call("echo", {"text": "x"})
        assert plain.status == 401
        assert "WWW-Authenticate" in plain.headers
        assert plain.error["code"] == -32600


@pytest.mark.parametrize("depth", [252, 253, 990, 1_023, 5_000])
@pytest.mark.parametrize("slot", ["arguments", "_meta", "inputResponses", "params"])
async def test_a_deeply_nested_body_is_answered_at_once(door: Door, depth: int, slot: str) -> None:
    """990 levels in `arguments` parsed, then the call hung until calls.call_timeout_s with a RecursionError
    in the task sending it upstream. Now: 400 -32700 past 254 levels (the whole message), an answer below."""
    async with aiohttp.ClientSession() as http:
        client = RawClient(door.proxy.url, http)
        body = client.body("tools/call", {"name": "echo", "arguments": {"text": "x"}})
        if slot == "arguments":
            body["params"]["arguments"]["deep"] = "DEEP"
        elif slot == "_meta":
            body["params"]["_meta"]["deep"] = "DEEP"
        elif slot == "inputResponses":
            body["params"].update(inputResponses={"k": "DEEP"}, requestState=door.handle)
        else:
            body["params"]["deep"] = "DEEP"
        text = json.dumps(body).replace('"DEEP"', "[" * depth + "1" + "]" * depth)
        async with http.post(
            door.proxy.url,
            data=text.encode(),
            headers=client.headers(body),
            timeout=aiohttp.ClientTimeout(total=BOUND_S),
        ) as resp:
            reply = json.loads(await resp.read())
        assert resp.status < 500, reply
        if depth + 3 > 254 + (slot == "params"):  # the envelope, params and the slot's own object
            assert resp.status == 400
            assert reply["error"]["code"] == -32700
            assert reply["error"]["message"].startswith("Parse error: ")  # too deep, or deeper than it parses
        else:
            assert resp.status == 200


# --- the fuzz -------------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
# hypothesis favours small integers: the depths that matter (around the parsers' and encoders' limits) are
# named, with some others drawn between.
depths = st.sampled_from([1, 64, 253, 254, 255, 990, 1_000, 1_023, 1_025, 1_200, 5_500, 6_000]) | st.integers(
    1, 6_000
)
printable = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40)
segments = st.one_of(
    st.binary(max_size=60).map(b64),
    json_values.map(lambda v: b64(json.dumps(v).encode())),
    depths.map(lambda n: b64(b"[" * n)),
    st.just(b64(b'{"alg":"RS256","kid":"k1"}')),
    st.just(b64(b'{"alg":"none"}')),
    printable,
)


@st.composite
def tokens(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["parts", "nested", "minted", "tampered", "raw"]))
    if kind == "parts":
        return ".".join(draw(st.lists(segments, min_size=1, max_size=4)))
    if kind == "nested":
        opener = draw(st.sampled_from("[{"))
        deep = st.sampled_from([990, 1_025, 1_200] + ([5_500, 6_000] if opener == "[" else []))
        return nested_jwt(draw(deep | depths.filter(lambda n: opener == "[" or n <= 1_200)), opener)
    good = KEY.mint(
        claims(
            iss=ISS,
            aud=RESOURCE,
            **draw(st.dictionaries(st.sampled_from(["sub", "scope", "x"]), json_values, max_size=2)),
        )
    )
    if kind == "minted":
        return good
    if kind == "tampered":
        head, _, sig = good.split(".")
        return ".".join([head, draw(segments), sig])
    return draw(printable)


handles = st.one_of(st.just("HANDLE"), printable, st.binary(max_size=200).map(b64), segments)
header_values = st.one_of(
    st.sampled_from(["2026-07-28", "2025-11-25", "2025-03-26", "tools/call", "echo", "*/*", "=?x?="]),
    printable,
)
forwarded_lines = st.lists(
    st.one_of(
        st.ip_addresses().map(str),
        printable,
        st.lists(st.ip_addresses().map(str), max_size=4).map(", ".join),
    ),
    max_size=3,
)


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, list[tuple[str, str]], bytes]:
    method = draw(st.sampled_from(["POST"] * 6 + ["GET", "DELETE"]))
    route = draw(st.sampled_from(["plain", "secure"]))
    headers: list[tuple[str, str]] = []
    for name in ("Accept", "Content-Type", "MCP-Protocol-Version", "Mcp-Method", "Mcp-Name"):
        if draw(st.booleans()):
            headers.append((name, draw(header_values)))
    if draw(st.integers(0, 7)) == 0:  # a foreign Origin is refused before anything else is looked at
        headers.append(("Origin", draw(header_values)))
    if draw(st.booleans()):
        headers.append(("Authorization", f"Bearer {draw(tokens())}"))
    if draw(st.booleans()):
        headers.append(("Mcp-Session-Id", draw(handles)))
    if draw(st.booleans()):
        headers.append(("Last-Event-ID", draw(printable)))
    headers.extend(("X-Forwarded-For", line) for line in draw(forwarded_lines))
    meta = {
        "io.modelcontextprotocol/protocolVersion": draw(st.sampled_from(["2026-07-28", "2025-06-18", "x"])),
        "io.modelcontextprotocol/clientCapabilities": draw(
            st.one_of(json_values, st.just({"elicitation": {}}))
        ),
    }
    params: dict[str, Any] = {"name": draw(st.sampled_from(["echo", "ask_name", "nope"])), "_meta": meta}
    for key in ("arguments", "inputResponses", "requestState", "cursor", "uri"):
        if draw(st.booleans()):
            params[key] = draw(handles) if key == "requestState" else draw(json_values)
    body_kind = draw(st.sampled_from(["request", "request", "json", "bytes", "deep"]))
    if body_kind == "request":
        body = {
            "jsonrpc": "2.0",
            "id": draw(st.integers() | st.text(max_size=8)),
            "method": draw(st.sampled_from(["tools/call", "tools/list", "initialize", "ping", "x"])),
            "params": params,
        }
        raw = json.dumps(body).encode()
    elif body_kind == "json":
        raw = json.dumps(draw(json_values)).encode()
    elif body_kind == "deep":
        n = draw(depths)
        raw = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":' + (
            b"[" * n + b"]" * n + b"}}"
        )
    else:
        raw = draw(st.binary(max_size=300))
    return method, route, headers, raw


@given(case=requests())
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
async def test_the_front_door_never_answers_5xx_but_documented_503s(
    door: Door, case: tuple[str, str, list[tuple[str, str]], bytes]
) -> None:
    method, route, headers, raw = case
    raw = raw.replace(b'"HANDLE"', json.dumps(door.handle).encode())
    headers = [(k, door.handle if v == "HANDLE" else v) for k, v in headers]
    url = door.proxy.url if route == "plain" else door.secure
    async with (
        aiohttp.ClientSession() as http,
        http.request(
            method,
            url,
            data=raw if method == "POST" else None,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=BOUND_S),
        ) as resp,
    ):
        if resp.content_type == "text/event-stream":
            return  # a legacy GET stream opened on a session id: not an error, and nothing more to read
        payload = await resp.read()
    assert resp.status < 500 or resp.status == 503, (resp.status, payload[:300])
    if resp.status == 503:
        assert json.loads(payload)["error"]["code"] in DOCUMENTED_503, payload[:300]
