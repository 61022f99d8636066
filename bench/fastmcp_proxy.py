"""FastMCP's proxy (``fastmcp.server.create_proxy``), the nearest Python peer, legacy ↔ legacy.

Run under the bench venv (fastmcp 3.4.11 on mcp 1.30, so both sides speak legacy Streamable HTTP)::

    python bench/fastmcp_proxy.py --upstream http://127.0.0.1:8000/mcp --port 8090

Used as documented: ``create_proxy(url)``, which opens a fresh upstream session per incoming request (its
default, to keep request contexts apart). ``--shared-session`` instead hands it one connected ``Client``,
which it then reuses for every request (FastMCP warns this "may cause context mixing in concurrent
scenarios"): its best case for plain calls, not a safe setting for calls that ask the client something.

Served with FastMCP's own ``run_http_async`` at log level ``warning`` and without uvicorn's access log, so
its per-request logging is not counted against it (mrtr-proxy, by contrast, runs at its default ``info``
level with one JSON log line per request).
"""

from __future__ import annotations

import argparse
import asyncio
import os

os.environ.setdefault("FASTMCP_SHOW_CLI_BANNER", "false")
os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")

from fastmcp import Client
from fastmcp.server import create_proxy


async def serve(args: argparse.Namespace) -> None:
    options = {
        "show_banner": False,
        "transport": "http",
        "host": args.host,
        "port": args.port,
        "log_level": "warning",
        "uvicorn_config": {"access_log": False},
    }
    if not args.shared_session:
        await create_proxy(args.upstream, name="fastmcp-proxy").run_http_async(**options)
        return
    async with Client(args.upstream) as client:
        await create_proxy(client, name="fastmcp-proxy-shared").run_http_async(**options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--shared-session", action="store_true", help="reuse one upstream session")
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
