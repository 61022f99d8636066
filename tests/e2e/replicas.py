"""Several proxy replicas as real processes (sharing one key ring), and nginx round-robin in front of them."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import json
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import peers
import yaml

from e2e.harness import RawClient
from proxy.handle import generate_key_b64, parse_key

NGINX = Path("/usr/sbin/nginx")


@dataclass
class Cluster:
    """Replicas with a key directory each (as each pod mounts its own copy of the key Secret)."""

    replicas: list[peers.PeerProcess]
    key_dirs: list[Path]
    peer_ports: list[int | None]
    admin_ports: list[int | None] = field(default_factory=list)  # each one's admin listener, if asked for

    def write_keys(self, i: int, keys: Mapping[str, str]) -> None:
        """Replace replica `i`'s key files with `keys` (name -> base64) the way the kubelet updates a
        mounted Secret: the files live in a timestamped directory, `..data` points at it and is swapped
        atomically, and each visible name is a symlink through `..data`."""
        write_secret_dir(self.key_dirs[i], keys)


def write_secret_dir(directory: Path, keys: Mapping[str, str]) -> None:
    """As the kubelet's atomic writer does for a Secret volume (see `Cluster.write_keys`)."""
    version = directory / f"..{uuid.uuid4().hex}"
    version.mkdir()
    for name, value in keys.items():
        (version / name).write_text(value)
    old = os.readlink(directory / "..data") if (directory / "..data").is_symlink() else None
    tmp = directory / "..data_tmp"
    tmp.symlink_to(version.name)
    tmp.replace(directory / "..data")  # the atomic swap
    for name in keys:
        link = directory / name
        if not link.is_symlink():
            link.symlink_to(f"..data/{name}")
    for entry in directory.iterdir():
        if not entry.name.startswith(".") and entry.name not in keys:
            entry.unlink()
    if old is not None:
        shutil.rmtree(directory / old)


@contextlib.asynccontextmanager
async def cluster(
    upstream_url: str,
    count: int,
    *,
    calls: dict[str, Any] | None = None,
    keys: Mapping[str, str] | Sequence[Mapping[str, str]] | None = None,
    keys_config: dict[str, Any] | None = None,
    peer_ports: bool = False,
    replica: dict[str, Any] | None = None,
    calls_per_replica: Sequence[dict[str, Any]] | None = None,
    front: dict[str, Any] | None = None,
    more: dict[str, Any] | None = None,
    admin_token_file: Path | None = None,
) -> AsyncIterator[Cluster]:
    """`count` replicas of `mrtr-proxy serve` on 127.0.0.1, each naming its own address as owner. `keys`:
    the key files of every replica's key directory (or one mapping per replica; default one shared key).
    `peer_ports`: each replica gets a peer port (its address, the peer route) and knows the others'
    (`replica.peers`: key-ring comparison). `calls_per_replica`: `calls` settings of each replica, over
    `calls`. `more`: other top-level settings, over these (e.g. `upstreams` and `routes`).
    `admin_token_file`: each replica gets an admin listener on a port of its own, with this token."""
    with tempfile.TemporaryDirectory(prefix="mrtr-replicas-") as tmp:
        per_replica = _keys_per_replica(keys, count)
        ports: list[int | None] = [peers.free_port() if peer_ports else None for _ in range(count)]
        admins = [peers.free_port() if admin_token_file else None for _ in range(count)]
        key_dirs = []
        configs = []
        for i in range(count):
            key_dir = Path(tmp) / f"keys{i}"
            key_dir.mkdir()
            write_secret_dir(key_dir, per_replica[i])
            key_dirs.append(key_dir)
            rep = {**(replica or {})}
            if ports[i] is not None:
                rep.update(peer_port=ports[i], peers=[f"127.0.0.1:{p}" for p in ports if p is not None])
            config = Path(tmp) / f"proxy{i}.yaml"
            config.write_text(
                yaml.safe_dump(
                    {
                        "keys": {"dirs": [str(key_dir)], **(keys_config or {})},
                        "calls": {**(calls or {}), **(calls_per_replica[i] if calls_per_replica else {})},
                        "front": front or {},
                        "replica": rep,
                        "upstreams": [{"name": "default", "url": str(upstream_url)}],
                        **(
                            {
                                "admin": {
                                    "listen": f"127.0.0.1:{admins[i]}",
                                    "token_file": str(admin_token_file),
                                }
                            }
                            if admin_token_file
                            else {}
                        ),
                        **(more or {}),
                    }
                )
            )
            configs.append(config)
        async with contextlib.AsyncExitStack() as stack:
            replicas = [
                await stack.enter_async_context(
                    peers.run_peer(f"replica{i}", functools.partial(_argv, configs[i], ports[i]))
                )
                for i in range(count)
            ]
            yield Cluster(replicas, key_dirs, ports, admins)


