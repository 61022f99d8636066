"""What the plan (plan.py) needs to know of a request, gathered from the era book, the configuration and the
request itself: the one place that turns a request into a `Situation`, and that plans once more when a job
found the upstream's era wrong (`WrongEra`).

The era is asked only when it decides the job (`plan.needs_era`): a held verdict costs a dict look-up, an
unknown one a probe (upstream/era.py) — as before, a request the era cannot change (`ping`, a retry of a call
parked here, a legacy client's request of an existing session) never waits on one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from proxy.config import UpstreamConfig
from proxy.front.plan import (
    ClientEra,
    Job,
    LegacySession,
    RouteKind,
    Situation,
    ToolPath,
    Transport,
    UpstreamEra,
    WrongEra,
    needs_era,
    plan,
)
from proxy.handle import HandleCodec, HandleError, formats, token_version
from proxy.handle.mirror_ids import open_mirror_session
from proxy.translate.request import ModernRequest
from proxy.upstream.era import EraBook
from proxy.wire import jsonrpc, mcp

_AGGREGATED = RouteKind.AGGREGATED  # looked up once (an enum member is found through its metaclass)
MAX_PLANNED = 1024  # modern plans kept (see Planner._planned)
_ERAS = {era.value: era for era in UpstreamEra}
_TRANSPORTS = {transport.value: transport for transport in Transport}


class Planner:
    def __init__(
        self,
        upstreams: Mapping[str, UpstreamConfig],
        eras: EraBook,
        codec: HandleCodec,
        *,
        relay: bool,  # the native relay serves 2026-07-28 upstreams (else every modern request is adapted)
    ) -> None:
        self.eras = eras
        self._codec = codec
        self._relay = relay
        self._transports = {name: _TRANSPORTS[up.transport] for name, up in upstreams.items()}
        # The plans of the modern requests seen, by what decides them (upstreams by eras by
        # methods: a few dozen); the era a key's part, so a new verdict is a new key.
        self._planned: dict[tuple[object, ...], tuple[Situation, Job]] = {}

    def modern(
        self,
        upstream: str,
        req: ModernRequest,
        route: RouteKind,
        *,
        legacy_way: bool = False,  # a two-era tool the mirror asks the legacy way (inner.py)
    ) -> tuple[Situation, Job]:
        """A 2026-07-28 request to `upstream` (its own route, or the member an aggregated route named), with
        the era verdict held (UNKNOWN if none: then `probed` if `needs_era`), and its job. No await, and
        (but for the key) nothing made: the same facts give the same plan, kept (`_planned`)."""
        msg = req.request
        method, params = msg.method, msg.params
        legacy_tool = method == "tools/call" and (
            legacy_way or self.eras.paths.legacy(upstream, params.get("name"))
        )
        own_task = method in mcp.TASK_METHODS and token_version(params.get("taskId")) == formats.TASK_ID
        held = self.eras.held(upstream) if route is not _AGGREGATED else None
        parked = held is None and req.request_state is not None and self._parked_call(req.request_state)
        key = (upstream, route, held, method, legacy_tool, own_task, parked)
        planned = self._planned.get(key)
        if planned is None:
            s = Situation(
                ClientEra.MODERN,
                route,
                UpstreamEra.UNKNOWN if held is None else _ERAS[held],
                self._transports.get(upstream, Transport.STREAMABLE_HTTP),  # a route's name: no transport
                method,
                ToolPath.LEGACY if legacy_tool else ToolPath.UNSET,
                LegacySession.NONE,
                parked,
                own_task,
                self._relay,
            )
            planned = s, plan(s)
            if len(self._planned) < MAX_PLANNED:  # the method is the client's: kept for so many only
                self._planned[key] = planned
        return planned

    async def probed(self, s: Situation, upstream: str, forwarded: Sequence[tuple[str, str]]) -> Situation:
        """`s` with the upstream's era asked of the era book (probed if no verdict holds; with the request's
        forwarded credentials)."""
        return dataclasses.replace(s, era=_ERAS[await self.eras.era(upstream, dict(forwarded) or None)])

    async def legacy(
        self,
        session_id: str | None,
        upstream: str,
        msg: jsonrpc.Message | None,
        forwarded: Sequence[tuple[str, str]],
        *,
        routed: bool,  # `upstream` is an aggregated route's name
        mirror: bool,  # the mirror can serve it
    ) -> Situation:
        """A legacy client's request (`msg` None: a GET or DELETE of its session)."""
        session = LegacySession.NONE
        if session_id is not None:
            session = LegacySession.MIRRORED if self._mirror_session(session_id) else LegacySession.RELAYED
        method = msg.method if isinstance(msg, jsonrpc.Request | jsonrpc.Notification) else ""
        s = Situation(
            ClientEra.LEGACY,
            RouteKind.AGGREGATED if routed else RouteKind.OWN,
            UpstreamEra.UNKNOWN,
            self._transports.get(upstream, Transport.STREAMABLE_HTTP),
            method,
            session=session,
            crosses=mirror,
        )
        if needs_era(s):
            s = dataclasses.replace(s, era=_ERAS[await self.eras.era(upstream, dict(forwarded))])
        return s

    async def again(self, s: Situation, wrong: WrongEra, forwarded: Sequence[tuple[str, str]]) -> Job:
        """The job once more, after `wrong`: the verdict is suspected (dropped, logged) and asked afresh.
        The caller answers with the failure if it is the same job again (the era flapped: planned twice
        only)."""
        self.eras.suspect(wrong.upstream, wrong.reason)
        era = await self.eras.era(wrong.upstream, dict(forwarded) or None)
        return plan(dataclasses.replace(s, era=_ERAS[era]))

    def _parked_call(self, token: str) -> bool:
        """Whether `token` is a parked call's handle sealed by this proxy's keys (expired or not: the legacy
        way words that): its call is parked on a legacy session, whatever the upstream speaks now, so a
        replica that has not met the upstream yet serves (or forwards) it at once instead of waiting on a
        probe. Anything else, a modern server's own requestState included, is not."""
        if token_version(token) != formats.CALL_HANDLE:
            return False
        try:
            self._codec.ring.unseal(token, versions=(formats.CALL_HANDLE,))
        except HandleError:
            return False
        return True

    def _mirror_session(self, session_id: str) -> bool:
        try:
            open_mirror_session(self._codec, session_id)
        except HandleError:
            return False
        return True
