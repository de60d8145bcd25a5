"""docs/events.md lists every Agent Runtime event type the code emits, and the
check sees a type the page leaves out."""

from __future__ import annotations

import json
import re
from pathlib import Path

from support import EVENT_SCHEMA

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("workflows", "activities", "contract", "api", "client", "workers", "transport")
# Consumers name these types without emitting them (filters, metrics, feeds).
READ_ONLY = {"api/event_routes.py", "client/resume.py", "workers/metrics/event_counters.py"}


def _types() -> list[str]:
    return list(json.loads(EVENT_SCHEMA.read_text())["properties"]["type"]["enum"])


def _emitted() -> set[str]:
    """Schema event types named as a string literal in the code that writes events."""
    found: set[str] = set()
    types = _types()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if str(path.relative_to(ROOT)) in READ_ONLY:
                continue
            text = path.read_text()
            found |= {t for t in types if f'"{t}"' in text}
    return found


def _undocumented(page: str, emitted: set[str]) -> list[str]:
    listed = set(re.findall(r"`([a-z_]+(?:\.[a-z_]+)+)`", page))
    return sorted(t for t in emitted if t not in listed)


def test_every_emitted_event_type_is_documented() -> None:
    """Each event type a module names as a literal has a row in docs/events.md."""
    page = (ROOT / "docs" / "events.md").read_text()
    emitted = _emitted()
    assert {"rate_limit.hit", "sandbox.violation", "turn.completed"} <= emitted
    assert {"routing.decided", "routing.not_possible", "context.resolved", "tool.args"} <= emitted
    assert {"tool.progress", "history.window.loaded", "history.reconstructed"} <= emitted
    assert {"turn.submitted", "session.created", "session.updated"} <= emitted
    assert _undocumented(page, emitted) == []


def test_the_check_sees_a_missing_type() -> None:
    """A page without `rate_limit.hit` fails the check, naming the type."""
    page = (ROOT / "docs" / "events.md").read_text().replace("`rate_limit.hit`", "")
    assert _undocumented(page, _emitted()) == ["rate_limit.hit"]
