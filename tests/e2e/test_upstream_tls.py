"""https upstreams: FastMCP 1.30 served by uvicorn with a certificate from a private CA made in the test,
and a second one that requires a client certificate (mutual TLS). The proxy trusts `tls.ca_file` and
presents `tls.cert_file`; without them the call fails with -31001, and the proxy's log names the verification
that failed (the client's message stays short: issue 20)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import peers
import pytest
import pytest_asyncio
from structlog.testing import capture_logs

from e2e.harness import RawClient, accept_name, running_proxy
from e2e.tls_certs import Issued, issue, make_ca
from proxy.auth.setup import AuthSetupError
from proxy.config import Config, TlsConfig, UpstreamConfig
from proxy.process.app import create_app

pytestmark = [pytest.mark.peers, pytest.mark.asyncio(loop_scope="session")]

SCRIPT = Path(__file__).resolve().parent.parent / "fixtures" / "tls_fastmcp_server.py"


@dataclass
class Pki:
    ca: Path
    client: Issued
    other_ca: Path
    tls_url: str
    mtls_url: str


@contextlib.asynccontextmanager
async def _https_fastmcp(server: Issued, client_ca: Path | None) -> AsyncIterator[str]:
    def argv(port: int) -> list[str]:
        args = [str(peers.legacy_python()), str(SCRIPT), "--port", str(port)]
        args += ["--certfile", str(server.cert), "--keyfile", str(server.key)]
        return args + (["--client-ca", str(client_ca)] if client_ca else [])

    async with peers.run_peer("tls-fastmcp", argv, env={"PYTHONUNBUFFERED": "1"}) as peer:
        yield f"https://127.0.0.1:{peer.port}/mcp"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def pki(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Pki]:
    peers.require_peers({"legacy python (mcp 1.30)": peers.legacy_python()})
    d = tmp_path_factory.mktemp("pki")
    ca = make_ca(d, "test-server-ca")
    client_ca = make_ca(d, "test-client-ca")
    other = make_ca(d, "unrelated-ca")
    server = issue(d, "server", ca, server=True)
    client = issue(d, "client", client_ca, server=False)
    async with (
        _https_fastmcp(server, None) as tls_url,
        _https_fastmcp(server, client_ca[0].cert) as mtls_url,
    ):
        yield Pki(ca[0].cert, client, other[0].cert, tls_url, mtls_url)


async def test_private_ca(pki: Pki) -> None:
    up = UpstreamConfig(name="default", url=pki.tls_url, tls=TlsConfig(ca_file=pki.ca))
    async with running_proxy(up) as proxy, aiohttp.ClientSession() as http:
        client = RawClient(proxy.url, http)
        assert (await client.call("echo", {"text": "over tls"})).result["content"][0]["text"] == "over tls"
        first = await client.call("ask_name")
        final = await client.retry(first, {"elicit-1": accept_name("Tls")}, "ask_name")
    assert final.result["content"][0]["text"] == "accept:Tls"


@pytest.mark.parametrize("ca", ["system", "unrelated"])
async def test_an_untrusted_certificate_says_which_verification_failed(pki: Pki, ca: str) -> None:
    tls = TlsConfig(ca_file=pki.other_ca) if ca == "unrelated" else TlsConfig()
    up = UpstreamConfig(name="default", url=pki.tls_url, tls=tls)
    async with running_proxy(up) as proxy, aiohttp.ClientSession() as http:
        with capture_logs() as logs:
            reply = await RawClient(proxy.url, http).call("echo", {"text": "x"})
    assert reply.error["code"] == -31001
    assert "certificate" not in reply.error["message"]
    (line,) = [e for e in logs if e["event"] == "upstream.unavailable"]
    assert "certificate verify failed: unable to get local issuer certificate" in line["error"]


async def test_mutual_tls(pki: Pki) -> None:
    tls = TlsConfig(ca_file=pki.ca, cert_file=pki.client.cert, key_file=pki.client.key)
    up = UpstreamConfig(name="default", url=pki.mtls_url, tls=tls)
    async with running_proxy(up) as proxy, aiohttp.ClientSession() as http:
        reply = await RawClient(proxy.url, http).call("echo", {"text": "mtls"})
    assert reply.result["content"][0]["text"] == "mtls"


async def test_mutual_tls_without_a_client_certificate_fails(pki: Pki) -> None:
    up = UpstreamConfig(name="default", url=pki.mtls_url, tls=TlsConfig(ca_file=pki.ca))
    async with running_proxy(up) as proxy, aiohttp.ClientSession() as http:
        with capture_logs() as logs:
            reply = await RawClient(proxy.url, http).call("echo", {"text": "x"})
    assert reply.error["code"] == -31001
    (line,) = [e for e in logs if e["event"] == "upstream.unavailable"]
    assert "the proxy presents no client certificate" in line["error"]
    assert "upstreams[].tls.cert_file" in line["error"]


async def test_a_missing_client_key_stops_the_start(pki: Pki, tmp_path: Path) -> None:
    tls = TlsConfig(ca_file=pki.ca, cert_file=pki.client.cert, key_file=tmp_path / "missing.key")
    with pytest.raises(AuthSetupError) as info:
        create_app(Config(upstreams=(UpstreamConfig(name="a", url=pki.mtls_url, tls=tls),)))
    assert f"upstreams.0.tls.cert_file: cannot load client certificate {pki.client.cert}" in str(info.value)
