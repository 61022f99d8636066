"""Loads pages in headless Chromium (Debian's /usr/bin/chromium) with Playwright for Python and prints, as
one JSON list, what each page left in `window.__result` once it set `window.__done`.

Run by tests/e2e/test_browser.py with the interpreter of .peers/browser (pip `playwright`; its own browser
downloads are never used: `playwright install` is never run). Usage: browser_driver.py URL...
Each page gets at most PAGE_TIMEOUT_MS; the browser runs with a fresh profile that is deleted afterwards.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from typing import Any

from playwright.async_api import async_playwright

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PAGE_TIMEOUT_MS = 30_000


async def main(urls: list[str]) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    async with async_playwright() as pw:
        with tempfile.TemporaryDirectory(prefix="mrtr-chromium-") as profile:
            context = await pw.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=ARGS
            )
            try:
                for url in urls:
                    page = await context.new_page()
                    console: list[str] = []
                    page.on("console", lambda msg, log=console: log.append(f"{msg.type}: {msg.text}"))
                    await page.goto(url, timeout=PAGE_TIMEOUT_MS)
                    await page.wait_for_function("window.__done === true", timeout=PAGE_TIMEOUT_MS)
                    result = await page.evaluate("window.__result")
                    results.append({"url": url, "result": result, "console": console})
                    await page.close()
            finally:
                await context.close()
    return results


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1:]))))
