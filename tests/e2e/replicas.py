"""Several proxy replicas as real processes (sharing one key ring), and nginx round-robin in front of them."""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import peers
import yaml

from proxy.handle import generate_key_b64

NGINX = Path("/usr/sbin/nginx")


@contextlib.asynccontextmanager
async def replica_set(
    upstream_url: str, count: int, *, calls: dict[str, Any] | None = None
) -> AsyncIterator[list[peers.PeerProcess]]:
    """`count` replicas of `mrtr-proxy serve` on 127.0.0.1, each naming its own address as owner."""
    with tempfile.TemporaryDirectory(prefix="mrtr-replicas-") as tmp:
        key = Path(tmp) / "0-key"
        key.write_text(generate_key_b64())
        config = Path(tmp) / "proxy.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "keys": {"files": [str(key)]},
                    "calls": calls or {},
                    "upstreams": [{"name": "default", "url": str(upstream_url)}],
                }
            )
        )
        async with contextlib.AsyncExitStack() as stack:
            replicas = [
                await stack.enter_async_context(
                    peers.run_peer(
                        f"replica{i}",
                        lambda port: [
                            sys.executable,
                            "-m",
                            "proxy",
                            "serve",
                            "--config",
                            str(config),
                            "--listen",
                            f"127.0.0.1:{port}",
                            "--replica-address",
                            f"127.0.0.1:{port}",
                            "--log-format",
                            "json",
                        ],
                    )
                )
                for i in range(count)
            ]
            yield replicas


def url_of(replica: peers.PeerProcess) -> str:
    return f"http://127.0.0.1:{replica.port}/mcp"


def log_lines(replica: peers.PeerProcess) -> list[dict[str, Any]]:
    out = []
    for line in replica.log_text(tail=None).splitlines():
        with contextlib.suppress(ValueError):
            obj = json.loads(line)
            if isinstance(obj, dict):
                out.append(obj)
    return out


@contextlib.asynccontextmanager
async def round_robin(replicas: Sequence[peers.PeerProcess]) -> AsyncIterator[str]:
    """nginx on 127.0.0.1 balancing round robin over `replicas`; yields its /mcp URL."""
    if not NGINX.exists():  # noqa: ASYNC240 - one stat, before anything starts
        raise peers.PeersMissingError(f"nginx is not installed: {peers.SETUP_HINT}")
    with tempfile.TemporaryDirectory(prefix="mrtr-nginx-") as tmp:
        servers = "".join(f"server 127.0.0.1:{r.port};" for r in replicas)

        def argv(port: int) -> list[str]:
            conf = Path(tmp) / "nginx.conf"
            conf.write_text(f"""
user root root;
worker_processes 1;
error_log {tmp}/error.log warn;
pid {tmp}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/proxy; fastcgi_temp_path {tmp}/fcgi;
  uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;
  upstream replicas {{ {servers} keepalive 32; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://replicas;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 120s;
    }}
  }}
}}
""")
            return [str(NGINX), "-p", tmp, "-c", str(conf), "-g", "daemon off;"]

        async with peers.run_peer("nginx", argv) as lb:
            yield f"http://127.0.0.1:{lb.port}/mcp"
