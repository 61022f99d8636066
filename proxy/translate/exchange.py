"""Sans-I/O state of one proxied call across its MRTR rounds.

The exchange decides, for every server request the legacy upstream sends during the call, whether it becomes
an input request for the client (and under which key), or is answered on the spot; it turns the client's
`inputResponses` back into legacy JSON-RPC responses. It performs no I/O: the caller sends what it returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from proxy.translate.capabilities import ClientCapabilities
from proxy.translate.validate import invalid_server_request
from proxy.wire import jsonrpc, mcp
from proxy.wire.jsonrpc import ErrorObject, Request, RequestId

_KEY_PREFIX = {mcp.ELICIT: "elicit", mcp.SAMPLE: "sample", mcp.ROOTS: "roots"}
# The legacy id of an input request the proxy asks on its own (roots for a session whose server asked for
# them before any call, calls/roots.py): its answer goes nowhere upstream.
PROXY_ASKED = "mrtr-proxy/asked"
_PREFIX_METHOD = {prefix: method for method, prefix in _KEY_PREFIX.items()}


def method_of_key(key: str) -> str | None:
    """The request method a key this module minted stands for (`elicit-3` → elicitation/create)."""
    prefix, _, number = key.rpartition("-")
    return _PREFIX_METHOD.get(prefix) if number.isdigit() else None


@dataclass(frozen=True, slots=True)
class PendingInput:
    key: str
    legacy_id: RequestId
    method: str
    # The request's params; once a round has offered them to the client, their compact JSON (`compact`):
    # a parked call holds its pending requests for as long as its client thinks, and the parsed form of a
    # few hundred bytes of JSON costs ~1.5 KiB in dicts and strings. A str, not orjson's bytes: those keep
    # the 4 KiB buffer they were written in.
    held: Mapping[str, Any] | str

    @property
    def params(self) -> Mapping[str, Any]:
        held = self.held
        if isinstance(held, str):
            params: Mapping[str, Any] = jsonrpc.loads(held)
            return params
        return held

    def compact(self) -> PendingInput:
        held = self.held
        if isinstance(held, str):
            return self
        # The constructor, not dataclasses.replace (which looks the fields up again on every call).
        return PendingInput(self.key, self.legacy_id, self.method, jsonrpc.dump_bytes(held).decode("ascii"))

    def as_input_request(self) -> dict[str, Any]:
        return {"method": self.method, "params": self.params}


@dataclass(frozen=True, slots=True)
class Reply:
    """A JSON-RPC response the proxy owes the upstream for one of its server requests."""

    legacy_id: RequestId
    result: Mapping[str, Any] | None = None
    error: ErrorObject | None = None

    @property
    def for_upstream(self) -> bool:
        """Does the upstream wait for this reply (False: the proxy asked the request itself)?"""
        return self.legacy_id != PROXY_ASKED

    def message(self) -> jsonrpc.Response:
        if self.error is not None:
            return jsonrpc.Error(self.legacy_id, self.error)
        return jsonrpc.Result(self.legacy_id, self.result or {})


@dataclass(frozen=True, slots=True)
class InputRound:
    """What one `InputRequiredResult` carries, and what its sealed handle must remember."""

    round: int
    input_requests: Mapping[str, Mapping[str, Any]]
    pending_ids: Mapping[str, RequestId]


@dataclass(slots=True)
class Exchange:
    capabilities: ClientCapabilities
    round: int = 0
    _seq: int = 0
    _pending: dict[str, PendingInput] = field(default_factory=dict)
    # Whether an answer to the round last opened was accepted (calls/gathering.py: a request that arrives
    # before any was accepted was sent without waiting for them).
    answered: bool = False

    @classmethod
    def resumed(
        cls, capabilities: ClientCapabilities, round: int, pending: Mapping[str, RequestId]
    ) -> Exchange:
        """Rebuild the state of a call from its handle (takeover): the round it is in and what it awaits.
        The requests' params are gone with the old owner; keys say which kind each one was."""
        exchange = cls(capabilities, round=round)
        for key, legacy_id in pending.items():
            method = method_of_key(key)
            if method is None:
                raise ValueError(f"not a key this proxy mints: {key!r}")
            exchange._pending[key] = PendingInput(key, legacy_id, method, {})
            exchange._seq = max(exchange._seq, int(key.rpartition("-")[2]))
        return exchange

    @property
    def has_pending(self) -> bool:
        return bool(self._pending)

    @property
    def pending(self) -> Mapping[str, PendingInput]:
        return self._pending

    def on_server_request(self, req: Request) -> Reply | None:
        """Queue a server request as an input request, or return the reply it gets at once."""
        if req.method == mcp.PING:
            return Reply(req.id, result={})
        if req.method not in mcp.INPUT_REQUEST_METHODS:
            return Reply(
                req.id, error=ErrorObject(jsonrpc.METHOD_NOT_FOUND, f"Method not found: {req.method}")
            )
        problem = invalid_server_request(req.method, req.params)
        if problem is not None:
            return Reply(req.id, error=ErrorObject(jsonrpc.INVALID_PARAMS, problem))
        if not self.capabilities.allows(req.method, req.params):
            return Reply(req.id, error=ErrorObject(jsonrpc.INVALID_REQUEST, _unsupported(req)))
        self._seq += 1
        key = f"{_KEY_PREFIX[req.method]}-{self._seq}"
        self._pending[key] = PendingInput(key, req.id, req.method, req.params)
        return None

    def ask(self, method: str) -> str:
        """Queue an input request the proxy asks itself (not from the upstream); returns its key."""
        self._seq += 1
        key = f"{_KEY_PREFIX[method]}-{self._seq}"
        self._pending[key] = PendingInput(key, PROXY_ASKED, method, {})
        return key

    def open_round(self) -> InputRound:
        """Everything still unanswered, as the next round's input requests. The pending requests are kept
        compact from now on (the round's `input_requests` hold their parsed params)."""
        if not self._pending:
            raise RuntimeError("no pending input requests")
        self.round += 1
        pending = self._pending
        opened = InputRound(
            round=self.round,
            input_requests={k: p.as_input_request() for k, p in pending.items()},
            pending_ids={k: p.legacy_id for k, p in pending.items()},
        )
        for key, p in pending.items():
            pending[key] = p.compact()
        self.answered = False
        return opened

    def accept(self, responses: Mapping[str, Any]) -> list[Reply]:
        """Answers for every pending key the client answered; unknown keys are ignored (SEP-2322)."""
        replies = []
        for key in [k for k in self._pending if k in responses]:
            pending = self._pending.pop(key)
            replies.append(Reply(pending.legacy_id, result=responses[key]))
        self.answered = self.answered or bool(replies)
        return replies

    def cancel_all(self, reason: str) -> list[Reply]:
        """Answer every pending request as the client never will: elicitations `cancel`, others an error."""
        return [cancel_reply(p, reason) for p in self.take_pending() if p.legacy_id != PROXY_ASKED]

    def take_pending(self) -> list[PendingInput]:
        """Every pending request, now no longer pending (for the caller to settle)."""
        pending = list(self._pending.values())
        self._pending.clear()
        return pending


def cancel_reply(pending: PendingInput, reason: str) -> Reply:
    """The answer to a request the client will never answer: elicitation `cancel`, others an error."""
    if pending.method == mcp.ELICIT:
        return Reply(pending.legacy_id, result={"action": "cancel"})
    return Reply(pending.legacy_id, error=ErrorObject(jsonrpc.INTERNAL_ERROR, reason))


def _unsupported(req: Request) -> str:
    if req.method == mcp.ELICIT:
        return f"Client does not support {req.params.get('mode', 'form')}-mode elicitation"
    if req.method == mcp.SAMPLE:
        return "Client does not support sampling"
    return "Client does not support roots"
