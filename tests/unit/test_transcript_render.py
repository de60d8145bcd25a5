"""The CLI's live transcript shows streamed reasoning apart from the answer."""

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
