"""The stop reason has one owner: `ThreadStop`, changed only through methods naming why."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from unit_support import memory

import weft.workflows

WORKFLOWS = Path(weft.workflows.__file__).resolve().parent
OWNER = "thread_stop.py"


def _assignments(source: str) -> list[int]:
    """Lines that assign a stop reason (`x.stop_reason = …` or `x.stop.reason = …`)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            targets = [t for target in node.targets for t in _flat(target)]
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Attribute) and _is_stop_reason(t) for t in targets):
            lines.append(node.lineno)
    return lines


def _flat(target: ast.expr) -> list[ast.expr]:
    return list(target.elts) if isinstance(target, ast.Tuple) else [target]


def _is_stop_reason(target: ast.Attribute) -> bool:
    if target.attr == "stop_reason":
        return not (isinstance(target.value, ast.Name) and target.value.id in {"entry", "report"})
    return (
        target.attr == "reason"
        and isinstance(target.value, ast.Attribute)
        and (target.value.attr == "stop")
    )


def test_no_workflow_part_but_the_owner_assigns_the_stop_reason() -> None:
    """Only thread_stop.py sets the thread's stop reason; the check sees a planted assignment."""
    offenders = {
        str(path.relative_to(WORKFLOWS)): lines
        for path in WORKFLOWS.rglob("*.py")
        if path.name != OWNER and (lines := _assignments(path.read_text()))
    }
    assert offenders == {}
    assert _assignments("mem.stop_reason = 'step_error'") == [1]
    assert _assignments("mem.stop.reason, x = None, 1") == [1]


def test_the_memory_reads_the_stop_reason_but_cannot_set_it() -> None:
    """`ThreadMemory.stop_reason` is the owner's reason, and read-only."""
    mem = memory()
    mem.stop.hook_blocked()
    assert mem.stop_reason == "hook_blocked"
    with pytest.raises(AttributeError):
        mem.stop_reason = "step_error"  # type: ignore[misc]


def test_a_step_failure_keeps_the_reason_the_step_stopped_for() -> None:
    """The owner tells a step's own verdict (interrupted, blocked…) from a generic failure."""
    mem = memory()
    mem.stop.interrupted()
    assert mem.stop.stopped_in_step()
    mem.stop.session_started()
    assert mem.stop_reason is None and not mem.stop.stopped_in_step()
    mem.stop.step_failed()
    assert mem.stop_reason == "step_error"
