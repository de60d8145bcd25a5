"""The `weft` package is weft/ plus the top-level folders it holds as symlinks: a wheel
carries each of their files once, and a checkout made without symlinks fails at
`import weft` with one line saying how to fix it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARTS = sorted(path.name for path in (ROOT / "weft").iterdir() if path.is_symlink())
# The files setuptools ships: the modules and the package data pyproject.toml names.
SHIPPED = {".py", ".ini", ".mako", ".yaml", ".yml", ".js", ".html", ".css"}


def _import_weft(package_dir: Path) -> subprocess.CompletedProcess[str]:
    """`import weft` in a fresh interpreter that sees only `package_dir`'s weft (no site,
    so not the editable install either)."""
    code = f"import sys; sys.path.insert(0, {str(package_dir)!r}); import weft"
    return subprocess.run(
        [sys.executable, "-S", "-I", "-c", code], capture_output=True, text=True, timeout=60
    )


def _copy_weft(into: Path, *, symlinks_as_files: bool) -> Path:
    """weft/'s own files under `into`, its parts as empty folders or as the text files a
    checkout without symlinks has (the link's target)."""
    package = into / "weft"
    package.mkdir(parents=True)
    shutil.copy(ROOT / "weft" / "__init__.py", package)
    for part in PARTS:
        if symlinks_as_files:
            (package / part).write_text(f"../{part}")
        else:
            (package / part).mkdir()
    return into


def test_a_checkout_without_symlinks_fails_at_import_with_the_fix(tmp_path):
    """With the parts as plain files, `import weft` fails with one line naming the fix."""
    run = _import_weft(_copy_weft(tmp_path, symlinks_as_files=True))
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: weft: weft/activities and ")
    assert "git config core.symlinks true" in last


def test_a_whole_checkout_imports(tmp_path):
    """With the parts as folders (symlinks resolved, or a wheel), `import weft` succeeds."""
    run = _import_weft(_copy_weft(tmp_path, symlinks_as_files=False))
    assert run.returncode == 0, run.stderr


def test_the_wheel_carries_each_part_file_once(tmp_path):
    """The wheel holds every shipped file of every symlinked part, once, under weft/."""
    source = tmp_path / "source"
    # A clean copy: setuptools would reuse a checkout's stale build/ directory.
    shutil.copytree(
        ROOT,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".venv", "build", "*.egg-info", ".git", ".weft", "__pycache__", "tests", "bench"
        ),
    )
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), source],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("weft-*.whl")
    names = Counter(zipfile.ZipFile(wheel).namelist())
    assert not [name for name, count in names.items() if count > 1]
    expected = {
        f"weft/{path.relative_to(source).as_posix()}"
        for part in PARTS
        for path in (source / part).rglob("*")
        if path.suffix in SHIPPED and "__pycache__" not in path.parts
    }
    assert "weft/activities/sandbox/_runtime.js" in expected  # package data counts too
    assert expected - names.keys() == set()
    assert {name for name in names if name.split("/")[1] in PARTS} == expected
