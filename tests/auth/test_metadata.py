from __future__ import annotations

from proxy.auth import metadata
from proxy.config import AuthConfig


def test_resource_url_prefers_upstream_then_listen_then_request() -> None:
    assert metadata.resource_url(
        AuthConfig(public_url="https://x.example/a/mcp"), "https://p", "/mcp", "http://h"
    ) == ("https://x.example/a/mcp")
    assert metadata.resource_url(AuthConfig(), "https://p.example/", "/servers/s/mcp", "http://h") == (
        "https://p.example/servers/s/mcp"
    )
    assert metadata.resource_url(AuthConfig(), None, "/mcp", "http://127.0.0.1:1") == "http://127.0.0.1:1/mcp"


def test_metadata_url_is_path_suffixed_per_rfc9728() -> None:
    assert metadata.metadata_url("https://p/mcp") == "https://p/.well-known/oauth-protected-resource/mcp"
    assert metadata.metadata_url("https://p") == "https://p/.well-known/oauth-protected-resource"
    assert metadata.upstream_metadata_urls("http://u:8/mcp") == (
        "http://u:8/.well-known/oauth-protected-resource/mcp",
        "http://u:8/.well-known/oauth-protected-resource",
    )


def test_documents() -> None:
    assert metadata.rewritten(
        {"resource": "http://u/mcp", "authorization_servers": ["a"]}, "https://p/mcp"
    ) == {
        "resource": "https://p/mcp",
        "authorization_servers": ["a"],
    }
    auth = AuthConfig(mode="validate", authorization_servers=("https://as",), required_scopes=("mcp",))
    assert metadata.generated(auth, "https://p/mcp") == {
        "resource": "https://p/mcp",
        "authorization_servers": ["https://as"],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["mcp"],
    }
    assert (
        metadata.same_origin("https://A.example/x", "https://a.example:443/y") is False
    )  # explicit port differs
    assert metadata.same_origin("http://a:1/x", "http://a:1/y")
