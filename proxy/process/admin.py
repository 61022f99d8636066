"""The operator's admin listener (issue 20): a second aiohttp site, off unless `admin.listen` is set.

Every request must carry `Authorization: Bearer <token>` with the token in `admin.token_file` (compared in
constant time); anything else gets 401 and a log line, and nothing is looked at. An address that fails
FAILED_BURST times in a row (refilled FAILED_PER_S a second) gets 429 with `Retry-After` for every request,
its token not even compared, until it has room again; other addresses are not affected. The first 429 an
address gets logs `admin.auth_rate_limited`, and then at most one more line a minute while it goes on. Routes:

- `GET /admin/calls`: the calls this replica holds, as JSON: id, principal digest (the digest handles are
  bound to, never the credential), upstream, method, tool, round, state (parked or running), age, how long
  parked and for how much longer, task, owner (this replica's address).
- `POST /admin/calls/{id}/cancel`: cancel a parked call the way a reaped one is cancelled (its pending
  requests answered, `notifications/cancelled` to the upstream, the session closed). The client's retry
  then gets `-31013` "The call was cancelled by an operator …". 404: no such call here; 409: it is running
  a round, or belongs to a task (cancel that with `tasks/cancel`).
- `GET /metrics`: the whole exposition, with the reason label of `mrtr_proxy_handle_rejections_total`
  that the main port's /metrics leaves out.
- `GET /admin/migration`: this replica's migration report (proxy/migration, docs/migration.md): calls per
  upstream and tool by path and client era, tools asking inline, the verdicts. It and `/admin/calls` may be
  read from a page of another origin (another replica's admin page): CORS, the token still required.
- `POST /admin/migration/sum`: the sum of the reports posted (a JSON list), judged again: the admin page's
  view of several replicas.
- `GET /admin/` (and its `page.js`, `page.css`): the operator's page over the two JSON routes above. These
  three files hold no data and are served without the token (a browser cannot put a bearer token on a
  page load); the page's script sends the token (from the address's `#token=` fragment, never sent to a
  server, or a form) with its requests for the JSON, which stay behind it.

Answers are JSON objects (`{"error": "…"}` for refusals), never HTML or text.
"""

from __future__ import annotations

import hmac
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Final

import structlog
from aiohttp import web

from proxy.calls.drain import NotCancellable
from proxy.calls.registry import LiveCall
from proxy.config import Config
from proxy.front.ratelimit import RateLimiter
from proxy.observe.metrics import CONTENT_TYPE, METRICS
from proxy.process.appstate import CALLS, CONFIG
from proxy.process.migration import cross_origin, migration_route, sum_route

log = structlog.get_logger("proxy.admin")

MIN_TOKEN_CHARS: Final = 16
MAIN = web.AppKey("main", web.Application)  # the proxy's own app, whose calls and metrics are served
TOKEN = web.AppKey("token", bytes)
FAILURES = web.AppKey("failures", RateLimiter)  # failed authentications per client address
FAILED_BURST: Final = 30  # failed tokens an address may send at once …
FAILED_PER_S: Final = 0.5  # … and then one every 2 s: 30 guesses a minute at a 16+ character secret
PAGE_FILES: Final = {  # the admin page (proxy/process/admin_page/, package data): path -> (file, type)
    "/admin/": ("index.html", "text/html"),
    "/admin/page.js": ("page.js", "text/javascript"),
    "/admin/page.css": ("page.css", "text/css"),
}
# `admin.auth_rate_limited` lines: one when an address starts being refused, then at most one a minute for
# it while it keeps on, so a flood of 429s cannot become a flood of log lines.
LIMITED_LINES = web.AppKey("limited_lines", RateLimiter)
LIMITED_LINE_EVERY_S: Final = 60.0
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class AdminSetupError(Exception):
    """The admin listener cannot start (its token file is missing, unreadable or too short)."""


