"""A bench run as one figure (``bench/results/latest.png``): pass-through throughput and p50 against clients,
the round trips, and the proxy's memory and new-call latency as calls are parked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tables import PATH_LABEL, UPSTREAM_LABEL


def plot(data: dict[str, Any], s: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    colours = {"direct": "#4c72b0", "mrtr": "#dd8452", "fastmcp": "#55a868", "fastmcp_shared": "#8172b3"}
    styles = {"minimal": "-", "fastmcp130": "--"}
    ax_tp, ax_lat, ax_rt, ax_park = axes[0][0], axes[0][1], axes[1][0], axes[1][1]
    for kind, rows in s["pass"].items():
        cs = sorted(rows, key=int)
        for path in ("direct", "mrtr", "fastmcp", "fastmcp_shared"):
            if path not in rows[cs[0]]:
                continue
            xs = [int(c) for c in cs if rows[c][path]["throughput_rps"] is not None]
            label = f"{PATH_LABEL[path]} → {UPSTREAM_LABEL.get(kind, kind).replace(' legacy server', '')}"
            ax_tp.plot(
                xs,
                [rows[str(c)][path]["throughput_rps"] for c in xs],
                styles.get(kind, "-"),
                marker="o",
                color=colours[path],
                label=label,
            )
            ax_lat.plot(
                xs,
                [rows[str(c)][path]["p50_ms"] for c in xs],
                styles.get(kind, "-"),
                marker="o",
                color=colours[path],
                label=label,
            )
    ticks = sorted({int(c) for rows in s["pass"].values() for c in rows})
    for ax, title, unit in (
        (ax_tp, "Pass-through throughput", "requests/s"),
        (ax_lat, "Pass-through p50 latency", "ms"),
    ):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_xlabel("concurrent clients")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    ax_lat.set_yscale("log")
    ax_tp.set_yscale("log")
    ax_tp.legend(fontsize=7)

    if s["roundtrip"]:
        kinds = list(s["roundtrip"])
        paths = [
            ("direct", "direct (legacy inline)"),
            ("mrtr", "mrtr-proxy (MRTR, gather 50 ms)"),
            ("mrtr_gather0", "mrtr-proxy (MRTR, gather 0)"),
            ("floor", "aiohttp floor relay (MRTR)"),
            ("fastmcp", "FastMCP proxy (inline)"),
        ]
        width = 0.8 / len(paths)
        for i, (path, label) in enumerate(paths):
            vals = [(s["roundtrip"][k].get(path) or {}).get("p50_ms") or 0 for k in kinds]
            xs = [j + i * width for j in range(len(kinds))]
            bars = ax_rt.bar(xs, vals, width, label=label)
            ax_rt.bar_label(bars, fmt="%.1f", fontsize=7)
        ax_rt.set_xticks([j + width * (len(paths) - 1) / 2 for j in range(len(kinds))])
        ax_rt.set_xticklabels([UPSTREAM_LABEL.get(k, k) for k in kinds])
        ax_rt.set_ylabel("p50 ms (one elicitation round trip, 1 client)")
        ax_rt.set_title("Round trip with one elicitation")
        ax_rt.legend(fontsize=7)
        ax_rt.grid(True, axis="y", alpha=0.3)

    if s.get("parked"):
        rows = [r for r in s["parked"] if r["get_stream"]]
        noget = [r for r in s["parked"] if not r["get_stream"] and r["parked"]]
        xs = [r["parked"] or 0 for r in rows]
        ax_park.plot(
            xs, [r["proxy_rss_mb"] for r in rows], marker="o", color="#dd8452", label="proxy RSS (MB)"
        )
        if noget:
            ax_park.plot(
                [r["parked"] for r in noget],
                [r["proxy_rss_mb"] for r in noget],
                marker="x",
                linestyle="",
                color="#c44e52",
                label="proxy RSS, server without GET stream (MB)",
            )
        ax_park.set_xlabel("calls parked")
        ax_park.set_ylabel("proxy RSS MB")
        ax_park.set_title("Parked calls: proxy memory and new-call latency")
        ax_park.grid(True, alpha=0.3)
        twin = ax_park.twinx()
        twin.plot(
            xs,
            [r["c1"]["p50_ms"] for r in rows],
            marker="s",
            color="#4c72b0",
            label="new call p50, 1 client (ms)",
        )
        twin.plot(
            xs,
            [r["c16"]["p99_ms"] for r in rows],
            marker="^",
            color="#55a868",
            label="new call p99, 16 clients (ms)",
        )
        twin.set_ylabel("ms")
        h1, l1 = ax_park.get_legend_handles_labels()
        h2, l2 = twin.get_legend_handles_labels()
        ax_park.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper left")
    m = data["machine"]
    fig.suptitle(
        f"mrtr-proxy benchmarks — {data['date']} — {m['nproc']} cores {m['cpu_model']}, Python {m['python']}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
