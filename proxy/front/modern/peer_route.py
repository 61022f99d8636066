"""What the peer route checks before it serves a forwarded retry, and the answer to a handle sealed with a
key this replica does not hold. Refusals only; the forwarding itself is `peers.py`."""

from __future__ import annotations

import structlog
from aiohttp import web

from proxy.calls.wording import lost, replica_stopped
from proxy.front.checks import Refusal
from proxy.front.peers import FORWARDED_BY, NOT_PROCESSED, PEER_REFUSED, Peers
from proxy.handle import KeyRing, token_kid
from proxy.handle.peer_auth import PeerAuthError
from proxy.observe.line import Outcome, RequestLine
from proxy.wire import jsonrpc
from proxy.wire.jsonrpc import ErrorObject

log = structlog.get_logger("proxy.peers")
OWNER_REFUSED = (
    "the proxy replica that held it no longer accepts this replica: it restarted, or no longer shares "
    "this replica's keys"
)


def check_peer_request(
    peers: Peers, stopped: bool, request: web.Request, body: bytes, line: RequestLine
) -> None:
    """A forwarded retry is served only if a peer signed it (the forwarder's address included), and only
    while this replica still serves calls: once it stops, it says it did not process the retry, so the
    forwarder may handle it itself. Raises Refusal."""
    try:
        peers.authenticate(request.method, request.path, body, request.headers)
    except PeerAuthError as exc:
        line.set_outcome(Outcome.PEER_AUTH_FAILED, reason=f"peer_{exc.reason}")
        log.warning(
            "peer.auth_failed",
            reason=exc.reason,
            remote=request.remote,
            claimed_forwarder=request.headers.get(FORWARDED_BY),
            hint="only replicas sharing this key ring may use the peer route"
            if exc.reason != "unknown_key"
            else "the forwarder signed with a key this replica does not hold: the key rings differ",
        )
        raise Refusal(
            401,
            ErrorObject(
                jsonrpc.INVALID_REQUEST, "Peer authentication failed (the peer route is for replicas)"
            ),
            ((PEER_REFUSED, exc.reason),),  # a forwarding replica tells its client what this means
        ) from None
    line.forwarded_by = request.headers[FORWARDED_BY]  # verified: it is inside the MAC
    if stopped:
        line.set_outcome(Outcome.NOT_PROCESSED)
        raise Refusal(
            503,
            replica_stopped(),
            ((NOT_PROCESSED, "1"), ("Retry-After", "0")),
        )


def key_not_held(request_state: str | None, ring: KeyRing, line: RequestLine) -> Refusal:
    """A handle sealed with a key not in this ring: not a forgery (its key id is in no ring of ours, or in
    one another replica has and this one lacks: a rotation not yet here, or a replica with the wrong key).
    A 503 sends it on to another replica behind a balancer that retries (nginx `proxy_next_upstream
    http_503 non_idempotent`): nothing was done with it, so sending it again is safe."""
    kid = token_kid(request_state)
    line.key_id = kid
    log.warning(
        "handle.key_not_held",
        key_id=kid,
        key_ids=list(ring.kids),
        hint="requestState was sealed with a key this replica does not hold: a key rotation that has not "
        "reached it yet, or replicas with different keys (compare /readyz key_ring on each)",
    )
    return Refusal(
        503,
        ErrorObject(
            jsonrpc.KEY_NOT_HELD,
            "This proxy replica does not hold the key that sealed requestState; nothing was done. "
            "Send the request again: another replica may hold the key.",
        ),
        (("Retry-After", "1"),),
    )


def owner_refused(rid: jsonrpc.RequestId, owner: str, reason: str, line: RequestLine) -> jsonrpc.Error:
    """The answer to a retry whose owner refused the forward (PeerRefused): the call is lost, not re-run."""
    line.owner_refused = reason
    line.set_outcome(Outcome.FAILED, jsonrpc.CALL_LOST)
    log.warning(
        "peer.owner_refused",
        owner=owner,
        reason=reason,
        hint="the replica at the call's owner address refused this replica's signature: it restarted with "
        "other keys, or the key rings no longer share a key (compare /readyz key_ring on each)",
    )
    return jsonrpc.Error(rid, lost(OWNER_REFUSED))
