"""WWW-Authenticate parameters and RFC 9728 metadata locations (pure)."""

from __future__ import annotations

from proxy.probe.authinfo import challenge_params, metadata_urls, same_resource

FASTMCP = (
    'Bearer error="invalid_token", error_description="Authentication required", '
    'resource_metadata="http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp"'
)


def test_challenge_params() -> None:
    assert challenge_params(FASTMCP) == {
        "error": "invalid_token",
        "error_description": "Authentication required",
        "resource_metadata": "http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp",
    }
    assert challenge_params('Bearer realm=x, scope="a b", Error="q\\"uote"') == {
        "realm": "x",
        "scope": "a b",
        "error": 'q"uote',
    }


def test_metadata_urls_pointed_then_path_suffixed_then_root() -> None:
    assert metadata_urls("http://h:1/mcp", "Bearer") == [
        "http://h:1/.well-known/oauth-protected-resource/mcp",
        "http://h:1/.well-known/oauth-protected-resource",
    ]
    assert metadata_urls("http://h:1/mcp", 'Bearer resource_metadata="https://m/x"')[0] == "https://m/x"
    assert metadata_urls("http://h:1/", "Bearer") == ["http://h:1/.well-known/oauth-protected-resource"]
    assert len(metadata_urls("http://127.0.0.1:9/mcp", FASTMCP)) == 2  # the pointed one is the suffixed one


def test_same_resource() -> None:
    assert same_resource("http://127.0.0.1:9/mcp", "http://127.0.0.1:9/mcp")
    assert same_resource("HTTP://Host:9/mcp/", "http://host:9/mcp")
    assert not same_resource("http://h:9/mcp", "http://h:9/other")
    assert not same_resource("http://h:9/mcp", "http://evil:9/mcp")
    assert not same_resource("http://h:9/mcp", None)
