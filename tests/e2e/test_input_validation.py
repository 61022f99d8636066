"""Issue 14: an answer that breaks the requested schema keeps the call parked (the upstream never sees it),
the client gets a JSON-RPC error naming the input key and the failing field, and the same handle then takes
a corrected retry, which completes the call with one tool run. Real servers: server-everything's
`trigger-elicitation-request` (which itself accepts an empty multi-select that breaks its own minItems) and
FastMCP 1.30's `ask_profile` (required fields, bounds, an enum, a multi-select).

What a refusal looks like: HTTP 200 with
`{"error": {"code": -32602, "message": "inputResponses['<key>'] content.<field>: <reason>"}}`, e.g.
`inputResponses['elicit-1'] content.age: 151 is greater than the maximum of 150`."""

from __future__ import annotations

from typing import Any

import aiohttp
import peers
import pytest

from e2e.harness import EVERYTHING_FORM, ROOTS, SAMPLED, RawClient, running_proxy

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

EVERYTHING_TOOL = "trigger-elicitation-request"
GOOD_EVERYTHING = EVERYTHING_FORM


def accept(content: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": content}


async def test_server_everything_refuses_what_it_would_accept_then_takes_the_fix() -> None:
    async with (
        peers.start_server_everything() as everything,
        running_proxy(everything) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url, http, capabilities={"elicitation": {}})
        first = await client.call(EVERYTHING_TOOL)
        (key,) = first.result["inputRequests"]
        bad = [
            (
                {"untitledMultipleSelectEnum": []},
                "content.untitledMultipleSelectEnum: [] should be non-empty",
            ),
            (
                {"titledMultipleSelectEnum": ["fish-9"]},
                "content.titledMultipleSelectEnum[0]: 'fish-9' is not",
            ),
            ({"integer": 101}, "content.integer: 101 is greater than the maximum of 100"),
            ({"email": "ann"}, "content.email: 'ann' is not a 'email'"),
            ({"birthdate": "1990-13-01"}, "content.birthdate: '1990-13-01' is not a 'date'"),
            ({"titledSingleSelectEnum": "hero-9"}, "content.titledSingleSelectEnum: 'hero-9' is not valid"),
            ({"name": None}, "content.name: None is not of type 'string'"),
        ]
        for change, message in bad:
            refused = await client.retry(first, {key: accept({**GOOD_EVERYTHING, **change})}, EVERYTHING_TOOL)
            assert refused.status == 200
            assert refused.error["code"] == -32602
            assert refused.error["message"].startswith(f"inputResponses[{key!r}] {message}"), refused.error
            assert proxy.parked == 1  # still parked: nothing reached the upstream
        missing = {k: v for k, v in GOOD_EVERYTHING.items() if k != "name"}
        refused = await client.retry(first, {key: accept(missing)}, EVERYTHING_TOOL)
        assert (
            refused.error["message"] == f"inputResponses[{key!r}] content.name: 'name' is a required property"
        )

        done = await client.retry(first, {key: accept(GOOD_EVERYTHING)}, EVERYTHING_TOOL)
        text = " ".join(part.get("text", "") for part in done.result["content"])
        assert "- Name: Ann" in text and "- Favorite Integer: 7" in text
        assert proxy.parked == 0


async def test_fastmcp_profile_refusals_keep_the_call_then_one_run_completes() -> None:
    async with (
        peers.start_fastmcp() as fastmcp,
        running_proxy(fastmcp) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url, http, capabilities={"elicitation": {}})
        first = await client.call("ask_profile")
        (key,) = first.result["inputRequests"]
        good = {"name": "Ann", "age": 30, "color": "green", "tags": ["a", "b"]}
        bad = [
            ({"age": 151}, "content.age: 151 is greater than the maximum of 150"),
            ({"age": -1}, "content.age: -1 is less than the minimum of 0"),
            ({"name": "A"}, "content.name: 'A' is too short"),
            ({"color": "purple"}, "content.color: 'purple' is not one of ['red', 'green', 'blue']"),
            ({"tags": []}, "content.tags: [] should be non-empty"),
            ({"tags": ["z"]}, "content.tags[0]: 'z' is not one of ['a', 'b']"),
        ]
        for change, message in bad:
            refused = await client.retry(first, {key: accept({**good, **change})}, "ask_profile")
            assert refused.error == {"code": -32602, "message": f"inputResponses[{key!r}] {message}"}
        no_age = {k: v for k, v in good.items() if k != "age"}
        refused = await client.retry(first, {key: accept(no_age)}, "ask_profile")
        assert (
            refused.error["message"] == f"inputResponses[{key!r}] content.age: 'age' is a required property"
        )
        refused = await client.retry(first, {key: {"action": "decline", "content": good}}, "ask_profile")
        assert refused.error["message"] == (
            f"inputResponses[{key!r}] content: a decline carries no content (only an accept does)"
        )
        assert proxy.parked == 1

        done = await client.retry(first, {key: accept(good)}, "ask_profile")
        assert done.result["content"][0]["text"] == "accept:Ann/30/green/a+b"
        runs = await client.call("profiles")
        assert runs.result["content"][0]["text"] == "accept:Ann/30/green/a+b"  # one run, only the good answer


@pytest.mark.parametrize(
    ("tool", "bad", "message", "good", "expected"),
    [
        (
            "sample",
            {k: v for k, v in SAMPLED.items() if k != "model"},
            "model: a sampling response needs a string 'model'",
            SAMPLED,
            "Paris",
        ),
        (
            "sample_inline",
            {**SAMPLED, "role": "system"},
            "role: 'system' is not 'user' or 'assistant'",
            SAMPLED,
            "Paris",
        ),
        (
            "roots",
            {"roots": [{"uri": "https://example.com/x"}]},
            "roots[0].uri: must be a file:// URI",
            ROOTS,
            "file:///work/project",
        ),
    ],
)
async def test_fastmcp_sampling_and_roots_results_are_checked_too(
    tool: str, bad: dict[str, Any], message: str, good: dict[str, Any], expected: str
) -> None:
    async with (
        peers.start_fastmcp() as fastmcp,
        running_proxy(fastmcp) as proxy,
        aiohttp.ClientSession() as http,
    ):
        client = RawClient(proxy.url, http)
        args = {"prompt": "capital of France?"} if tool.startswith("sample") else {}
        first = await client.call(tool, args)
        (key,) = first.result["inputRequests"]
        refused = await client.retry(first, {key: bad}, tool, args)
        assert refused.error == {"code": -32602, "message": f"inputResponses[{key!r}] {message}"}
        assert proxy.parked == 1
        done = await client.retry(first, {key: good}, tool, args)
        assert done.result["content"][0]["text"] == expected
