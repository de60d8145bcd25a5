"""The sandbox's worker processes import what their parent imports: weft and quickjs from
the parent's own search path, even where only `PYTHONPATH` (which an isolated child
ignores) put them there."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent(
    """
    import asyncio
    from weft.activities.sandbox import SandboxPool, run_code

    async def main():
        with SandboxPool(size=1, max_workers=1) as pool:
            result = await run_code("export default 6 * 7;", pool=pool)
        print(result.status, result.result)

    asyncio.run(main())
    """
)


def test_a_worker_finds_weft_and_quickjs_where_its_parent_did(tmp_path: Path) -> None:
    """A parent that finds weft and its dependencies only through PYTHONPATH still runs code:
    the worker is handed the parent's sys.path, not a folder guessed from weft's location."""
    # A venv with nothing installed: weft (the checkout) and every dependency (this venv's
    # site-packages, as a plain path entry) come from PYTHONPATH alone.
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    deps = sysconfig.get_paths()["purelib"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), deps])}
    run = subprocess.run(
        [str(venv / "bin" / "python"), "-c", PROGRAM],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        # A worker that cannot import weft dies at start, and the run would wait for it.
        timeout=30,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["success", "42"]
