"""The CLI's live transcript: reasoning apart from the answer, prompt tools indented by depth."""

from __future__ import annotations

import io

from weft.cli.render import TranscriptPrinter
from weft.contract.events import Event


def _event(kind: str, payload: dict[str, object]) -> Event:
    return Event(
        type=kind,
        event_id=f"e-{kind}",
        timestamp="2026-01-01T00:00:00Z",
        thread_id="t",
        payload=payload,
    )


def test_reasoning_deltas_print_on_their_own_line_before_the_answer() -> None:
    """reasoning.delta text streams under "(thinking)", then the answer under "assistant:"."""
    out = io.StringIO()
    printer = TranscriptPrinter(out)
    for kind, payload in [
        ("reasoning.delta", {"text": "The user ", "attempt": 1}),
        ("reasoning.delta", {"text": "wants Lisbon.", "attempt": 1}),
        ("model.delta", {"text": "Sunny", "kind": "text", "attempt": 1}),
        ("model.delta", {"text": '{"city"', "kind": "tool_call", "attempt": 1}),
        ("model.delta", {"text": " today.", "kind": "text", "attempt": 1}),
        ("model.completed", {}),
    ]:
        printer.show(_event(kind, payload))
    assert out.getvalue() == "  (thinking) The user wants Lisbon.\nassistant: Sunny today.\n"


def test_prompt_tool_steps_are_indented_under_its_call() -> None:
    """Events carrying parentToolCallId print one step in per depth; the caller's do not."""
    out = io.StringIO()
    printer = TranscriptPrinter(out)
    inside: dict[str, object] = {"parentToolCallId": "c1", "depth": 1}
    steps: list[tuple[str, dict[str, object]]] = [
        ("tool.started", {"name": "advisor", "arguments": "{}"}),
        ("model.delta", {"text": "Thinking", "kind": "text", **inside}),
        ("model.completed", inside),
        ("tool.started", {"name": "weather", "arguments": "{}", **inside}),
        ("tool.result", {"name": "weather", "status": "success", **inside}),
        ("tool.result", {"name": "advisor", "status": "success"}),
        ("model.delta", {"text": "Done.", "kind": "text"}),
    ]
    for kind, payload in steps:
        printer.show(_event(kind, payload))
    assert out.getvalue().splitlines() == [
        "  → advisor({})",
        "    assistant: Thinking",
        "      → weather({})",
        "      ← weather success",
        "  ← advisor success",
        "assistant: Done.",
    ]


def test_mcp_catalogues_print_one_line_per_server() -> None:
    """A listed server shows its tools (and why it was listed again); a failed one, why."""
    out = io.StringIO()
    servers = {
        "notes": {"status": "ready", "tools": ["notes_add", "notes_list"]},
        "web": {"status": "failed", "tools": [], "error": "MCP server 'web': exited at once"},
    }
    printer = TranscriptPrinter(out)
    printer.show(_event("tool.catalog.resolved", {"reason": "prompt_active", "servers": servers}))
    again = {"notes": {"status": "ready", "tools": ["notes_add"]}}
    printer.show(_event("tool.catalog.resolved", {"reason": "refresh", "servers": again}))
    assert out.getvalue().splitlines() == [
        "  (MCP notes ready: notes_add, notes_list)",
        "  (MCP web unavailable: MCP server 'web': exited at once)",
        "  (MCP notes ready, refresh: notes_add)",
    ]
