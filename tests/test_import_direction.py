"""Imports between client/, workers/ and transport/ run one way: only cli/ composes them all."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Package -> the top-level packages it must not import (tests/ and bench/ may import anything).
FORBIDDEN = {
    "client": {"workers", "cli"},
    "workers": {"client", "cli"},
    "transport": {"client", "workers", "cli"},
    # The HTTP API composes client/ and the gateway of workers/, and is composed by cli/.
    "api": {"cli"},
}


def _imports(path: Path) -> list[str]:
    """Absolute module names imported anywhere in `path`, lazy imports in functions included."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        # A relative import cannot leave its own top-level package, so it cannot cross over.
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def violations(root: Path) -> list[str]:
    """`file: module` for every import under `root` that goes against FORBIDDEN."""
    found = []
    for package, banned in FORBIDDEN.items():
        for path in sorted((root / package).rglob("*.py")):
            for name in _imports(path):
                if name.removeprefix("weft.").split(".")[0] in banned:
                    found.append(f"{path.relative_to(root).as_posix()}: {name}")
    return found


def test_client_workers_and_transport_import_in_one_direction():
    """client/ and workers/ import neither each other nor cli/, and transport/ imports none."""
    offenders = violations(ROOT)
    assert not offenders, "imports against the direction client/workers -> transport:\n" + (
        "\n".join(offenders)
    )


def test_direction_check_finds_planted_violations(tmp_path):
    """The scan reports forbidden imports, nested and lazy ones too, so it cannot pass vacuously."""
    (tmp_path / "client").mkdir()
    (tmp_path / "client" / "bad.py").write_text(
        "from workers.config import WeftConfig\n\ndef f():\n    import cli.main\n"
    )
    (tmp_path / "transport" / "nested").mkdir(parents=True)
    (tmp_path / "transport" / "nested" / "bad.py").write_text(
        "import contract\nfrom . import sibling\nfrom client import threads\n"
    )
    (tmp_path / "workers").mkdir()
    (tmp_path / "workers" / "ok.py").write_text("from transport.connection import connect\n")
    assert violations(tmp_path) == [
        "client/bad.py: workers.config",
        "client/bad.py: cli.main",
        "transport/nested/bad.py: client",
    ]


INTERNAL = {
    "contract",
    "workflows",
    "activities",
    "store",
    "definitions",
    "transport",
    "workers",
    "client",
    "cli",
    "api",
}


def bare_imports(root: Path) -> list[str]:
    """`file: module` for every import of an internal part by its bare name (not weft.X)."""
    found = []
    for folder in (*sorted(INTERNAL), "weft", "tests", "bench"):
        base = root / folder
        if not base.is_dir() or base.is_symlink():
            continue
        for path in sorted(base.rglob("*.py")):
            for name in _imports(path):
                if name.split(".")[0] in INTERNAL:
                    found.append(f"{path.relative_to(root).as_posix()}: {name}")
    return found


def test_every_import_names_the_weft_package():
    """Code imports `weft.activities…`, never `activities…`: in a checkout the bare names
    still resolve from the root, and a module loaded under both names would exist twice."""
    assert not bare_imports(ROOT)


def test_bare_import_check_finds_planted_ones(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "bad.py").write_text("import weft.client\nfrom activities import x\n")
    assert bare_imports(tmp_path) == ["tests/bad.py: activities"]
