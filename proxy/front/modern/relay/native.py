"""The native relay: a 2026-07-28 client's request to a 2026-07-28 upstream goes upstream as it came.

No legacy session and no parking: the request (its params, `_meta`, `inputResponses`, the client's own id)
is sent upstream by the stateless client (upstream/senders.py: POSTed by upstream/modern.py with the request
metadata headers and the client's `Mcp-Param-*` headers, or written to a stdio upstream's shared 2026-07-28
child by upstream/modern_stdio.py); the upstream's answer comes back as it is, `input_required` with the
server's own `inputRequests` and `requestState` included, and the retry goes upstream the same way, from
any replica: nothing of a call lives in the proxy. Progress and log notifications of the upstream's stream
reach the client's stream as they come; a client that goes away closes the upstream's stream (that is the
2026-07-28 cancellation). `server/discover`, the lists with their caching hints, `subscriptions/listen`
(without an overall deadline: the client's disconnect ends it) and the Tasks extension pass through too.

Where the upstream cannot tell users apart by what goes upstream for the request (routes/binding.py,
decided per route and member: an aggregated route's own `auth` decides what its members get), its
`requestState` would be a bearer token one user could replay as another: it travels wrapped in the proxy's
sealed relay handle (handle/relay_state.py), bound to the verified principal, the upstream and the request,
and is unwrapped on the retry. Elsewhere it travels untouched, and a bad one gets the upstream's own error.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web

from proxy.calls.wording import SEE_LOG, cannot_bind, invalid_state, relayed_failure, timed_out
from proxy.config import Config, UpstreamConfig
from proxy.front.modern.peer_route import key_not_held
from proxy.front.modern.relay.tasks import BoundTasks, TaskIdTooLarge, TaskRefused, refusal
from proxy.front.reply import Notes
from proxy.handle import HandleCodec, HandleError, formats, token_version
from proxy.handle.relay_state import (
    RelayState,
    StateTooLarge,
    check_relay_state,
    open_relay_state,
    relay_target,
    seal_relay_state,
)
from proxy.handle.relay_task import open_relay_task
from proxy.migration.tally import MigrationBook
from proxy.observe.line import Outcome, RequestLine
from proxy.routes.binding import BindingTable
from proxy.translate.request import ModernRequest
from proxy.upstream.base import UpstreamAuthChallenge, UpstreamError
from proxy.upstream.era import EraBook, speaks_modern
from proxy.upstream.modern import Notify, NotModern
from proxy.upstream.senders import ModernSenders
from proxy.upstream.tool_paths import modern_refusal, with_hint
from proxy.wire import jsonrpc, mcp


class NativeRelay:
    def __init__(
        self,
        *,
        upstreams: Mapping[str, UpstreamConfig],
        senders: ModernSenders,
        eras: EraBook,
        codec: HandleCodec,
        bindings: BindingTable,
        call_timeout: float,
        state_ttl: float,
        task_ttl: float = 3600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._upstreams = upstreams
        self._senders = senders
        self.eras = eras
        self._codec = codec
        self._bindings = bindings
        self._call_timeout = call_timeout
        self._state_ttl = state_ttl
        self._task_ttl = task_ttl
        self._clock = clock
        self.migration: MigrationBook | None = None  # told the tools an upstream lists (proxy/migration)

    @classmethod
    def from_config(
        cls,
        config: Config,
        senders: ModernSenders,
        eras: EraBook,
        codec: HandleCodec,
    ) -> NativeRelay:
        return cls(
            upstreams={u.name: u for u in config.upstreams},
            senders=senders,
            eras=eras,
            codec=codec,
            bindings=BindingTable(config),
            call_timeout=config.calls.call_timeout_s,
            state_ttl=config.calls.parked_ttl_s,
            task_ttl=config.calls.tasks.ttl_ms / 1000,
        )

    async def modern(self, upstream: str, forwarded: tuple[tuple[str, str], ...]) -> bool:
        """Whether `upstream` speaks 2026-07-28 (probed with the request's forwarded credentials if need
        be): for a route's lists and listens (aggregate/lists.py, listen.py). Which job serves a request
        is the plan's (front/plan.py, front/planner.py)."""
        era = self.eras.held(upstream)
        if era is None:
            era = await self.eras.era(upstream, dict(forwarded) if forwarded else None)
        return speaks_modern(era)

    async def relay(
        self,
        request: web.Request,
        upstream: str,
        req: ModernRequest,
        *,
        principal: str,
        forwarded: tuple[tuple[str, str], ...],
        replier: Notes,
        line: RequestLine,
        route: str | None,
    ) -> jsonrpc.Response:
        """The upstream's answer to `req`, which came by the aggregated `route` (None: the upstream's own
        route; what goes upstream, so whether its state is bound, depends on it). Raises NotModern (the
        upstream answered as a legacy server: the caller asks the era again) and UpstreamAuthChallenge
        (its 401/403)."""
        msg = req.request
        line.upstream_era = "modern"
        params = msg.params  # copied only if something in it changes: most requests go up as they came
        binds = self._bindings.binds(route, upstream)
        bound = binds and msg.method in mcp.MRTR_METHODS
        if bound and req.request_state is not None:
            try:
                unwrapped = self._unwrap(upstream, msg, req.request_state, principal)
            except HandleError as exc:
                line.set_outcome(Outcome.HANDLE_REJECTED, reason=exc.reason)
                if exc.reason == "unknown_key":  # sealed by a key another replica holds: 503, try elsewhere
                    raise key_not_held(req.request_state, self._codec.ring, line) from None
                return jsonrpc.Error(msg.id, invalid_state())
            params = {**params, "requestState": unwrapped}
        tasks = None
        if binds:  # its task ids too are bound to the principal (relay/tasks.py)
            tasks = BoundTasks(self._codec, upstream, principal, self._clock(), self._task_ttl)
            try:
                params = tasks.unwrap_params(msg.method, params)
            except TaskRefused as exc:
                line.set_outcome(Outcome.HANDLE_REJECTED, reason=exc.reason)
                if exc.reason == "unknown_key":  # sealed by a key another replica holds: 503, try elsewhere
                    raise key_not_held(exc.token, self._codec.ring, line) from None
                return refusal(msg.id, msg.method, upstream, exc)
        listen = msg.method == mcp.LISTEN
        send = self._senders.sender(
            upstream,
            timeout=None if listen else self._call_timeout,
            headers=dict(forwarded) if forwarded else None,
            extra_headers=_param_headers(request.headers),
        )
        on_note = replier.notify if tasks is None else _filtered(replier, tasks)
        try:
            answer = await send(
                msg if params is msg.params else jsonrpc.Request(msg.id, msg.method, params), on_note
            )
        except TimeoutError:
            line.set_outcome(Outcome.FAILED, jsonrpc.UPSTREAM_TIMEOUT)
            return jsonrpc.Error(msg.id, timed_out(self._call_timeout, upstream))
        except (NotModern, UpstreamAuthChallenge):
            raise
        except UpstreamError as exc:  # "unavailable" only if it never ran there (calls/wording.py)
            line.set_outcome(Outcome.UPSTREAM_FAILED)
            return jsonrpc.Error(msg.id, relayed_failure(upstream, exc))
        if msg.method in _WATCHED and self.eras.held(upstream) == "both":
            answer = self._two_era(upstream, msg, answer, line)
        return self._answer(upstream, msg, answer, principal, line, bound=bound, tasks=tasks)

    def _two_era(
        self, upstream: str, msg: jsonrpc.Request, answer: jsonrpc.Response, line: RequestLine
    ) -> jsonrpc.Response:
        """A two-era upstream's answer, read for the path of its tools (upstream/tool_paths.py): a tool list
        (a change forgets what was learned), or a call refused because the tool asks inline only — never
        re-run (it ran up to its question): passed on with the hint, the tool learned for its next call."""
        paths = self.eras.paths
        if msg.method == "tools/list":
            if isinstance(answer, jsonrpc.Result) and isinstance(tools := answer.result.get("tools"), list):
                paths.tool_list(upstream, (str(t.get("name")) for t in tools if isinstance(t, dict)))
            return answer
        name = msg.params.get("name")
        if not isinstance(name, str) or not paths.learns(upstream):
            return answer
        why = modern_refusal(answer, name, msg.params.get("arguments"))
        if why is None:
            return answer
        paths.learn_legacy(upstream, name, why)
        line.learned = "legacy"
        return with_hint(answer)

    def era_changed_under(self, upstream: str, answer: object) -> bool:
        """Whether the legacy way failed before the upstream processed anything (it could not open a
        session, or the session was gone) while the era went suspect (the pool saw the server change: an
        in-place upgrade to a 2026-07-28-only server refuses initialize): safe to plan again."""
        if not isinstance(answer, jsonrpc.Error):
            return False
        if answer.error.code != jsonrpc.UPSTREAM_FAILED:
            return False
        said = answer.error.message
        if said.startswith(_NEVER_RAN):  # refused before it ran (a 2026-07-28-only server's 400): look again
            self.eras.suspect(upstream, f"a legacy call was refused before it ran: {said}")
        return self.eras.held(upstream) is None and (
            said.startswith(_NEVER_RAN) or said.endswith(f"unavailable ({SEE_LOG})")
        )

    async def plain(
        self,
        upstream: str,
        msg: jsonrpc.Request,
        forwarded: tuple[tuple[str, str], ...],
        timeout: float | None,
        *,
        on_note: Notify | None = None,
    ) -> jsonrpc.Response:
        """A request of the proxy's own, sent as it is: an aggregated route's lists and discover (only the
        answer matters), or its listen to a modern member (`on_note` gets the stream's notifications; no
        `timeout`: the proxy ends it). Raises as a `ModernSender` does."""
        send = self._senders.sender(upstream, timeout=timeout, headers=dict(forwarded))
        return await send(msg, on_note)

    def task_upstream(self, token: object) -> str | None:
        """The upstream a relay task handle (relay/tasks.py) names, so an aggregated route sends `tasks/*`
        to the member that issued it; None for anything else (the route decides then)."""
        if not isinstance(token, str) or token_version(token) != formats.RELAY_TASK:
            return None
        try:
            return open_relay_task(self._codec, token, self._clock()).upstream
        except HandleError:
            return None

    def _unwrap(self, upstream: str, msg: jsonrpc.Request, token: str, principal: str) -> str:
        state = open_relay_state(self._codec, token, self._clock())
        check_relay_state(state, upstream=upstream, principal=principal, target=_target(msg))
        return state.state

    def _answer(
        self,
        upstream: str,
        msg: jsonrpc.Request,
        answer: jsonrpc.Response,
        principal: str,
        line: RequestLine,
        *,
        bound: bool,
        tasks: BoundTasks | None,
    ) -> jsonrpc.Response:
        if isinstance(answer, jsonrpc.Error):
            line.set_outcome(Outcome.UPSTREAM_ERROR, answer.error.code)
            return answer
        result = answer.result  # the upstream's own, passed on as it is unless something must change
        kind = result.get("resultType")
        if kind is None:  # a legacy server's result: it was served, but the verdict no longer holds
            self.eras.suspect(upstream, f"a {msg.method} result without resultType")
            result = {**result, "resultType": mcp.RESULT_COMPLETE}
            kind = mcp.RESULT_COMPLETE
        line.set_outcome(_OUTCOMES.get(kind, _COMPLETE))
        if self.migration is not None:
            self.migration.listed_result(upstream, msg.method, result)
        state = result.get("requestState")
        if bound and kind == mcp.RESULT_INPUT_REQUIRED and isinstance(state, str):
            expires = int(self._clock() + self._state_ttl)
            wrapped = RelayState(upstream, principal, _target(msg), state, expires)
            try:
                result = {**result, "requestState": seal_relay_state(self._codec, wrapped)}
            except StateTooLarge as exc:
                line.set_outcome(Outcome.FAILED, jsonrpc.UPSTREAM_FAILED)
                return jsonrpc.Error(msg.id, cannot_bind(upstream, "requestState", exc))
        if tasks is not None:
            try:
                result = tasks.wrap_result(msg.method, result)
            except TaskIdTooLarge as exc:
                line.set_outcome(Outcome.FAILED, jsonrpc.UPSTREAM_FAILED)
                return jsonrpc.Error(msg.id, cannot_bind(upstream, "task id", exc))
        if result is answer.result and answer.id == msg.id:
            return answer
        return jsonrpc.Result(msg.id, result)


