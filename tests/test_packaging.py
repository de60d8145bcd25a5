"""weft installs as one top-level package, `weft`: a user's own `client` (or `workers`, …)
module beside their program no longer collides with weft's internals.

The wheel is built from this checkout and unpacked into a fresh venv that sees no editable
install and no checkout; the dependencies come from this venv's site-packages by path
(a path entry, so the editable finder's `.pth` there is not processed).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The package's parts are the checkout's top-level folders that weft/ links to, so a part
# added or moved out of another is on this list without anyone editing it.
INTERNAL = sorted(p.name for p in (ROOT / "weft").iterdir() if p.is_symlink() and p.is_dir())

USER_PROGRAM = textwrap.dedent(
    """
    import client, workers
    from pydantic import BaseModel
    import weft
    from weft.client.threads import Threads
    from weft.workflows.agent_thread import AgentThreadWorkflow

    class Args(BaseModel):
        city: str

    definitions = weft.Definitions().add(
        weft.define_model(name="m", provider="openai", model="gpt-4.1-mini"),
        weft.define_prompt(name="p", toolDescription="p", model="m", prompt="hi", tools=["t"]),
        weft.define_agent(name="a", sideA={"prompt": "p"}),
        weft.define_tool(name="t", description="t", args=Args, execute=lambda s, a: a.city),
    )
    definitions.validate()
    print(client.NAME, workers.NAME, weft.__file__, Threads.__module__, AgentThreadWorkflow.__name__)
    """
)


def test_the_parts_are_every_linked_folder() -> None:
    """The parts list holds every folder weft/ links to, the store and definitions too."""
    assert {"store", "definitions", "contract", "workflows", "activities"} <= set(INTERNAL)
    assert all((ROOT / name / "__init__.py").is_file() for name in INTERNAL)


def test_a_user_module_named_client_does_not_collide(tmp_path: Path) -> None:
    """The installed wheel holds `weft` alone at top level, so a user's `client.py` and
    `workers/` import as theirs beside it."""
    # Built from a clean copy: setuptools would reuse a checkout's stale build/ directory.
    source = tmp_path / "source"
    shutil.copytree(
        ROOT,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".venv", "build", "*.egg-info", ".git", ".weft", "__pycache__"
        ),
    )
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(wheels),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = wheels.glob("weft-*.whl")

    venv = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # A pure-Python wheel installs by unpacking it (pip would also touch this venv's own,
    # editable weft: it uninstalls a distribution it finds installed, whatever the prefix).
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    # Only `weft` is installed at top level: none of the internal names.
    top_level = {p.name for p in site.iterdir()}
    assert "weft" in top_level and not top_level & set(INTERNAL), sorted(top_level)
    # The demo's definitions ship whole: its MCP server's definition and program too.
    demo = site / "weft" / "workers" / "demo" / "definitions"
    assert (demo / "mcp" / "travel_notes.yaml").is_file()
    assert (demo / "mcp_servers" / "travel_notes.py").is_file()
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    app = tmp_path / "app"
    app.mkdir()
    (app / "client.py").write_text("NAME = 'my client'\n")
    (app / "workers").mkdir()
    (app / "workers" / "__init__.py").write_text("NAME = 'my workers'\n")
    (app / "main.py").write_text(USER_PROGRAM)
    run = subprocess.run(
        [str(python), "main.py"], cwd=app, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    words = run.stdout.split()
    assert words[:4] == ["my", "client", "my", "workers"]
    assert words[4] == str(site / "weft" / "__init__.py")  # the wheel's copy, not the checkout
    assert words[5:] == ["weft.client.threads", "AgentThreadWorkflow"]