def _keys_per_replica(
    keys: Mapping[str, str] | Sequence[Mapping[str, str]] | None, count: int
) -> list[Mapping[str, str]]:
    if keys is None:
        keys = {"0-current": generate_key_b64()}
    if isinstance(keys, Mapping):
        return [keys] * count
    return list(keys)


def _argv(config: Path, peer_port: int | None, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "proxy",
        "serve",
        "--config",
        str(config),
        "--listen",
        f"127.0.0.1:{port}",
        "--replica-address",
        f"127.0.0.1:{peer_port or port}",
        "--log-format",
        "json",
    ]


@contextlib.asynccontextmanager
async def replica_set(
    upstream_url: str, count: int, *, calls: dict[str, Any] | None = None
) -> AsyncIterator[list[peers.PeerProcess]]:
    """`count` replicas sharing one key, without peer ports (see `cluster`)."""
    async with cluster(upstream_url, count, calls=calls) as group:
        yield group.replicas


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
async def round_robin(
    replicas: Sequence[peers.PeerProcess], *, next_upstream: bool = False
) -> AsyncIterator[str]:
    """nginx on 127.0.0.1 balancing round robin over `replicas`; yields its /mcp URL. `next_upstream`: the
    settings docs/scale-out.md recommends — a 503 (draining, key not held, not processed) or a refused
    connection is sent on to the next replica, POSTs included, and counts against the replica (passive
    health: out of rotation for `fail_timeout`)."""
    if not NGINX.exists():  # noqa: ASYNC240 - one stat, before anything starts
        raise peers.PeersMissingError(f"nginx is not installed: {peers.SETUP_HINT}")
    with tempfile.TemporaryDirectory(prefix="mrtr-nginx-") as tmp:
        health = " max_fails=1 fail_timeout=5s" if next_upstream else ""
        servers = "".join(f"server 127.0.0.1:{r.port}{health};" for r in replicas)
        retry = (
            "proxy_next_upstream error timeout http_503 non_idempotent; proxy_next_upstream_tries 3;"
            if next_upstream
            else ""
        )

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
      {retry}
    }}
  }}
}}
""")
            return [str(NGINX), "-p", tmp, "-c", str(conf), "-g", "daemon off;"]

        async with peers.run_peer("nginx", argv) as lb:
            yield f"http://127.0.0.1:{lb.port}/mcp"


def kid(key_b64: str) -> str:
    return parse_key(key_b64, "test").kid


async def readyz(http: aiohttp.ClientSession, replica: peers.PeerProcess) -> tuple[int, dict[str, Any]]:
    async with http.get(f"http://127.0.0.1:{replica.port}/readyz") as resp:
        return resp.status, await resp.json()


async def all_replicas(
    http: aiohttp.ClientSession, group: Cluster, ok: Callable[[dict[str, Any]], bool]
) -> bool:
    bodies = [body for _, body in await asyncio.gather(*(readyz(http, r) for r in group.replicas))]
    return all(ok(body["key_ring"]) for body in bodies)


Flow = Callable[[RawClient, str], Awaitable[str]]  # one client flow under a tag: "ok" or what failed


async def flows_until(
    stop: asyncio.Event, flow: Flow, client: RawClient, who: int, tally: collections.Counter[str]
) -> None:
    """Run `flow` again and again (tags c<who>f<n>) until `stop`; count "ok", "failed" and each failure."""
    n = 0
    while not stop.is_set():
        outcome = await flow(client, f"c{who}f{n}")
        tally["ok" if outcome == "ok" else "failed"] += 1
        if outcome != "ok":
            tally[outcome[:120]] += 1
        n += 1
