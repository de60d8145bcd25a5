"""The repo stands on its own: no file reaches for a `shared` folder beside the checkout."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# A relative `..` path into `shared` in any text, or a pathlib path climbing to a sibling
# `shared` (possibly split over lines). Written as a regex so this file does not match itself.
SIBLING_SHARED = re.compile(r"\.\.[/\\]shared\b|\.parents?(\[\d+\])?\s*/\s*[\"']shared[\"']")
# Tool output, never project files; only walked when there is no git checkout (a CI copy).
SKIPPED_DIRS = {".git", ".venv", ".weft", "__pycache__", ".mypy_cache", ".ruff_cache"}
SKIPPED_DIRS |= {".pytest_cache", "build", "dist"}


def _project_files(root: Path) -> list[Path]:
    """The files git would commit (tracked or new, not ignored), or a walk of the tree."""
    if (root / ".git").exists():
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout.decode()
        # A tracked file deleted in the working tree is listed but has nothing to scan.
        return sorted(root / name for name in set(listed.split("\0")) if (root / name).is_file())
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info")]
        found += [Path(folder) / name for name in files]
    return sorted(found)


def _offenders(root: Path) -> list[str]:
    """`path:line: text` for every reference to a sibling `shared` folder under root."""
    found = []
    for path in _project_files(root):
        text = path.read_bytes().decode("utf-8", errors="replace")
        for match in SIBLING_SHARED.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{path.relative_to(root)}:{line}: {' '.join(match.group().split())}")
    return found


def test_no_file_refers_to_a_sibling_shared_folder() -> None:
    """No file reads from or points at a sibling shared folder; what it needs is vendored."""
    offenders = _offenders(ROOT)
    assert not offenders, offenders


@pytest.mark.parametrize("use_git", [False, True])
def test_scan_finds_planted_references(tmp_path: Path, use_git: bool) -> None:
    """The scan flags planted references, in a git checkout and in a plain copy alike."""
    # Split so the planted texts are not in this file.
    sibling, climb = "../" + "shared", '.parent / "sha' + 'red"'
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text(f"See {sibling}/DESIGN.md.\n")
    (tmp_path / "support.py").write_text(
        'from pathlib import Path\n\nSPECS = (\n    Path(__file__).parent\n    / "sha'
        'red"\n)\nOK = Path("shared")\n'
    )
    (tmp_path / "clean.py").write_text('NAME = "shared state"\n')
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "site.py").write_text(f"x = '{sibling}'\n")
    if use_git:
        (tmp_path / ".gitignore").write_text(".venv/\n")
        subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
        subprocess.run(["git", "add", "docs", "clean.py"], cwd=tmp_path, check=True)
    assert _offenders(tmp_path) == [
        f"docs/notes.md:1: {sibling}",
        f"support.py:4: {climb}",
    ]
