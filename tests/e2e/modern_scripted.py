"""A small scripted 2026-07-28 upstream (aiohttp), for what no installed peer serves at 2026-07-28: the
Tasks extension (SEP-2663: neither FastMCP 4.2.3 without the separate `fastmcp-tasks` package nor the mcp
2.3.0 SDK's server serves `tasks/*`) and a native tool whose `requestState` is as large as a test needs.

It keeps every request it received (`seen`), checks `Mcp-Name` against the body as a real server does
(`-32020` HeaderMismatch), and serves:

- `server/discover`: 2026-07-28, the tasks extension declared;
- `tools/call job {"text"}`: a task (`resultType: "task"`, id `task-<n>`, `ttlMs` 60000) whose result is
  `job:<text>`; `tools/call big {"size"}`: `input_required` with a `requestState` of `size` characters
  the first time, `big:<answer>:<size>` when retried with that very state; `tools/call bomb {"size"}`: a
  result whose text is `size` bytes, sent gzip-compressed (`Content-Encoding: gzip`, its Content-Length the
  compressed size: a decompression bomb, a few KB on the wire); `tools/call drop`: an event stream begun (a
  comment), then the connection closed with no answer: a server that died mid-call;
- `tasks/get` / `tasks/update` / `tasks/cancel`: by task id (`-32602 Failed to retrieve task: Task not
  found` for one it never gave), `tasks/list`: every task it holds (it cannot tell users apart);
- `subscriptions/listen`: the acknowledgement naming the task ids asked for, then `notifications/tasks` for
  each of those *and for every other task it holds* (a careless server), then the stream ends;
- with `lists` set: `tools/list`, one tool named `page-<n>` for its n-th list request (so a test tells
  each fetched page apart), `cacheScope: "private"` and `ttlMs` 60000; and a listen asking for
  `toolsListChanged` is acknowledged with it and held open (until the proxy hangs up, bounded); `tools/call
  change_tools` sends `notifications/tools/list_changed` on every such listen, its text how many.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import json
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.wire.sse import encode_event

VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
CREATED = "2026-12-03T00:00:00Z"


@dataclass
class ScriptedModern:
    url: str = ""
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    seen: list[dict[str, Any]] = field(default_factory=list)
    lists: bool = False  # serve tools/list (private pages) and list_changed on listen
    listed: int = 0  # tools/list requests answered
    _listeners: list[asyncio.Queue[dict[str, Any]]] = field(default_factory=list)  # open listens (lists)

    def task_ids_seen(self) -> list[str]:
        return [m["params"]["taskId"] for m in self.seen if m["method"].startswith("tasks/")]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        msg = json.loads(await request.read())
        self.seen.append(msg)
        rid, method, params = msg.get("id"), msg["method"], msg.get("params", {})
        name = params.get("taskId") if method.startswith("tasks/") else params.get("name")
        if isinstance(name, str) and request.headers.get("Mcp-Name") != name:
            return _error(rid, -32020, "Mcp-Name header does not match the body")
        if method == "server/discover":
            caps = {"tools": {}, "extensions": {TASKS: {}}}
            return _result(rid, {"supportedVersions": [VERSION], "capabilities": caps})
        if method == "tools/call" and params.get("name") == "drop":
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(b": working\n\n")
            assert request.transport is not None
            request.transport.close()  # died mid-call: the request ran, no answer comes
            return resp
        if method == "tools/call" and self.lists and params.get("name") == "change_tools":
            for heard in self._listeners:
                heard.put_nowait({"method": "notifications/tools/list_changed", "params": {}})
            return _result(rid, {"content": [{"type": "text", "text": str(len(self._listeners))}]})
        if method == "tools/call":
            return self._call(rid, params)
        if method == "tools/list" and self.lists:
            self.listed += 1
            tool = {"name": f"page-{self.listed}", "inputSchema": {"type": "object"}}
            return _result(rid, {"tools": [tool], "ttlMs": 60000, "cacheScope": "private"})
        if method == "tasks/list":
            return _result(rid, {"tasks": [self._detail(t) for t in self.tasks]})
        if method == "subscriptions/listen":
            return await self._listen(request, params)
        if method in ("tasks/get", "tasks/update", "tasks/cancel"):
            task_id = params.get("taskId")
            if task_id not in self.tasks:
                return _error(rid, -32602, "Failed to retrieve task: Task not found")
            if method == "tasks/cancel":
                self.tasks[task_id]["status"] = "cancelled"
            if method == "tasks/update":
                return _result(rid, {})
            return _result(rid, self._detail(task_id))
        return _error(rid, -32601, f"Method not found: {method}")

    def _call(self, rid: Any, params: dict[str, Any]) -> web.Response:
        args = params.get("arguments") or {}
        if params.get("name") == "bomb":
            text = "x" * int(args["size"])
            answer = {"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete", "content": [
                {"type": "text", "text": text}
            ]}}  # fmt: skip
            body = gzip.compress(json.dumps(answer).encode(), compresslevel=9)
            return web.Response(
                body=body, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}
            )
        if params.get("name") == "job":
            task_id = f"task-{len(self.tasks) + 1}"
            self.tasks[task_id] = {"status": "completed", "text": args.get("text", "")}
            detail = {k: v for k, v in self._detail(task_id).items() if k != "result"}
            return _result(rid, {**detail, "status": "working", "resultType": "task"})
        if params.get("name") == "big":
            size = int(args["size"])
            state = big_state(size)
            if params.get("requestState") == state:
                answer = params["inputResponses"]["name"]["content"]["name"]
                return _result(rid, {"content": [{"type": "text", "text": f"big:{answer}:{size}"}]})
            if "requestState" in params:
                return _error(rid, -32602, "Invalid requestState")
            ask = {"method": "elicitation/create", "params": {"message": "name?", "requestedSchema": {}}}
            return _result(
                rid, {"resultType": "input_required", "inputRequests": {"name": ask}, "requestState": state}
            )
        return _error(rid, -32602, "Unknown tool")

    def _detail(self, task_id: str) -> dict[str, Any]:
        task = self.tasks[task_id]
        detail = {"taskId": task_id, "status": task["status"], "ttlMs": 60000, "createdAt": CREATED}
        if task["status"] == "completed":
            detail["result"] = {"content": [{"type": "text", "text": f"job:{task['text']}"}]}
        return detail

    async def _listen(self, request: web.Request, params: dict[str, Any]) -> web.StreamResponse:
        asked = params.get("notifications", {}).get("taskIds", [])
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        ack: dict[str, Any] = {"notifications": {"taskIds": asked}}
        changed = self.lists and params.get("notifications", {}).get("toolsListChanged") is True
        if changed:
            ack["notifications"]["toolsListChanged"] = True
        notes = [{"method": "notifications/subscriptions/acknowledged", "params": ack}]
        notes += [{"method": "notifications/tasks", "params": self._detail(t)} for t in self.tasks]
        for note in notes:
            await resp.write(encode_event(json.dumps({"jsonrpc": "2.0", **note})))
        if changed:  # a live listen, as a real server keeps it: open until the proxy hangs up (bounded)
            heard: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
            self._listeners.append(heard)
            try:
                with contextlib.suppress(TimeoutError, ConnectionError):
                    async with asyncio.timeout(30):
                        while True:
                            await resp.write(
                                encode_event(json.dumps({"jsonrpc": "2.0", **await heard.get()}))
                            )
            finally:
                self._listeners.remove(heard)
            return resp
        await resp.write_eof()
        return resp


def big_state(size: int) -> str:
    """A requestState of `size` characters shaped as the mcp 2.3.0 SDK's sealed ones are (`v1.` and
    base64url of ciphertext): random, so nothing compresses it."""
    raw = random.Random(size).randbytes(size)
    return ("v1." + base64.urlsafe_b64encode(raw).decode().rstrip("="))[:size]


def _result(rid: Any, result: dict[str, Any]) -> web.Response:
    return web.json_response({"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete", **result}})


def _error(rid: Any, code: int, message: str) -> web.Response:
    return web.json_response({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})


@contextlib.asynccontextmanager
async def scripted_modern() -> AsyncIterator[ScriptedModern]:
    server = ScriptedModern()
    app = web.Application()
    app.router.add_post("/mcp", server.handle)
    test_server = TestServer(app, host="127.0.0.1")
    await test_server.start_server()
    server.url = str(test_server.make_url("/mcp"))
    try:
        yield server
    finally:
        await test_server.close()