def read_token(path: Path) -> str:
    """The bearer token in `path`, surrounding whitespace stripped; AdminSetupError if unusable."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise AdminSetupError(f"admin.token_file: cannot read {path}: {exc}") from None
    if len(token) < MIN_TOKEN_CHARS:
        raise AdminSetupError(f"admin.token_file: {path} holds fewer than {MIN_TOKEN_CHARS} characters")
    return token


def _error(status: int, message: str, **headers: str) -> web.Response:
    return web.json_response({"error": message}, status=status, headers=headers)


def _too_many(failures: RateLimiter, address: str) -> web.Response:
    wait = max(1, math.ceil(failures.retry_after(address)))
    return _error(
        429,
        f"Too many failed authentications from this address; retry in {wait} s",
        **{"Retry-After": str(wait)},
    )


def _refused(request: web.Request, failures: RateLimiter, address: str) -> web.Response:
    """429 for an address over its failed-token limit, and its log line when one is due."""
    answer = _too_many(failures, address)
    if request.app[LIMITED_LINES].allow(address):
        log.warning(
            "admin.auth_rate_limited",
            address=address,
            path=request.path,
            retry_after_s=int(answer.headers["Retry-After"]),
        )
    return answer


@web.middleware
async def _authenticated(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.method == "GET" and request.path in PAGE_FILES:  # no data in them: see the docstring
        return await handler(request)
    failures, address = request.app[FAILURES], request.remote or "unknown"
    if failures.exhausted(address):  # no token is compared for it
        return _refused(request, failures, address)
    given = request.headers.get("Authorization", "")
    scheme, _, token = given.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), request.app[TOKEN]):
        if not failures.allow(address):
            return _refused(request, failures, address)
        log.warning(
            "admin.unauthorized",
            path=request.path,
            address=address,
            reason="missing" if not given else "wrong",
        )
        return _error(
            401,
            "Unauthorized: the admin listener needs its bearer token",
            **{"WWW-Authenticate": 'Bearer realm="mrtr-proxy-admin"'},
        )
    try:
        return await handler(request)
    except web.HTTPException as exc:  # unknown route or method: JSON too
        return _error(exc.status, exc.reason)


def describe(call: LiveCall, parked_for: float, now: float, owner: str) -> dict[str, Any]:
    """What the admin listing shows of one call (no credential, no arguments, no input)."""
    return {
        "id": call.id,
        "principal_digest": call.principal,
        "upstream": call.upstream,
        "method": call.method,
        "tool": call.tool if call.method == "tools/call" else None,
        "round": call.exchange.round,
        "state": "parked" if call.parked else "running",
        "age_s": round(now - call.started, 3),
        "parked_for_s": round(parked_for, 3) if call.parked else None,
        "expires_in_s": round(call.parked_until - now, 3) if call.parked_until is not None else None,
        "task": call.task,
        "owner": owner,
    }


async def _calls(request: web.Request) -> web.Response:
    main = request.app[MAIN]
    registry = main[CALLS].registry
    now, owner = time.monotonic(), main[CONFIG].replica_address
    calls = [describe(c, registry.parked_for(c), now, owner) for c in registry]
    return web.json_response({"owner": owner, "calls": calls})


async def _cancel(request: web.Request) -> web.Response:
    main = request.app[MAIN]
    call_id = request.match_info["call"]
    try:
        call = await main[CALLS].cancel_parked(call_id)
    except NotCancellable as exc:
        return _error(exc.status, str(exc))
    log.info("admin.cancelled", call=call.id, upstream=call.upstream, address=request.remote)
    return web.json_response({"cancelled": call.id, "upstream": call.upstream})


async def _migration(request: web.Request) -> web.Response:
    return await migration_route(request, request.app[MAIN])


async def _page(request: web.Request) -> web.Response:
    name, kind = PAGE_FILES[request.path]
    body = resources.files("proxy.process").joinpath("admin_page", name).read_bytes()
    return web.Response(body=body, content_type=kind, headers={"Cache-Control": "no-store"})


async def _metrics(request: web.Request) -> web.Response:
    body = request.app[MAIN][METRICS].render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


def admin_app(main: web.Application, token: str) -> web.Application:
    """The admin routes over `main` (the proxy's app, started: its call service exists)."""
    app = web.Application(middlewares=[cross_origin, _authenticated], client_max_size=4096)
    app[MAIN], app[TOKEN] = main, token.encode()
    app[FAILURES] = RateLimiter(FAILED_PER_S, FAILED_BURST, max_principals=10_000)
    app[LIMITED_LINES] = RateLimiter(1 / LIMITED_LINE_EVERY_S, 1, max_principals=10_000)
    app.router.add_get("/admin/calls", _calls)
    app.router.add_post("/admin/calls/{call}/cancel", _cancel)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/admin/migration", _migration)
    app.router.add_post("/admin/migration/sum", sum_route)  # reads its body itself, up to its own bound
    for path in PAGE_FILES:
        app.router.add_get(path, _page)
    return app


@dataclass(frozen=True, slots=True)
class AdminListener:
    """Where the admin listener serves, and its token: read at start-up, before anything listens."""

    host: str
    port: int
    token: str = field(repr=False)

    async def start(self, main: web.Application) -> web.AppRunner:
        """Serve the admin routes over the started `main`; `cleanup()` the runner on shutdown. OSError when
        the address is taken."""
        runner = web.AppRunner(admin_app(main, self.token), access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
        except BaseException:
            await runner.cleanup()
            raise
        log.info("admin.listening", host=self.host, port=self.port)
        return runner


def prepare_admin(config: Config) -> AdminListener | None:
    """The admin listener `admin.*` configures, None when `admin.listen` is not set. AdminSetupError for an
    unusable token file."""
    if config.admin.listen is None:
        return None
    assert config.admin.token_file is not None  # the config's checks require it with admin.listen
    host, _, port = config.admin.listen.rpartition(":")
    return AdminListener(host.strip("[]"), int(port), read_token(config.admin.token_file))
