"""The CLI's live transcript shows each hook run: what it did, why it refused, or its error."""

from __future__ import annotations

import io

from weft.cli.render import TranscriptPrinter
from weft.contract.events import Event


def test_hook_runs_print_one_line_each() -> None:
    """hook.completed shows its outcome (and a refusal's reason); hook.failed its error."""
    out = io.StringIO()
    printer = TranscriptPrinter(out)
    for kind, payload in [
        ("hook.started", {"hookId": "audit", "hook": "after_tool_call_success"}),
        (
            "hook.completed",
            {"hookId": "audit", "hook": "after_tool_call_success", "outcome": "kept"},
        ),
        (
            "hook.completed",
            {
                "hookId": "guard",
                "hook": "before_create_message",
                "outcome": "blocked",
                "reason": "no",
            },
        ),
        ("hook.failed", {"hookId": "bug", "hook": "filter_messages", "error": "RuntimeError: x"}),
    ]:
        printer.show(
            Event(
                type=kind,
                event_id=kind,
                timestamp="2026-01-01T00:00:00Z",
                thread_id="t",
                payload=payload,
            )
        )
    assert out.getvalue() == (
        "  · hook audit (after_tool_call_success) kept\n"
        "  · hook guard (before_create_message) blocked: no\n"
        "  ! hook bug (filter_messages) failed: RuntimeError: x\n"
    )
