"""ThreadState is a façade over parts that each own their state: no mixins, no import circle
through it, and the parts keep a call's intents and ids as the surface documents."""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from weft.activities.tool_state import IntentUnavailable, ThreadState
from weft.store import Store

ACTIVITIES = Path(__file__).resolve().parents[2] / "activities"
MAX_LINES = 400
# Bases a ThreadState-side class may have: typing and exceptions, never a project class.
ALLOWED_BASES = {
    "Protocol",
    "Exception",
    "LookupError",
    "RuntimeError",
    "PermissionError",
    "ValueError",
}


def _family(root: Path) -> list[Path]:
    """ThreadState, its parts, the tool runners around it and the hooks it runs."""
    names = ["tool_state.py", "tool_invoker.py", "tool_execute.py", "tool_call.py"]
    found = [root / n for n in names if (root / n).exists()]
    found += [p for p in sorted(root.glob("thread_*.py")) if p.name != "thread_records.py"]
    return found + sorted((root / "hooks").glob("*.py"))


def _inheriting_classes(paths: list[Path], root: Path) -> list[str]:
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).split(".")[-1] for b in node.bases]
                own = [b for b in bases if b not in ALLOWED_BASES]
                if own:
                    found.append(f"{path.relative_to(root)}: {node.name}({', '.join(own)})")
    return found


def _module(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(tree: ast.Module, prefix: str) -> Iterator[str]:
    """Every module named by an import anywhere in `tree` (functions and TYPE_CHECKING
    blocks too: a circle a type import closes is still a circle)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            continue
        yield from (n.removeprefix(prefix) for n in names if n.startswith(prefix))


def _import_graph(root: Path, prefix: str) -> dict[str, set[str]]:
    paths = {_module(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        targets = {t for t in _imported(ast.parse(path.read_text()), prefix) if t in paths}
        # A package's __init__ runs first when one of its modules is imported from outside.
        outside = {
            ".".join(t.split(".")[:i])
            for t in targets
            for i in range(1, t.count(".") + 1)
            if not module.startswith(".".join(t.split(".")[:i]) + ".")
        }
        graph[module] = (targets | (outside & set(paths))) - {module}
    return graph


def _cycles_through(graph: dict[str, set[str]], members: set[str]) -> list[list[str]]:
    """The import circles (strongly connected groups) that hold one of `members`."""

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return seen

    reached = {m: reach(m) for m in graph}
    groups = {frozenset(n for n in reached[m] if m in reached[n]) for m in members}
    return sorted(sorted(g) for g in groups if len(g) > 1)


def test_thread_state_is_composed_not_inherited():
    """No class of ThreadState, its parts, the tool runners or the hooks subclasses a
    project class: the parts are objects ThreadState holds, not mixins it stacks."""
    assert _inheriting_classes(_family(ACTIVITIES), ACTIVITIES) == []


def test_thread_state_modules_are_small():
    """No module of the ThreadState family passes about 400 lines."""
    long = [p.name for p in _family(ACTIVITIES) if len(p.read_text().splitlines()) > MAX_LINES]
    assert long == []


def test_no_import_circle_through_thread_state():
    """ThreadState's modules, the tool runners and the hooks import each other one way only
    (type-only and function-level imports included)."""
    graph = _import_graph(ACTIVITIES, "weft.activities.")
    family = {_module(p, ACTIVITIES) for p in _family(ACTIVITIES)}
    assert _cycles_through(graph, family) == []


def test_structure_checks_see_violations(tmp_path: Path) -> None:
    """The checks find a mixin stack and a circle closed by a type-only import, so they
    cannot pass vacuously."""
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "__init__.py").write_text("")
    (tmp_path / "hooks" / "runner.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from weft.activities.tool_state import ThreadState\n"
    )
    (tmp_path / "tool_state.py").write_text(
        "from weft.activities.hooks.runner import HookRunner\n"
        "class ThreadState(ThreadFiles, Protocol):\n    pass\n"
    )
    family = _family(tmp_path)
    assert _inheriting_classes(family, tmp_path) == ["tool_state.py: ThreadState(ThreadFiles)"]
    graph = _import_graph(tmp_path, "weft.activities.")
    members = {_module(p, tmp_path) for p in family}
    assert _cycles_through(graph, members) == [["hooks.runner", "tool_state"]]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'parts.db'}")
    yield opened
    opened.close()


def _state(store: Store, *, intents_from: str | None = None) -> ThreadState:
    return ThreadState(
        store=store,
        thread_id="t1",
        agent_id="helper",
        user_id=None,
        session_id=None,
        turn_id=None,
        tool_call_id="call_1",
        env={},
        abort=asyncio.Event(),
        event_prefix="m1",
        intents_from=intents_from,
    )


async def test_an_effect_scheduled_and_removed_in_one_call_leaves_no_intent(store: Store) -> None:
    """The effects part withdraws its own schedule intent from the call's intents, and
    keeps the others in order."""
    state = _state(store)
    state.compact("tidy")
    effect_id = state.schedule_effect("remind", {"text": "hi"})
    state.terminate()
    assert [i.kind for i in state.intents] == ["compact", "schedule_effect", "terminate"]
    assert await state.remove_scheduled_effect(effect_id) is True
    assert [i.kind for i in state.intents] == ["compact", "terminate"]
    assert await state.get_scheduled_effects() == []


async def test_parts_number_their_ids_per_kind_in_one_call(store: Store) -> None:
    """Facts and injected messages of one call are numbered per kind under its prefix,
    so a retried call makes the same ids."""
    state = _state(store)
    await state.emit("first")
    await state.progress("half", fraction=0.5)
    await state.emit("second")
    injected = state.inject_message("note", role="system")
    ids = [e.event_id for e in store.events.read("t1")]
    assert ids == ["m1:emit1", "m1:progress1", "m1:emit2"]
    assert injected == "msg_m1:inject1"


async def test_a_hook_state_refuses_intents_before_writing(store: Store) -> None:
    """Where no result carries intents, set_env and delete_message raise before they
    write, and the call's reads and values still work."""
    state = _state(store, intents_from="model.call")
    with pytest.raises(IntentUnavailable, match="set_env is not available to hooks in model.call"):
        await state.set_env("MODE", "fast")
    with pytest.raises(IntentUnavailable, match="delete_message"):
        await state.delete_message("m-none")
    await state.set_value("seen", True)
    assert await state.get_value("seen") is True
    assert state.env("MODE") is None and store.events.read("t1") == []
    assert state.intents == []
