"""workflows/ imports only deterministic modules (the import boundary of DESIGN.md)."""

from __future__ import annotations

import ast
from pathlib import Path

WORKFLOWS = Path(__file__).resolve().parents[1] / "workflows"
ALLOWED_ROOTS = {
    "__future__",
    "asyncio",
    "collections",
    "dataclasses",
    "datetime",
    "json",
    "math",
    "typing",
    "types",
    "enum",
    "pydantic",
    "contract",
    "workflows",
}
ALLOWED_TEMPORAL = {
    "temporalio",
    "temporalio.workflow",
    "temporalio.common",
    "temporalio.exceptions",
}


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
            if node.module == "temporalio":
                names += [f"temporalio.{alias.name}" for alias in node.names]
    return names


def test_workflow_modules_import_only_deterministic_code():
    """Every import under workflows/ is stdlib-pure, pydantic, contract or temporal's workflow side."""
    offenders = []
    for path in sorted(WORKFLOWS.rglob("*.py")):
        for name in _imports(path):
            if name.startswith("temporalio"):
                if name not in ALLOWED_TEMPORAL:
                    offenders.append(f"{path.name}: {name}")
            elif name.removeprefix("weft.").split(".")[0] not in ALLOWED_ROOTS:
                offenders.append(f"{path.name}: {name}")
    assert not offenders, offenders


def test_boundary_check_sees_io_imports(tmp_path):
    """The import scan finds I/O imports, so the check above cannot pass vacuously."""
    bad = tmp_path / "bad_workflow.py"
    bad.write_text("import httpx\nfrom temporalio import activity\n")
    assert _imports(bad) == ["httpx", "temporalio", "temporalio.activity"]
