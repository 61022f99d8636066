"""A stdio upstream cannot read the proxy's secrets through /proc (issue 14, finding 5).

The real proxy process runs a FastMCP 1.30 stdio server, as the same user, that tries to read
`/proc/<its parent>/environ` (where a sealing key given by environment variable lives), `mem` and `auxv`:
the proxy made itself non-dumpable at start-up, so every attempt is refused, while the child still reads
its own /proc entries.

The defence is about a child of the *same, unprivileged* user (a privileged one passes the check through
CAP_SYS_PTRACE). When the tests run as root (a CI container), the proxy is started through `setpriv`
without any capability, so that it and its child are exactly an ordinary user's processes (the same
child of a process that did not make itself non-dumpable reads its environ: tests/test_hardening.py).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import aiohttp
import peers
import pytest
import yaml

from e2e.harness import RawClient
from proxy.handle import generate_key_b64

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

SNOOP = peers.FIXTURES_DIR / "snoop_stdio_server.py"


def as_unprivileged() -> list[str]:
    """A command prefix that leaves root without capabilities (nothing when not root)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "setpriv (util-linux) is needed to drop root's capabilities"
    return [setpriv, "--bounding-set", "-all", "--inh-caps", "-all", "--"]


async def test_a_stdio_child_cannot_read_the_proxys_environment() -> None:
    secret = generate_key_b64()
    with tempfile.TemporaryDirectory(prefix="mrtr-isolation-") as tmp:
        config = Path(tmp) / "proxy.yaml"
        upstream = {"name": "snoop", "command": str(peers.legacy_python()), "args": [str(SNOOP)]}
        config.write_text(yaml.safe_dump({"keys": {"env": ["MRTR_TEST_KEY"]}, "upstreams": [upstream]}))
        async with peers.run_peer(
            "mrtr-proxy",
            lambda port: [
                *as_unprivileged(), sys.executable, "-m", "proxy", "serve", "--config", str(config),
                "--listen", f"127.0.0.1:{port}", "--log-format", "json",
            ],
            env={"MRTR_TEST_KEY": secret, "MRTR_TEST_OTHER_SECRET": "hunter2"},
            cwd=peers.REPO_ROOT,
        ) as proxy, aiohttp.ClientSession() as http:  # fmt: skip
            client = RawClient(f"http://127.0.0.1:{proxy.port}/mcp", http)

            async def read(who: str, name: str) -> str:
                reply = await client.call("read_proc", {"who": who, "name": name})
                text: str = reply.result["content"][0]["text"]
                return text

            own = await read("self", "environ")
            assert "PATH=" in own  # the child reads its own /proc entries
            assert secret not in own and "hunter2" not in own  # and inherited no secret (the key removed)
            assert "MRTR_TEST_KEY" not in own and "MRTR_TEST_OTHER_SECRET" not in own
            for name in ("environ", "mem", "auxv"):
                assert await read("parent", name) == "error:PermissionError", name
            log = proxy.log_text(tail=None)
            assert secret not in log and "hunter2" not in log
            assert '"keys.ephemeral"' not in log  # the proxy read its key from the variable all the same
