"""Loads the admin page (GET /admin/) in headless Chromium (Debian's /usr/bin/chromium) with Playwright for
Python, waits for it to draw, saves a screenshot, and prints as JSON what the page shows for each upstream:
its verdict, parked calls, tools asking inline and every figure cell. Usage: admin_page_driver.py URL PNG
(run by tests/e2e/test_migration.py with the interpreter of .peers/browser)."""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from typing import Any

from playwright.async_api import async_playwright

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
TIMEOUT_MS = 30_000
READ = """() => {
  const out = {};
  for (const sec of document.querySelectorAll("section.upstream")) {
    const cells = {};
    for (const td of sec.querySelectorAll("td[data-scope]")) {
      (cells[td.dataset.scope] ||= {})[td.dataset.field] = td.textContent;
    }
    out[sec.dataset.upstream] = {
      verdict: sec.querySelector("[data-field=verdict]").textContent,
      parked: sec.querySelector("[data-field=parked]").textContent,
      inline: [...sec.querySelectorAll("[data-tool]")].map((li) => li.dataset.tool),
      cells,
    };
  }
  return {
    upstreams: out,
    replicas: document.body.dataset.replicas,
    status: document.getElementById("status").textContent,
  };
}"""


async def main(url: str, shot: str) -> dict[str, Any]:
    async with async_playwright() as pw:
        with tempfile.TemporaryDirectory(prefix="mrtr-chromium-") as profile:
            context = await pw.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=ARGS
            )
            try:
                page = await context.new_page()
                console: list[str] = []
                page.on("console", lambda msg: console.append(f"{msg.type}: {msg.text}"))
                await page.goto(url, timeout=TIMEOUT_MS)
                await page.wait_for_function("document.body.dataset.ready === '1'", timeout=TIMEOUT_MS)
                await page.screenshot(path=shot, full_page=True)
                return {**(await page.evaluate(READ)), "console": console}
            finally:
                await context.close()


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