def _filtered(replier: Notes, tasks: BoundTasks) -> Callable[[jsonrpc.Notification], Awaitable[None]]:
    """The client's notifications, less what names a task it did not ask about (relay/tasks.py)."""

    async def notify(note: jsonrpc.Notification) -> None:
        shown = tasks.note(note)
        if shown is not None:
            await replier.notify(shown)

    return notify


# A result's resultType as its line's outcome (a dict: an enum's call runs ~20 bytecodes of enum.py).
_OUTCOMES = {
    mcp.RESULT_COMPLETE: Outcome.COMPLETE,
    mcp.RESULT_INPUT_REQUIRED: Outcome.INPUT_REQUIRED,
    mcp.RESULT_TASK: Outcome.TASK,
}
_COMPLETE = Outcome.COMPLETE
_NEVER_RAN = "Upstream did not run the call"  # calls/wording.py not_run: safe to send again
_WATCHED = frozenset({"tools/call", "tools/list"})  # what a two-era upstream's tool paths are read from
_PARAM_PREFIX = "mcp-param-"


def _param_headers(headers: Mapping[str, str]) -> dict[str, str] | None:
    """The client's `Mcp-Param-*` headers, which go upstream with the request (None: it sent none)."""
    if _PARAM_PREFIX not in " ".join(headers).lower():  # most requests: one pass in C, not ~150 bytecodes
        return None
    found = None
    for name, value in headers.items():
        if len(name) >= 10 and name[9] == "-" and name[:10].lower() == _PARAM_PREFIX:  # [9]: few pass
            if found is None:
                found = {}
            found[name] = value
    return found


def _target(msg: jsonrpc.Request) -> str:
    name = msg.params.get("uri" if msg.method == "resources/read" else "name")
    return relay_target(msg.method, name if isinstance(name, str) else "")
