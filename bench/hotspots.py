"""Where the proxy's time goes, from py-spy's collapsed stacks (``--format raw``): the hottest lines, the
hottest proxy functions, CPU by area (the proxy, aiohttp, asyncio, logging …) and by phase of a request."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def short_path(path: str, root: Path) -> str:
    """`proxy/…` for the project, `aiohttp/…` for installed packages, `asyncio/…` for the standard library."""
    for marker in ("site-packages/", "/lib/python3."):
        if marker in path:
            tail = path.split(marker, 1)[1]
            return tail.split("/", 1)[1] if marker.startswith("/lib") else tail
    if path.startswith(str(root) + "/"):
        return path[len(str(root)) + 1 :]
    return path


def area(file: str) -> str:
    if file.startswith("proxy/"):
        return "mrtr-proxy code (proxy/)"
    for prefix, name in (
        ("aiohttp/", "aiohttp"),
        ("structlog/", "structlog (logging)"),
        ("asyncio/", "asyncio"),
        ("json/", "json"),
        ("cryptography/", "cryptography"),
        ("multidict/", "multidict/yarl"),
        ("yarl/", "multidict/yarl"),
    ):
        if file.startswith(prefix):
            return name
    return "other"


# Phases of a proxied request, by a frame that marks them (inclusive: a sample counts once per phase).
PHASES = (
    ("front: Endpoint.handle (parse, check, dispatch, call service)", "Endpoint.handle "),
    ("  of which CallService.start (acquire a session, start the call, drive it)", "CallService.start "),
    (
        "upstream POST: StreamableHttpSession._post_and_read (aiohttp client request + reply)",
        "_post_and_read ",
    ),
    ("aiohttp client: ClientRequest.write_bytes (send the upstream request)", "ClientRequest.write_bytes "),
    (
        "aiohttp server: RequestHandler.finish_response (write the client's response)",
        "RequestHandler.finish_response ",
    ),
    (
        "aiohttp server: RequestHandler.data_received (parse the client's request)",
        "RequestHandler.data_received ",
    ),
    ("logging: structlog (anything under it)", "(structlog/"),
    ("asyncio.timeout / timers", "asyncio/timeouts.py"),
    ("metrics (proxy/observe/metrics.py)", "proxy/observe/metrics.py"),
    ("event loop: EpollSelector.select", "EpollSelector.select "),
)
SEND_LEAF = "socket send() (leaf: _SelectorSocketTransport.write → sock.send)"


def analyse_profile(raw: str, root: Path, top: int = 15) -> dict[str, Any]:
    """py-spy `--format raw` (collapsed stacks) → self and inclusive hot spots with file:line, and areas."""
    self_line: Counter[str] = Counter()
    incl_func: Counter[str] = Counter()
    self_area: Counter[str] = Counter()
    incl_area: Counter[str] = Counter()
    phases: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = []
        for frame in stack.split(";"):
            m = _FRAME.match(frame)
            if m is None:
                frames.append((frame, "?", None))
                continue
            frames.append((m["func"], short_path(m["file"], root), m["line"]))
        func, file, lineno = frames[-1]
        self_line[f"{func} ({file}:{lineno})"] += n
        for label, needle in PHASES:
            if any(needle in f for f in stack.split(";")):
                phases[label] += n
        if func == "_SelectorSocketTransport.write":
            phases[SEND_LEAF] += n
        self_area[area(file)] += n
        for name in {f"{fn} ({fl})" for fn, fl, _ in frames}:
            incl_func[name] += n
        for name in {area(fl) for _, fl, _ in frames}:
            incl_area[name] += n
    pct = lambda n: round(100.0 * n / total, 1) if total else 0.0  # noqa: E731
    proxy_incl = [(k, v) for k, v in incl_func.most_common() if "(proxy/" in k]
    return {
        "samples": total,
        "self_top": [{"frame": k, "pct": pct(v)} for k, v in self_line.most_common(top)],
        "self_by_area": [{"area": k, "pct": pct(v)} for k, v in self_area.most_common()],
        "inclusive_by_area": [{"area": k, "pct": pct(v)} for k, v in incl_area.most_common()],
        "inclusive_proxy_top": [{"function": k, "pct": pct(v)} for k, v in proxy_incl[:top]],
        "inclusive_top": [{"function": k, "pct": pct(v)} for k, v in incl_func.most_common(top + 10)],
        "phases": [{"phase": label, "pct": pct(phases[label])} for label, _ in PHASES]
        + [{"phase": SEND_LEAF, "pct": pct(phases[SEND_LEAF])}],
    }
