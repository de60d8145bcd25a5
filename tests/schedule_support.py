"""Helpers for the schedule tests: the `weft` CLI run in-process, and bounded polling."""

from __future__ import annotations

import asyncio
import io
import uuid
from collections.abc import Awaitable, Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, TypeVar

import yaml

from weft.cli.main import run

T = TypeVar("T")


def cli_config(tmp_path: Path, weft_config: Any, task_queue: str) -> Path:
    """A CLI config file for the test's dev server, store and task queue."""
    path = tmp_path / "cli.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "temporal": {"address": weft_config.temporal.address, "taskQueue": task_queue},
                "store": {"url": weft_config.store_url()},
            }
        )
    )
    return path


async def weft_cli(config: Path, *args: str) -> tuple[int, str, str]:
    """Run the `weft` entry point in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()

    def call() -> int:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                return run(["--config", str(config), *args])
            except SystemExit as exit_:  # argparse refuses bad usage this way
                return int(exit_.code or 0)

    # `run` drives its own event loop, so it runs in a thread beside the test's loop.
    code = await asyncio.to_thread(call)
    return code, out.getvalue(), err.getvalue()


async def weft_ok(config: Path, *args: str) -> str:
    """Run `weft`, insist it exits 0, and return its stdout."""
    code, out, err = await weft_cli(config, *args)
    assert code == 0, f"weft {' '.join(args)} exited {code}: {err}"
    return out


async def eventually(
    probe: Callable[[], Awaitable[T]], holds: Callable[[T], bool], *, timeout: float = 20
) -> T:
    """Poll `probe` until its value satisfies `holds`, or fail naming the last value."""
    deadline = asyncio.get_running_loop().time() + timeout
    value = await probe()
    while not holds(value):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout} s; last value: {value}")
        await asyncio.sleep(0.2)
        value = await probe()
    return value


def schedule_name(kind: str) -> str:
    """A schedule name of its own for one test."""
    return f"{kind}-{uuid.uuid4().hex[:8]}"
