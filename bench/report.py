"""Turns a bench run (``bench/run.py``'s data) into medians, ratios, target verdicts (``summary.py``),
tables (``tables.py``), a plot (``plot.py``) and a profile summary (``hotspots.py``, read while the run
profiles), and writes them: ``bench/results/latest.json``, ``latest.png`` and a dated section of
``bench/RESULTS.md``.

Re-render the latest run without measuring again: ``python bench/report.py [bench/results/latest.json]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from plot import plot
from summary import summarize
from tables import markdown

RESULTS_HEADER = """# Benchmark results

Each `make bench` (or `make bench-quick`) run appends a section here: the date, the machine, and the table it
printed. How the numbers are taken: `bench/README.md`. Newest last.
"""


def finish(data: dict[str, Any], results: Path, results_md: Path, *, record: bool) -> None:
    summary = summarize(data)
    data["summary"] = summary
    (results / "latest.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    text = markdown(data, summary)
    try:
        plot(data, summary, results / "latest.png")
    except Exception as exc:  # the table and JSON still matter without the plot
        print(f"plot failed: {exc}", file=sys.stderr)
    print(text)
    if record:
        if not results_md.exists():
            results_md.write_text(RESULTS_HEADER)
        with results_md.open("a") as f:
            f.write(
                f"\n## {data['date']} — `make bench{'-quick' if data['plan']['name'] == 'quick' else ''}`\n\n"
            )
            f.write(text + "\n")
    print(
        f"\nwrote {results / 'latest.json'}, {results / 'latest.png'}"
        + (f", appended to {results_md}" if record else ""),
        file=sys.stderr,
    )


def main() -> int:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "results" / "latest.json"
    data = json.loads(path.read_text())
    summary = summarize(data)
    plot(data, summary, path.with_suffix(".png"))
    print(markdown(data, summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
