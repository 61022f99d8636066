"""A state-machine test of Exchange: every server request gets exactly one reply, keys are never reused."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from proxy.translate.capabilities import ClientCapabilities
from proxy.translate.exchange import Exchange, Reply
from proxy.translate.validate import invalid_server_request
from proxy.wire import jsonrpc, mcp
from proxy.wire.jsonrpc import Request, RequestId

KINDS: dict[str, tuple[str, dict[str, Any]]] = {
    "elicit-form": (mcp.ELICIT, {"message": "m", "requestedSchema": {"type": "object"}}),
    "elicit-url": (
        mcp.ELICIT,
        {"mode": "url", "message": "m", "url": "https://u.example", "elicitationId": "e"},
    ),
    "elicit-bad": (mcp.ELICIT, {"message": 1}),
    "sample": (mcp.SAMPLE, {"messages": [], "maxTokens": 1}),
    "sample-bad": (mcp.SAMPLE, {"messages": []}),
    "roots": (mcp.ROOTS, {}),
    "ping": (mcp.PING, {}),
    "unknown": ("tools/list", {}),
}

capabilities = st.builds(
    ClientCapabilities,
    elicitation_form=st.booleans(),
    elicitation_url=st.booleans(),
    sampling=st.booleans(),
    roots=st.booleans(),
)


class ExchangeMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ex: Exchange | None = None
        self.next_id = 0
        self.sent: list[RequestId] = []
        self.replied: Counter[RequestId] = Counter()
        self.model: dict[str, tuple[RequestId, str]] = {}  # key -> (legacy id, method), the pending set
        self.keys_seen: set[str] = set()
        self.rounds = 0

    @initialize(caps=capabilities)
    def start(self, caps: ClientCapabilities) -> None:
        self.ex = Exchange(caps)

    @property
    def exchange(self) -> Exchange:
        assert self.ex is not None
        return self.ex

    def _record(self, replies: list[Reply]) -> None:
        for reply in replies:
            self.replied[reply.legacy_id] += 1

    @rule(kind=st.sampled_from(sorted(KINDS)), str_id=st.booleans())
    def server_request(self, kind: str, str_id: bool) -> None:
        self.next_id += 1
        rid: RequestId = f"srv-{self.next_id}" if str_id else self.next_id
        method, params = KINDS[kind]
        before = set(self.exchange.pending)
        reply = self.exchange.on_server_request(Request(rid, method, params))
        self.sent.append(rid)
        queueable = (
            method in mcp.INPUT_REQUEST_METHODS
            and invalid_server_request(method, params) is None
            and self.exchange.capabilities.allows(method, params)
        )
        if reply is None:
            assert queueable
            new = set(self.exchange.pending) - before
            assert len(new) == 1
            key = new.pop()
            assert key not in self.keys_seen, f"key {key} reused"
            self.keys_seen.add(key)
            assert self.exchange.pending[key].legacy_id == rid
            self.model[key] = (rid, method)
        else:
            assert not queueable
            assert reply.legacy_id == rid
            if method == mcp.PING:
                assert reply.result == {} and reply.error is None
            else:
                assert reply.error is not None
            self._record([reply])
            assert set(self.exchange.pending) == before

    @precondition(lambda self: self.ex is not None and self.ex.has_pending)
    @rule()
    def open_round(self) -> None:
        rnd = self.exchange.open_round()
        self.rounds += 1
        assert rnd.round == self.rounds
        assert dict(rnd.pending_ids) == {k: rid for k, (rid, _) in self.model.items()}
        assert {k: v["method"] for k, v in rnd.input_requests.items()} == {
            k: m for k, (_, m) in self.model.items()
        }

    @precondition(lambda self: self.ex is not None)
    @rule(data=st.data())
    def accept(self, data: st.DataObject) -> None:
        pending = sorted(self.model)
        answered = data.draw(st.lists(st.sampled_from(pending), unique=True)) if pending else []
        stale = [*sorted(self.keys_seen - set(self.model)), "bogus", "elicit-0"]
        extra = data.draw(st.lists(st.sampled_from(stale), unique=True, max_size=3))
        responses = {k: {"answer": k} for k in [*answered, *extra]}
        replies = self.exchange.accept(responses)
        expected = {self.model[k][0]: responses[k] for k in answered}
        assert {r.legacy_id: r.result for r in replies} == expected
        assert len(replies) == len(answered)
        assert all(r.error is None for r in replies)
        for k in answered:
            del self.model[k]
        self._record(replies)

    @precondition(lambda self: self.ex is not None)
    @rule(reason=st.sampled_from(["gone", "expired"]))
    def cancel_all(self, reason: str) -> None:
        replies = self.exchange.cancel_all(reason)
        by_id = {r.legacy_id: r for r in replies}
        assert len(by_id) == len(replies) == len(self.model)
        for rid, method in self.model.values():
            reply = by_id[rid]
            if method == mcp.ELICIT:
                assert reply.result == {"action": "cancel"} and reply.error is None
            else:
                assert reply.error == jsonrpc.ErrorObject(jsonrpc.INTERNAL_ERROR, reason)
        self.model.clear()
        self._record(replies)

    @invariant()
    def pending_matches_model(self) -> None:
        if self.ex is None:
            return
        assert {k: (p.legacy_id, p.method) for k, p in self.ex.pending.items()} == self.model
        assert self.ex.has_pending == bool(self.model)
        assert all(n == 1 for n in self.replied.values()), "a server request answered twice"
        pending_ids = {rid for rid, _ in self.model.values()}
        assert not pending_ids & set(self.replied), "a pending request was already answered"
        assert pending_ids | set(self.replied) == set(self.sent), "a server request was lost"

    def teardown(self) -> None:
        if self.ex is None:
            return
        self._record(self.ex.cancel_all("teardown"))
        assert self.replied == Counter(self.sent)


ExchangeMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=25, deadline=None)
TestExchangeMachine = ExchangeMachine.TestCase
