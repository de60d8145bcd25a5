"""workflows/ imports only deterministic modules (the import boundary of DESIGN.md)."""

from __future__ import annotations

import ast
from pathlib import Path

WORKFLOWS = Path(__file__).resolve().parents[1] / "workflows"
ALLOWED_ROOTS = {
    "__future__",
    "asyncio",
    "collections",
    "contextlib",
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


# workflows/ runs outside the SDK's sandbox (workers/workflow_runner.py says why), so nothing
# checks it at run time; these scans stand in for that check.
NONDETERMINISTIC_CALLS = {"now", "utcnow", "today", "fromtimestamp", "get_event_loop"}
CLOCK_OWNERS = {"datetime", "date", "datetime.datetime", "datetime.date", "asyncio"}
# Module-level names that may be bound: constants are UPPER_CASE and never mutated.
MODULE_LEVEL_KINDS = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Import,
    ast.ImportFrom,
    ast.Expr,  # docstrings
    ast.If,  # `if TYPE_CHECKING:`
)


def _clock_reads(path: Path) -> list[str]:
    """Calls like `datetime.now()`: a clock read outside `workflow.now()`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = ast.unparse(node.func.value)
            if node.func.attr in NONDETERMINISTIC_CALLS and owner in CLOCK_OWNERS:
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node.func)}")
    return found


def _module_state(path: Path) -> list[str]:
    """Module-level bindings that are not UPPER_CASE constants, TypeVars or aliases: state
    that one workflow instance could leave behind for the next, since they share imports."""
    found = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, MODULE_LEVEL_KINDS):
            continue
        targets = (
            [node.target]
            if isinstance(node, ast.AnnAssign | ast.AugAssign)
            else getattr(node, "targets", [])
        )
        for target in targets:
            name = ast.unparse(target)
            value = getattr(node, "value", None)
            type_var = isinstance(value, ast.Call) and ast.unparse(value.func) == "TypeVar"
            # `Kind = Literal[...]`: a type alias, immutable.
            alias = name[:1].isupper() and isinstance(value, ast.Subscript | ast.BinOp)
            if not (name.isupper() or type_var or alias or name == "__all__"):
                found.append(f"{path.name}:{node.lineno}: {name}")
        if not targets:
            found.append(f"{path.name}:{node.lineno}: {type(node).__name__}")
    return found


def test_workflow_modules_read_no_clock_and_keep_no_module_state():
    """Run outside the sandbox, workflows/ must still be replay-safe and stateless."""
    paths = sorted(WORKFLOWS.rglob("*.py"))
    assert [f for p in paths for f in _clock_reads(p)] == []
    assert [f for p in paths for f in _module_state(p)] == []


def test_state_and_clock_scans_find_offenders(tmp_path):
    """The scans above see what they look for, so they cannot pass vacuously."""
    bad = tmp_path / "bad_workflow.py"
    bad.write_text(
        "from datetime import datetime\n"
        "from typing import TypeVar\n"
        "T = TypeVar('T')\n"
        "LIMIT = 3\n"
        "seen: dict[str, int] = {}\n"
        "cache = []\n"
        "def f():\n"
        "    return datetime.now(), workflow.now()\n"
    )
    assert _clock_reads(bad) == ["bad_workflow.py:8: datetime.now"]
    assert _module_state(bad) == ["bad_workflow.py:5: seen", "bad_workflow.py:6: cache"]
