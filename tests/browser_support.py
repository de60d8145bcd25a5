"""Launching Debian's chromium for the browser tests (the inbox page, the Temporal UI)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from playwright.async_api import Browser, Playwright

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
