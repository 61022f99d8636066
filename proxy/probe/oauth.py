"""A server behind OAuth: its 401/403 challenge, and the RFC 9728 protected-resource metadata it points to
(or the well-known forms of it), with the authorization servers and scopes named there."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping

import aiohttp

from proxy.probe import authinfo, steps
from proxy.probe.channel import ProbeError, Recorder
from proxy.probe.findings import Authorization
from proxy.probe.http import Unauthorized, bounded_body
from proxy.probe.streamable import StreamableConversation
from proxy.wire import mcp


async def required(
    http: aiohttp.ClientSession, url: str, headers: Mapping[str, str], timeout: float
) -> Authorization | None:
    """With a token given (`--header Authorization: …`), is one required? One initialize without it."""
    rest = {k: v for k, v in headers.items() if k.lower() != "authorization"}
    if rest == dict(headers):
        return None
    bare = StreamableConversation(http, url, rest, Recorder())
    try:
        await steps.initialize(bare, mcp.LEGACY_VERSIONS[0], timeout)
    except Unauthorized as exc:
        return await describe(http, url, exc, timeout)
    except (ProbeError, aiohttp.ClientError):
        return None
    else:
        await bare.delete(timeout)
        return None
    finally:
        await bare.close()


async def describe(http: aiohttp.ClientSession, url: str, exc: Unauthorized, timeout: float) -> Authorization:
    """The 401/403 `exc`, with the protected-resource metadata it leads to (RFC 9728), if any is found."""
    params = authinfo.challenge_params(exc.www_authenticate)
    scopes = tuple(params.get("scope", "").split())
    tried: list[str] = []
    for candidate in authinfo.metadata_urls(url, exc.www_authenticate):
        try:
            async with asyncio.timeout(timeout):
                async with http.get(candidate, headers={"Accept": "application/json"}) as response:
                    if response.status != 200:
                        tried.append(f"{candidate}: HTTP {response.status}")
                        continue
                    metadata = json.loads(await bounded_body(response))
        except (TimeoutError, aiohttp.ClientError, ValueError, ProbeError) as err:
            tried.append(f"{candidate}: {type(err).__name__}")
            continue
        if not isinstance(metadata, dict):
            tried.append(f"{candidate}: not a JSON object")
            continue
        servers = metadata.get("authorization_servers")
        supported = metadata.get("scopes_supported")
        resource = metadata.get("resource")
        return Authorization(
            detail=""
            if authinfo.same_resource(url, resource)
            else f"the metadata names resource {resource!r}, not {url}: RFC 9728 section 3.3 says clients "
            "must not use it",
            status=exc.status,
            www_authenticate=exc.www_authenticate,
            metadata_url=candidate,
            metadata=metadata,
            authorization_servers=tuple(s for s in servers if isinstance(s, str))
            if isinstance(servers, list)
            else (),
            scopes=scopes
            or (tuple(s for s in supported if isinstance(s, str)) if isinstance(supported, list) else ()),
        )
    return Authorization(
        exc.status, exc.www_authenticate, scopes=scopes, detail="no metadata: " + "; ".join(tried)
    )
