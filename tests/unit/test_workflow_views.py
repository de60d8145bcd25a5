"""The workflow's parts are handed narrow views of the thread's memory, not all of it."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Protocol

import weft.workflows
from weft.workflows import inventory, outbox, read_models, ui_summaries

WORKFLOWS = Path(weft.workflows.__file__).resolve().parent
# Only two modules take the whole memory: the carrier of continue-as-new, which serializes
# all of it into the next run's start input and rebuilds it there, and the composition
# root, which hands each part its view of it. The read models, the inventory, the Temporal
# UI's details and the outbox read views naming what they show.
WHOLE_MEMORY = {"continuation.py", "thread_parts.py"}


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


def _assignable(view: type) -> list[str]:
    """Fields a `Protocol` view (or one of the views it extends) declares as attributes."""
    return [
        name
        for base in view.__mro__
        if getattr(base, "_is_protocol", False)
        for name in vars(base).get("__annotations__", {})
    ]


def test_the_whole_thread_readers_take_read_only_views() -> None:
    """The read models, the inventory, the UI's details and the outbox assign no field of
    the memory: their views are properties; the check sees a planted attribute."""
    views = [
        read_models.ThreadShown,
        read_models.MessageIndex,
        read_models.WindowShown,
        inventory.SnapshotWriter,
        ui_summaries.DetailsShown,
        outbox.OutboxView,
    ]
    assert {view.__name__: _assignable(view) for view in views} == {
        view.__name__: [] for view in views
    }

    class Planted(read_models.WindowShown, Protocol):
        status: str

    assert _assignable(Planted) == ["status"]
