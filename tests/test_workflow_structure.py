"""workflows/ stays composed: small modules, and no class built on another project class."""

from __future__ import annotations

import ast
from pathlib import Path

WORKFLOWS = Path(__file__).resolve().parents[1] / "workflows"
MAX_LINES = 400
# Bases a workflow-side class may have: typing, stdlib exceptions and pydantic, never one of
# the project's own classes (behaviour is composed, not inherited).
ALLOWED_BASES = {"Protocol", "Exception", "ValueError", "BaseModel", "ApplicationError"}


def _long_modules(root: Path) -> list[str]:
    return [
        f"{path.relative_to(root)}: {count} lines"
        for path in sorted(root.rglob("*.py"))
        if (count := len(path.read_text().splitlines())) > MAX_LINES
    ]


def _classes(root: Path) -> list[tuple[Path, str, list[str]]]:
    """Every class under `root`: its file, its name and its bases' last names."""
    return [
        (path, node.name, [ast.unparse(b).split(".")[-1] for b in node.bases])
        for path in sorted(root.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
    ]


def _inheriting_classes(root: Path) -> list[str]:
    classes = _classes(root)
    # A protocol composing narrower protocols (a part's view of the thread) adds no
    # behaviour; Python lets a protocol extend only protocols, and each names `Protocol`.
    protocols = {name for _, name, bases in classes if "Protocol" in bases}
    found = []
    for path, name, bases in classes:
        allowed = ALLOWED_BASES | protocols if "Protocol" in bases else ALLOWED_BASES
        own = [b for b in bases if b not in allowed]
        if own:
            found.append(f"{path.relative_to(root)}: {name}({', '.join(own)})")
    return found


def test_workflow_modules_are_small():
    """No module under workflows/ passes about 400 lines."""
    assert _long_modules(WORKFLOWS) == []


def test_no_workflow_class_inherits_behaviour():
    """Workflow-side classes compose collaborators; none subclasses another project class."""
    assert _inheriting_classes(WORKFLOWS) == []


def test_structure_checks_see_violations(tmp_path):
    """The checks find a long module and a mixin stack, so they cannot pass vacuously; a
    protocol made of protocols passes, a class built on a protocol's name does not."""
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "stack.py").write_text(
        "class Base:\n    pass\n\n\nclass Thread(Base, Protocol):\n    pass\n"
    )
    (tmp_path / "views.py").write_text(
        "class Facts(Protocol):\n    pass\n\n\nclass View(Facts, Protocol):\n    pass\n\n\n"
        "class Impl(Facts):\n    pass\n"
    )
    assert _long_modules(tmp_path) == [f"long.py: {MAX_LINES + 1} lines"]
    assert _inheriting_classes(tmp_path) == ["stack.py: Thread(Base)", "views.py: Impl(Facts)"]
