"""Text and JSON renderings of findings (pure)."""

from __future__ import annotations

import json

from proxy.probe.findings import Authorization, Check, Findings, Item, Resumability, Session, item_from
from proxy.probe.report import to_json, to_json_text, to_text
from proxy.wire import mcp

URL = "http://127.0.0.1:8000/mcp"
FINDINGS = Findings(
    target=URL,
    transport="streamable-http",
    url=URL,
    transports={"streamable_http": Check("yes", "text/event-stream"), "get_stream": Check("yes", "HTTP 200")},
    versions=dict.fromkeys(mcp.LEGACY_VERSIONS, True),
    negotiated="2025-11-25",
    server_info={"name": "srv", "version": "2"},
    capabilities={"tools": {}},
    items=(Item("tool", "echo", annotations={"readOnlyHint": True}), Item("prompt", "p")),
    resumability=Resumability("no", "no ids"),
    session=Session(session_id_issued=True, get_stream=Check("yes"), delete=Check("yes", "HTTP 200")),
)


def test_json_groups_items_and_carries_verdicts_and_yaml() -> None:
    out = json.loads(to_json_text(FINDINGS))
    assert out["items"] == {
        "tools": [{"name": "echo", "title": None, "annotations": {"readOnlyHint": True}, "mrtr": True}],
        "prompts": [{"name": "p", "title": None, "annotations": {}, "mrtr": True}],
        "resources": [],
        "templates": [],
    }
    assert out["accepted_versions"] == list(mcp.LEGACY_VERSIONS)
    assert out["frontable"] is True
    assert out["upstream"] == {"name": "srv", "url": URL, "transport": "streamable-http"}
    assert out["config_yaml"].endswith(
        "upstreams:\n- name: srv\n  url: http://127.0.0.1:8000/mcp\n  transport: streamable-http\n"
    )
    assert out["verdicts"][0]["feature"] == "fronting"


def test_text_has_every_section() -> None:
    text = to_text(FINDINGS)
    assert text.startswith(
        f"mrtr-proxy probe: {URL}\n\ntransports\n  Streamable HTTP POST     yes (text/event-stream)\n"
    )
    assert (
        "  protocol versions        2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05 (negotiated 2025-11-25)\n"
        in text
    )
    assert "    echo  [readOnlyHint=true]\n" in text
    assert "  resumable (Last-Event-ID) no: no ids\n" in text
    assert "  DELETE session           yes (HTTP 200)\n" in text
    assert "\nverdicts\n  fronting                           works: legacy MCP over streamable-http" in text
    assert "\nconfiguration (mrtr-proxy serve --config FILE)\n# mrtr-proxy probe" in text


def test_text_of_an_oauth_server() -> None:
    auth = Authorization(401, 'Bearer resource_metadata="m"', "m", {}, ("https://as/",), ("s1",))
    text = to_text(Findings(target=URL, transport="streamable-http", url=URL, authorization=auth))
    assert 'authorization\n  HTTP 401  WWW-Authenticate: Bearer resource_metadata="m"\n' in text
    assert "  authorization servers        https://as/\n  scopes                       s1\n" in text


def test_to_json_of_nothing() -> None:
    out = to_json(Findings(target=URL, transport=None, url=URL, error="cannot connect"))
    assert out["frontable"] is False and out["error"] == "cannot connect" and out["upstream"] is None


def test_item_from_odd_entries() -> None:
    assert item_from("tool", {"name": 3, "annotations": []}) == Item("tool", "?")
    assert item_from("resource_template", {"uriTemplate": "a://{x}", "title": "T"}) == Item(
        "resource_template", "a://{x}", "T"
    )
