from __future__ import annotations

from proxy.auth import challenge
from proxy.auth.gate import AuthGate


def test_parse_bearer_params_quoted_and_token() -> None:
    (c,) = challenge.parse(
        'Bearer error="invalid_token", error_description="The \\"token\\" expired", '
        'scope=files:read, resource_metadata="https://a/.well-known/oauth-protected-resource/mcp"'
    )
    assert c.is_bearer
    assert c.params["error"] == "invalid_token"
    assert c.params["error_description"] == 'The "token" expired'
    assert c.params["scope"] == "files:read"
    assert c.params["resource_metadata"] == "https://a/.well-known/oauth-protected-resource/mcp"


def test_parse_several_challenges_and_token68() -> None:
    found = challenge.parse(
        'Basic realm="x", Bearer realm="mcp", error="insufficient_scope", Negotiate abc=='
    )
    assert [c.scheme for c in found] == ["Basic", "Bearer", "Negotiate"]
    assert found[1].params == {"realm": "mcp", "error": "insufficient_scope"}
    assert found[2].token68 == "abc=="
    assert challenge.bearer(found) is found[1]


def test_parse_is_lenient_on_garbage() -> None:
    assert challenge.parse("") == ()
    assert challenge.parse('Bearer error="unterminated')[0].scheme == "Bearer"
    assert challenge.parse("=== ,,,") == ()


def test_build_quotes_and_strips_control_characters() -> None:
    header = challenge.build(
        {"error": "invalid_token", "error_description": 'bad "x"\r\nInjected: 1', "scope": None}
    )
    assert header == 'Bearer error="invalid_token", error_description="bad \\"x\\"Injected: 1"'
    assert "\r" not in header and "\n" not in header
    assert challenge.build({}) == "Bearer"


def test_relayed_keeps_error_and_scope_and_points_at_the_proxy() -> None:
    upstream = (
        'Bearer error="insufficient_scope", scope="files:write", '
        'resource_metadata="http://10.0.0.5:8000/.well-known/oauth-protected-resource/mcp"'
    )
    out = challenge.parse(AuthGate.relayed(upstream, "https://mcp.example.com/servers/files/mcp"))[0]
    assert out.params == {
        "error": "insufficient_scope",
        "resource_metadata": "https://mcp.example.com/.well-known/oauth-protected-resource/servers/files/mcp",
        "scope": "files:write",
    }
    bare = challenge.parse(AuthGate.relayed(None, "https://p/mcp"))[0]
    assert bare.params == {"resource_metadata": "https://p/.well-known/oauth-protected-resource/mcp"}
