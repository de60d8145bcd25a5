"""The workflow's parts are handed narrow views of the thread's memory, not all of it."""

from __future__ import annotations

import ast
from pathlib import Path

import weft.workflows

WORKFLOWS = Path(weft.workflows.__file__).resolve().parent
# What reads the whole memory by nature: the carrier of continue-as-new, the read models
# (thread_read, the inventory, the Temporal UI's details) and the outbox that writes the
# thread row and those details.
WHOLE_MEMORY = {
    "continuation.py",
    "read_models.py",
    "inventory.py",
    "ui_summaries.py",
    "outbox.py",
}


def _takes_memory(source: str) -> list[str]:
    """Functions with a parameter typed `ThreadMemory`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            params = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            if any(
                isinstance(p.annotation, ast.Name) and p.annotation.id == "ThreadMemory"
                for p in params
            ):
                found.append(node.name)
    return found


def test_only_whole_thread_readers_take_the_memory() -> None:
    """Every other part takes a `Protocol` view; the check sees a planted parameter."""
    takers = {
        str(path.relative_to(WORKFLOWS)): names
        for path in WORKFLOWS.rglob("*.py")
        if (names := _takes_memory(path.read_text()))
    }
    assert set(takers) <= WHOLE_MEMORY, takers
    planted = (
        "def part(mem: ThreadMemory) -> None: ...\n"
        "class P:\n"
        "    def __init__(self, x: int, mem: ThreadMemory) -> None: ...\n"
    )
    assert _takes_memory(planted) == ["part", "__init__"]
