"""The migration book's counts: paths, asks, inline first/last seen, the (other) bucket, hourly buckets
rolling out of the 7-day window, and the report summed over replicas."""

from __future__ import annotations

from proxy.migration.report import combine, snapshot
from proxy.migration.tally import (
    ADAPTED,
    BUCKET_S,
    MAX_CLIENTS,
    MIRRORED,
    OTHER,
    PASSTHROUGH,
    RELAYED,
    MigrationBook,
)
from proxy.migration.verdict import Thresholds


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


START = 1_800_000_000.0 - 1_800_000_000.0 % BUCKET_S + 10  # just into an hour


def book(clock: Clock) -> MigrationBook:
    return MigrationBook({"files": ("read",), "memory": ()}, legacy_tools={"files": ("read",)}, clock=clock)


def test_paths_asks_and_the_other_bucket() -> None:
    clock = Clock(START)
    b = book(clock)
    b.listed("files", ["ask_name", 3, "write"])  # a name that is not a string is never a cell
    b.count("files", "ask_name", ADAPTED, True, True)
    clock.t += 60
    b.count("files", "ask_name", ADAPTED, True, True)
    b.count("files", "read", RELAYED, False)
    b.count("files", "made_up", MIRRORED, True)  # never listed: (other)
    b.count("files", "write", PASSTHROUGH, False)
    b.count("nowhere", "x", ADAPTED, False)  # not an upstream: not counted
    b.client("files", "old-client")
    b.client("files", "old-client")
    b.client("files", None)
    report = snapshot(b, replica="r1", thresholds=Thresholds(min_calls=1))
    files = report["upstreams"]["files"]
    assert files["tools"]["ask_name"]["life"]["calls"] == {
        "adapted": 2, "relayed": 0, "mirrored": 0, "passthrough": 0,
    }  # fmt: skip
    assert files["tools"]["ask_name"]["inline"] == {"first_seen": START, "last_seen": START + 60}
    assert files["tools"][OTHER]["last_7d"]["asked"]["mirrored"] == 1
    assert files["life"]["by_client_era"] == {"2026-07-28": 3, "legacy": 2}
    assert files["last_24h"]["total"] == 5
    assert files["legacy_clients"] == {"old-client": 2, "(unnamed)": 1}
    assert files["legacy_tools"] == {"listed": ["read"], "learned": []}
    assert files["verdict"]["state"] == "needs_proxy"
    assert report["upstreams"]["memory"]["verdict"]["state"] == "too_little_traffic"
    assert "3" not in files["tools"]


def test_buckets_roll_out_of_the_window_but_not_the_life() -> None:
    clock = Clock(START)
    b = book(clock)
    b.count("memory", "x", RELAYED, False)
    clock.t += 25 * BUCKET_S  # a day and an hour later: out of the last 24 h, still in the 7 days
    b.count("memory", "x", RELAYED, False)
    memory = snapshot(b, replica="r", thresholds=Thresholds())["upstreams"]["memory"]
    assert (memory["life"]["total"], memory["last_24h"]["total"], memory["last_7d"]["total"]) == (2, 1, 2)
    clock.t += 7 * 24 * BUCKET_S  # a week later, nothing counted since: only the life remains
    memory = snapshot(b, replica="r", thresholds=Thresholds())["upstreams"]["memory"]
    assert (memory["life"]["total"], memory["last_24h"]["total"], memory["last_7d"]["total"]) == (2, 0, 0)
    b.count("memory", "x", RELAYED, False)  # the ring is written again after a long gap
    memory = snapshot(b, replica="r", thresholds=Thresholds())["upstreams"]["memory"]
    assert (memory["life"]["total"], memory["last_24h"]["total"], memory["last_7d"]["total"]) == (3, 1, 1)


def test_client_names_are_bounded() -> None:
    b = book(Clock(START))
    for i in range(MAX_CLIENTS + 5):
        b.client("files", f"client-{i}")
    clients = b.upstreams["files"].clients
    assert len(clients) == MAX_CLIENTS + 1 and clients[OTHER] == 5


def test_combined_replicas_sum_and_the_window_is_the_youngest() -> None:
    old, young = Clock(START), Clock(START + 5 * BUCKET_S)
    a, b = book(old), book(young)
    old.t = young.t = START + 6 * BUCKET_S
    a.count("files", "read", ADAPTED, True, True)
    old.t += 30
    young.t = old.t
    b.count("files", "read", ADAPTED, True, True)
    b.count("files", "read", PASSTHROUGH, False)
    b.client("files", "legacy-app")
    summed = combine(
        [snapshot(a, replica="a", thresholds=Thresholds()), snapshot(b, replica="b", thresholds=Thresholds())]
    )
    files = summed["upstreams"]["files"]
    assert [r["replica"] for r in summed["replicas"]] == ["a", "b"]
    assert files["life"]["calls"]["adapted"] == 2 and files["life"]["total"] == 3
    assert files["tools"]["read"]["inline"] == {"first_seen": START + 6 * BUCKET_S, "last_seen": old.t}
    assert files["legacy_clients"] == {"legacy-app": 1}
    assert files["verdict"]["seen_s"] == round(old.t - (START + 5 * BUCKET_S), 1)  # the youngest's age
    assert files["verdict"]["text"] == "needs the proxy: tool read still asks inline (last just now)"
