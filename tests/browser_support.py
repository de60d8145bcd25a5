"""Launching Debian's chromium for the browser tests (the inbox page, the Temporal UI)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Page, Playwright

CHROMIUM = "/usr/bin/chromium"
# Headless, and nothing that reaches the network or writes a profile beyond the test's own.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


async def launch_chromium(playwright: Playwright) -> Browser:
    """Debian's chromium if installed, else Playwright's own; no browser skips the test
    here, but fails it in CI, where the browser test must run."""
    executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    try:
        return await playwright.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS, timeout=30_000
        )
    except Exception as error:
        first_line = str(error).strip().splitlines()[0]  # Playwright adds a banner
        message = (
            f"no browser could be launched ({executable or 'Playwright default'}): {first_line}"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message} (CI=true, so the browser test must run)", pytrace=False)
        pytest.skip(message)


def page_problems(page: Page) -> list[str]:
    """Script errors and console errors (a CSP refusal is one) the page reports."""
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))

    def console(message: Any) -> None:
        if message.type == "error":
            problems.append(f"console: {message.text}")

    page.on("console", console)
    return problems


async def screenshot(page: Page, tmp_path: Path, name: str) -> Path:
    """A full-page screenshot in the test's directory, copied to $WEFT_TEST_ARTIFACTS if set."""
    shot = tmp_path / name
    await page.screenshot(path=str(shot), full_page=True)
    artifacts = os.environ.get("WEFT_TEST_ARTIFACTS")
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shot = Path(shutil.copy(shot, Path(artifacts) / name))
    return shot
