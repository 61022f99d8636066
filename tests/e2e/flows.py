"""Flows against the FastMCP fixture that the proxy must complete whatever the upstream transport.

The front's behaviour does not depend on how the proxy reaches the legacy server, so the Streamable HTTP,
HTTP+SSE and stdio test modules run these same flows, each with its own proxy and transport-specific checks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from e2e.harness import ROOTS, SAMPLED, RawClient, accept_name


def text_of(result: dict[str, Any]) -> str:
    content = result["content"]
    assert isinstance(content, list)
    return "".join(part["text"] for part in content)


async def two_rounds(client: RawClient) -> None:
    """Two sequential elicitations are two rounds, under keys unique over the call, with fresh handles."""
    first = await client.call("two_questions")
    assert list(first.result["inputRequests"]) == ["elicit-1"]
    second = await client.retry(first, {"elicit-1": accept_name("Alice")}, "two_questions")
    assert second.result["resultType"] == "input_required"
    assert list(second.result["inputRequests"]) == ["elicit-2"]  # keys are unique over the call
    assert second.result["requestState"] != first.result["requestState"]
    final = await client.retry(
        second, {"elicit-2": {"action": "accept", "content": {"color": "green"}}}, "two_questions"
    )
    assert text_of(final.result) == "accept:Alice|accept:green"


async def three_at_once(client: RawClient) -> None:
    """Elicitation, sampling and roots sent together arrive as one round of three keys."""
    args = {"prompt": "capital?"}
    first = await client.call("all_at_once", args)
    by_method = {req["method"]: key for key, req in first.result["inputRequests"].items()}
    assert set(by_method) == {"elicitation/create", "sampling/createMessage", "roots/list"}
    responses = {
        by_method["elicitation/create"]: accept_name("Bob"),
        by_method["sampling/createMessage"]: SAMPLED,
        by_method["roots/list"]: ROOTS,
    }
    final = await client.retry(first, responses, "all_at_once", args)
    assert text_of(final.result) == "elicit=accept:Bob;sample=Paris;roots=file:///work/project"


async def prompt_and_resource(client: RawClient) -> None:
    """A prompt and a resource that elicit complete as MRTR rounds too."""
    first = await client.request("prompts/get", {"name": "greeting_prompt", "arguments": {}})
    assert first.result["resultType"] == "input_required"
    final = await client.request(
        "prompts/get",
        {
            "name": "greeting_prompt",
            "arguments": {},
            "requestState": first.result["requestState"],
            "inputResponses": {"elicit-1": accept_name("Zoe")},
        },
    )
    assert final.result["messages"][0]["content"]["text"] == "Hello, Zoe!"

    first = await client.request("resources/read", {"uri": "fixture://secret"})
    ((key, _),) = first.result["inputRequests"].items()
    final = await client.request(
        "resources/read",
        {
            "uri": "fixture://secret",
            "requestState": first.result["requestState"],
            "inputResponses": {key: {"action": "accept", "content": {"confirm": True}}},
        },
    )
    assert final.result["contents"][0]["text"] == "fixture:s3cr3t"
    assert final.result["resultType"] == "complete"
    assert final.result["cacheScope"] == "private"


async def concurrent_calls(
    client: RawClient, count: int, *, while_parked: Callable[[], None] | None = None
) -> None:
    """`count` calls parked at once, answered at once: none gets another's answer. `while_parked` checks
    something with all of them parked."""
    firsts = await asyncio.gather(*(client.call("ask_name") for _ in range(count)))
    if while_parked is not None:
        while_parked()
    finals = await asyncio.gather(
        *(
            client.retry(first, {"elicit-1": accept_name(f"user{i}")}, "ask_name")
            for i, first in enumerate(firsts)
        )
    )
    assert [text_of(f.result) for f in finals] == [f"accept:user{i}" for i in range(count)]
