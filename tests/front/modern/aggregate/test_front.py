"""The routing step of an aggregated route, in process: a renamed request keeps everything else."""

from __future__ import annotations

from proxy.front.modern.aggregate.front import _renamed
from proxy.translate.capabilities import ClientCapabilities
from proxy.translate.request import ModernRequest
from proxy.wire import jsonrpc


def test_a_renamed_request_keeps_every_other_field() -> None:
    """_renamed builds the ModernRequest field by field (faster than dataclasses.replace): a field added to
    ModernRequest must be carried there too, or this fails."""
    params = {"name": "u0__echo", "arguments": {"text": "hi"}}
    req = ModernRequest(
        jsonrpc.Request(7, "tools/call", params),
        dict(params),
        ClientCapabilities(elicitation_form=True),
        {"name": "client", "version": "1"},
        "sealed-state",
        {"k": {"action": "accept"}},
        log_level="debug",
    )
    out = _renamed(req, {"name": "echo"})
    assert out.request == jsonrpc.Request(7, "tools/call", {**params, "name": "echo"})
    assert out.upstream_params == {**params, "name": "echo"}
    others = [name for name in ModernRequest.FIELDS if name not in ("request", "upstream_params")]
    assert [getattr(out, n) for n in others] == [getattr(req, n) for n in others]
    assert all(getattr(req, n) not in (None, {}, ClientCapabilities()) for n in others)  # none left default
