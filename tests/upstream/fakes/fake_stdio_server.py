"""A tiny legacy MCP server on stdio, for the stdio transport's unit tests (no mcp package needed).

Run with any Python 3.11: ``python fake_stdio_server.py [--version V] [--ignore-eof] [--ignore-term]
[--grandchild] [--banner TEXT]``. It reads one JSON-RPC message per line on stdin and answers on stdout.

Tools (``tools/call`` name → behaviour):

- ``echo {text}`` → ``{"text": text}``
- ``raw`` → ``{"line": <the exact line this request arrived as>}``
- ``seen`` → ``{"methods": [every method received so far]}``
- ``env`` → ``{"env": os.environ, "cwd": os.getcwd()}``
- ``ask`` → sends ``elicitation/create`` (id ``"srv-1"``), waits for the answer, returns ``{"answer": …}``
- ``notify`` → sends a progress notification and a ``tools/list_changed``, then ``{"ok": true}``
- ``stderr {lines: [...]}`` → writes each line to stderr, then ``{"ok": true}``
- ``die {code}`` → exits with ``code`` without answering
- ``hang`` → writes ``hanging`` to stderr, never answers
- ``big {size}`` → writes one line of ``size`` bytes (not JSON), then ``{"ok": true}``
- ``junk`` → writes a line that is not JSON, then ``{"ok": true}``
- ``split`` → writes its response in two pieces, 50 ms apart
- ``pair`` → writes a progress notification and its response in one write
- ``close_stdout`` → closes stdout and keeps running
- ``stop_reading`` → answers ``{"ok": true}``, then never reads stdin again
- ``grandchild_pid`` → ``{"pid": <pid of the sleeping grandchild>}`` (with ``--grandchild``)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

parser = argparse.ArgumentParser()
parser.add_argument("--version", default=None, help="answer initialize with this version (default: echo)")
parser.add_argument("--ignore-eof", action="store_true", help="keep running after stdin ends")
parser.add_argument("--ignore-term", action="store_true", help="ignore SIGTERM")
parser.add_argument("--grandchild", action="store_true", help="start a sleeping grandchild")
parser.add_argument("--banner", default=None, help="write this to stderr at start")
opts = parser.parse_args()

if opts.ignore_term:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
grandchild = subprocess.Popen(["sleep", "300"]) if opts.grandchild else None
if opts.banner:
    sys.stderr.write(opts.banner + "\n")
    sys.stderr.flush()

out = sys.stdout.buffer
seen: list[str] = []


def write(raw: bytes) -> None:
    out.write(raw)
    out.flush()


def send(msg: dict[str, Any]) -> None:
    write(json.dumps(msg).encode() + b"\n")


def result(rid: Any, value: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": value})


def read_message() -> tuple[dict[str, Any] | None, bytes]:
    line = sys.stdin.buffer.readline()
    if not line:
        return None, b""
    return json.loads(line), line


def tool(rid: Any, name: str, args: dict[str, Any], line: bytes) -> None:
    if name == "echo":
        result(rid, {"text": args.get("text")})
    elif name == "raw":
        result(rid, {"line": line.decode()})
    elif name == "seen":
        result(rid, {"methods": seen})
    elif name == "env":
        result(rid, {"env": dict(os.environ), "cwd": os.getcwd()})
    elif name == "ask":
        ask = {"message": "name?"}
        send({"jsonrpc": "2.0", "id": "srv-1", "method": "elicitation/create", "params": ask})
        while True:
            msg, _ = read_message()
            if msg is None:
                return
            if msg.get("id") == "srv-1" and "method" not in msg:
                result(rid, {"answer": msg.get("result", msg.get("error"))})
                return
    elif name == "notify":
        progress = {"progressToken": "t", "progress": 1}
        send({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        result(rid, {"ok": True})
    elif name == "stderr":
        for text in args.get("lines", []):
            sys.stderr.write(text + "\n")
        sys.stderr.flush()
        result(rid, {"ok": True})
    elif name == "die":
        sys.stderr.write("dying on request\n")
        sys.stderr.flush()
        os._exit(int(args.get("code", 1)))
    elif name == "hang":  # says so on stderr (a test waits for that line), then never answers
        sys.stderr.write("hanging\n")
        sys.stderr.flush()
    elif name == "big":
        write(b"x" * int(args["size"]) + b"\n")
        result(rid, {"ok": True})
    elif name == "junk":
        write(b"this is not json\n")
        result(rid, {"ok": True})
    elif name == "split":
        raw = json.dumps({"jsonrpc": "2.0", "id": rid, "result": {"split": True}}).encode() + b"\n"
        write(raw[:10])
        time.sleep(0.05)
        write(raw[10:])
    elif name == "pair":
        progress = {"progressToken": 1, "progress": 1}
        note = {"jsonrpc": "2.0", "method": "notifications/progress", "params": progress}
        response = {"jsonrpc": "2.0", "id": rid, "result": {"pair": True}}
        write(json.dumps(note).encode() + b"\n\n" + json.dumps(response).encode() + b"\n")
    elif name == "close_stdout":
        out.close()
        os.close(1)
        time.sleep(300)
    elif name == "stop_reading":
        result(rid, {"ok": True})
        time.sleep(300)
    elif name == "grandchild_pid":
        result(rid, {"pid": grandchild.pid if grandchild else None})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"unknown tool {name}"}})


def main() -> None:
    while True:
        msg, line = read_message()
        if msg is None:
            break
        method = msg.get("method")
        if method is not None:
            seen.append(method)
        if method == "initialize":
            version = opts.version or msg["params"]["protocolVersion"]
            info = {"name": "fake-stdio", "version": "1"}
            result(msg["id"], {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info})
        elif method == "tools/call":
            params = msg.get("params", {})
            tool(msg["id"], params.get("name", ""), params.get("arguments", {}), line)
        elif method == "ping":
            result(msg["id"], {})
        elif "id" in msg and method is not None:
            send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no such method"}})
    if opts.ignore_eof:
        while True:
            time.sleep(1)


main()
