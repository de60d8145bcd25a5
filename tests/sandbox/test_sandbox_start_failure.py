"""A sandbox worker that cannot start fails the run with the reason, after bounded retries,
instead of leaving it waiting for a worker forever."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

from weft.activities.sandbox import SandboxPool, run_code

# Three failed starts take well under a second each; a hang is what this bound catches.
SETTLED_WITHIN_S = 30


def _failing_python(folder: Path) -> Path:
    """An interpreter that cannot import weft: it says so on stderr, counts its starts, exits 3."""
    starts = folder / "starts"
    script = folder / "python"
    script.write_text(
        "#!/bin/sh\n"
        f"echo start >> {starts}\n"
        "echo \"ModuleNotFoundError: No module named 'weft'\" >&2\n"
        "exit 3\n"
    )
    script.chmod(0o755)
    return script


async def test_a_worker_that_exits_at_start_fails_the_run_with_its_stderr(tmp_path: Path) -> None:
    """Runs on a pool whose workers exit at once settle `error` naming the exit status and
    stderr, after a bounded number of starts; a later run tries again and fails alike."""
    python = _failing_python(tmp_path)
    with SandboxPool(size=1, max_workers=2, python=str(python)) as pool:
        first = await asyncio.wait_for(run_code("export default 1;", pool=pool), SETTLED_WITHIN_S)
        second = await asyncio.wait_for(run_code("export default 2;", pool=pool), SETTLED_WITHIN_S)

    for result in (first, second):
        assert result.status == "error"
        assert result.error is not None and result.error.name == "SandboxStartError"
        assert "exited at start (exit status 3)" in result.error.message
        assert "No module named 'weft'" in result.error.message
    starts = len((tmp_path / "starts").read_text().split())
    assert 3 <= starts <= 12, starts  # retried, and bounded


async def test_an_interpreter_that_does_not_exist_fails_the_run(tmp_path: Path) -> None:
    """A pool given a missing interpreter settles its run `error`, naming the path."""
    missing = tmp_path / "no-such-python"
    with SandboxPool(size=0, max_workers=1, python=str(missing)) as pool:
        result = await asyncio.wait_for(run_code("export default 1;", pool=pool), SETTLED_WITHIN_S)

    assert result.status == "error"
    assert result.error is not None and result.error.name == "SandboxStartError"
    assert f"could not be started with {str(missing)!r}" in result.error.message


async def test_a_pool_that_starts_workers_still_runs_code() -> None:
    """The default interpreter, named explicitly, starts workers that run code."""
    with SandboxPool(size=0, max_workers=1, python=sys.executable) as pool:
        result = await asyncio.wait_for(run_code("export default 6 * 7;", pool=pool), 60)
    assert (result.status, result.result) == ("success", 42)


async def test_closing_the_pool_fails_the_runs_waiting_for_a_worker() -> None:
    """A run waiting for the one busy worker settles `error` when the pool closes."""
    with SandboxPool(size=0, max_workers=1) as pool:
        busy = run_code("export default () => { while (true) {} };", pool=pool)
        waiting = run_code("export default 1;", pool=pool)
        await _until(lambda: bool(pool._waiters))  # queued behind the busy worker
        pool.close()
        result = await asyncio.wait_for(waiting, SETTLED_WITHIN_S)
        busy.terminate()
    assert result.status == "error"
    assert result.error is not None and "the sandbox pool is closed" in result.error.message


async def _until(fact: Callable[[], bool]) -> None:
    """Wait, bounded, until `fact()` holds."""
    async with asyncio.timeout(SETTLED_WITHIN_S):
        while not fact():
            await asyncio.sleep(0.01)
