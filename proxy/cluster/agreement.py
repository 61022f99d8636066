"""Key-ring agreement between replicas: do the peers hold this replica's keys? Key ids only, never keys.

Each replica answers `GET /_mrtr/peer/keys` (a peer route: on `replica.peer_port` when set, signed as
every peer request is) with its key ids and the one it seals with. Every `replica.peer_check_s` it asks the
peers of `replica.peers` (a name may resolve to several addresses: a headless Service) and judges:

- `agrees`: every peer that answered holds this replica's sealing key, and this one holds theirs;
- `differs`: some do not — a rotation half-way (fine for a moment) or one replica with the wrong key;
  logged as an error on every check;
- `mismatch`: more replicas lack this replica's sealing key than hold it (counting itself among the
  holders), or as many, and it started after every peer that lacks it: this replica is the odd one.
  With `replica.key_mismatch: unready` its /readyz answers 503, so it takes no new calls; the others
  stay ready (with two replicas the newcomer loses the tie: the other has been serving with its keys).
  A peer that cannot verify our signature at all (no key in common) counts as not holding it.

Key ids are the public ids every handle already carries in clear, so the exchange reveals nothing new.
`assess` is pure; `PeerKeyCheck` does the I/O.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
import structlog
from aiohttp import web

from proxy.front.peers import Peers
from proxy.handle import KeyRing
from proxy.handle.peer_auth import PeerAuthError

log = structlog.get_logger("proxy.keys")

KEYS_PATH = "/_mrtr/peer/keys"
STARTED_AT = time.time()  # this process's start: the newer of two replicas that disagree is the odd one
Verdict = Literal["checking", "alone", "agrees", "differs", "mismatch"]


@dataclass(frozen=True, slots=True)
class PeerKeys:
    """What one peer said: its key ids and sealing key id, or why it said nothing usable."""

    address: str
    key_ids: tuple[str, ...] = ()
    sealing: str | None = None
    problem: str | None = None  # "unreachable: …", "no key in common", "bad answer"
    started_at: float | None = None  # when its process started (unix seconds): breaks a tie


@dataclass(frozen=True, slots=True)
class Agreement:
    verdict: Verdict
    peers: tuple[PeerKeys, ...] = ()
    lacking_ours: tuple[str, ...] = ()  # peers that do not hold our sealing key
    theirs_unknown: tuple[str, ...] = ()  # peers whose sealing key we do not hold

    def detail(self) -> dict[str, Any]:
        return {
            "agreement": self.verdict,
            "peers": {
                p.address: (
                    {"problem": p.problem}
                    if p.problem and not p.key_ids
                    else {"key_ids": list(p.key_ids), "sealing": p.sealing}
                )
                for p in self.peers
            },
            **({"peers_lacking_our_sealing_key": list(self.lacking_ours)} if self.lacking_ours else {}),
            **(
                {"peers_sealing_with_a_key_we_lack": list(self.theirs_unknown)} if self.theirs_unknown else {}
            ),
        }


def assess(ring: KeyRing, answers: Sequence[PeerKeys], started_at: float = 0.0) -> Agreement:
    """Judge the answers of the peers (pure). `started_at`: when this process started."""
    answered = [p for p in answers if p.key_ids or p.problem == "no key in common"]
    lacking_peers = [p for p in answered if ring.sealing_kid not in p.key_ids]
    lacking = tuple(p.address for p in lacking_peers)
    unknown = tuple(p.address for p in answered if p.sealing is not None and p.sealing not in ring.kids)
    holders = len(answered) - len(lacking) + 1  # this replica holds its own sealing key
    newest = all(p.started_at is not None and p.started_at < started_at for p in lacking_peers)
    if not answered:
        verdict: Verdict = "alone"
    elif len(lacking) > holders or (len(lacking) == holders and newest):
        verdict = "mismatch"
    elif lacking or unknown:
        verdict = "differs"
    else:
        verdict = "agrees"
    return Agreement(verdict, tuple(answers), lacking, unknown)


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


@dataclass(slots=True)
class PeerKeyCheck:
    """Asks the peers for their key ids; holds the latest `Agreement` for /readyz."""

    peers: Peers
    self_address: str
    addresses: tuple[str, ...]
    timeout: float = 2.0
    agreement: Agreement = field(default_factory=lambda: Agreement("checking"))

    @property
    def enabled(self) -> bool:
        return bool(self.addresses)

    async def resolve(self) -> list[str]:
        """Every address the configured peers resolve to, less this replica's own."""
        loop = asyncio.get_running_loop()
        out: list[str] = []
        for entry in self.addresses:
            host, port = _split(entry)
            try:
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except OSError:
                out.append(entry)  # reported unreachable below
                continue
            for info in infos:
                ip = str(info[4][0])
                addr = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
                if addr not in out:
                    out.append(addr)
        return [a for a in out if a != self.self_address and a != _normal(self.self_address)]

    async def ask(self, http: aiohttp.ClientSession, address: str) -> PeerKeys:
        headers = self.peers.signed_headers("GET", KEYS_PATH, b"")
        try:
            async with (
                asyncio.timeout(self.timeout),
                http.get(f"http://{address}{KEYS_PATH}", headers=headers) as r,
            ):
                body = await r.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            return PeerKeys(address, problem=f"unreachable: {type(exc).__name__}")
        if not isinstance(body, dict) or not isinstance(body.get("key_ids"), list):
            return PeerKeys(address, problem="bad answer")
        kids = tuple(str(k) for k in body["key_ids"])
        sealing = body.get("sealing")
        problem = "no key in common" if body.get("reason") == "unknown_key" else None
        started = body.get("started_at")
        started_at = float(started) if isinstance(started, int | float) else None
        return PeerKeys(address, kids, str(sealing) if sealing else None, problem, started_at)

    async def check(self, http: aiohttp.ClientSession, ring: KeyRing) -> Agreement:
        addresses = await self.resolve()
        answers = await asyncio.gather(*(self.ask(http, a) for a in addresses))
        previous, self.agreement = self.agreement.verdict, assess(ring, answers, STARTED_AT)
        if self.agreement.verdict in ("differs", "mismatch"):
            log.error(
                "keys.peers_differ",
                verdict=self.agreement.verdict,
                sealing_key=ring.sealing_kid,
                key_ids=list(ring.kids),
                **self.agreement.detail(),
                hint="replicas must hold the same keys: a handle sealed by one is refused by the others "
                "(check every replica's key Secret; /readyz shows each one's key ids)",
            )
        elif previous != self.agreement.verdict:
            log.info("keys.peers_checked", verdict=self.agreement.verdict, peers=len(answers))
        return self.agreement


def _normal(address: str) -> str:
    host, port = _split(address)
    return f"{'127.0.0.1' if host == 'localhost' else host}:{port}"


async def serve_keys(request: web.Request, peers: Peers) -> web.Response:
    """`GET /_mrtr/peer/keys`: this replica's key ids (public ids, never keys), for a signed peer. A peer that
    signed with a key we do not hold gets them too, marked `unknown_key`: that is the finding it needs."""
    ring = peers.ring()
    body: dict[str, Any] = {"key_ids": list(ring.kids), "sealing": ring.sealing_kid, "started_at": STARTED_AT}
    try:
        peers.authenticate("GET", request.path, b"", request.headers)
    except PeerAuthError as exc:
        if exc.reason != "unknown_key":
            log.warning("peer.auth_failed", reason=exc.reason, remote=request.remote, path=request.path)
            return web.json_response({"error": "peer authentication failed"}, status=401)
        return web.json_response({**body, "reason": "unknown_key"}, status=403)
    return web.json_response(body)


def keys_detail(ring: KeyRing, rotation: list[dict[str, object]], agreement: Agreement) -> dict[str, Any]:
    return {"sealing": ring.sealing_kid, "keys": rotation, **agreement.detail()}
