"""The native relay (modern/relay/native.py); which requests take it: tests/front/test_planner.py; which pairs
bind: routes/test_binding.py."""

from __future__ import annotations


def test_param_headers_are_the_mcp_param_ones_in_any_case() -> None:
    """The client's `Mcp-Param-*` headers go upstream with a relayed request, whatever their case; nothing
    else does, and a request without any sends no extra header at all (None)."""
    from multidict import CIMultiDict, CIMultiDictProxy

    from proxy.front.modern.relay.native import _param_headers

    headers = CIMultiDictProxy(
        CIMultiDict(
            [
                ("Content-Type", "application/json"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Param-Region", "eu"),
                ("mcp-param-x", "1"),
                ("MCP-PARAM-", "bare"),
                ("Mcp-Params", "no"),
                ("X-Mcp-Param-Y", "no"),
            ]
        )
    )
    assert _param_headers(headers) == {"Mcp-Param-Region": "eu", "mcp-param-x": "1", "MCP-PARAM-": "bare"}
    assert _param_headers(CIMultiDictProxy(CIMultiDict([("Mcp-Method", "tools/call")]))) is None
    # A name that only contains the prefix passes the quick look (one pass over all names) but is not one.
    assert _param_headers(CIMultiDictProxy(CIMultiDict([("X-Mcp-Param-Y", "no")]))) is None
