"""Stop rules in the spec's order (Runtime §6), evaluated on the facts of one step."""

from __future__ import annotations

import json
from typing import Any

from weft.contract.definitions import AgentDef, SideConfig
from weft.contract.messages import Message, ToolCall, ToolCallFunction
from weft.workflows.stop_rules import (
    StepFacts,
    ToolOutcome,
    evaluate_step,
    session_status,
    session_turns_exhausted,
)


def _outcome(name: str, args: Any = None, *, ok: bool = True) -> ToolOutcome:
    call = ToolCall(
        id=f"call_{name}", function=ToolCallFunction(name=name, arguments=json.dumps(args or {}))
    )
    return ToolOutcome(call, succeeded=ok)


def _facts(
    side: dict[str, Any],
    outcomes: list[ToolOutcome] | None = None,
    *,
    text: str | None = None,
    side_steps: int = 1,
    session_steps: int = 1,
    max_total: int = 64,
) -> StepFacts:
    reply = Message(id="m", thread_id="t", position=0, role="assistant", content=text, created_at=0)
    return StepFacts(
        side=SideConfig.model_validate({"prompt": "p", **side}),
        reply=reply,
        outcomes=outcomes or [],
        side_steps_in_turn=side_steps,
        session_steps=session_steps,
        max_total_steps=max_total,
    )


def test_session_fail_is_checked_before_session_stop() -> None:
    """Both lifecycle tools called: sessionFail wins, with its mapped message and files."""
    side = {
        "sessionStop": {"name": "done", "messageProperty": "summary"},
        "sessionFail": {
            "name": "give_up",
            "messageProperty": "why",
            "attachmentsProperty": "files",
        },
    }
    outcomes = [
        _outcome("done", {"summary": "ok"}),
        _outcome("give_up", {"why": "no", "files": ["/a"]}),
    ]
    stop = evaluate_step(_facts(side, outcomes))
    assert stop is not None
    assert (stop.scope, stop.reason, stop.response, stop.attachments) == (
        "session",
        "session_fail",
        "no",
        ("/a",),
    )


def test_a_failed_lifecycle_call_ends_nothing() -> None:
    """A sessionStop call whose result was an error does not stop the session."""
    stop = evaluate_step(
        _facts({"sessionStop": "done", "stopOnResponse": False}, [_outcome("done", ok=False)])
    )
    assert stop is None


def test_stop_tool_ends_the_turn_with_its_response_property() -> None:
    """The stop tool ends the turn; a non-string response property is sent as JSON."""
    side = {"stopTool": "answer", "stopToolResponseProperty": "data"}
    stop = evaluate_step(_facts(side, [_outcome("answer", {"data": {"x": 1}})]))
    assert stop is not None
    assert (stop.scope, stop.reason, stop.response) == ("turn", "stop_tool", '{"x": 1}')


def test_stop_on_response_needs_text_and_no_tool_calls() -> None:
    """A plain text reply ends the turn; blank text or a tool call does not."""
    assert evaluate_step(_facts({}, text="Hello")) is not None
    assert evaluate_step(_facts({}, text="   ")) is None
    assert evaluate_step(_facts({}, [_outcome("weather")], text="Hello")) is None


def test_step_limits_per_side_then_per_session() -> None:
    """maxSteps ends the turn; the session hard cap ends the session."""
    side = {"stopOnResponse": False, "maxSteps": 3}
    assert evaluate_step(_facts(side, side_steps=2)) is None
    turn_stop = evaluate_step(_facts(side, side_steps=3))
    assert turn_stop is not None and (turn_stop.scope, turn_stop.reason) == (
        "turn",
        "max_side_steps",
    )
    cap = evaluate_step(_facts({"stopOnResponse": False}, session_steps=5, max_total=5))
    assert cap is not None and (cap.scope, cap.reason) == ("session", "max_total_steps")


def test_session_turns_count_complete_exchanges() -> None:
    """maxSessionTurns compares the smaller of both sides' turn counts."""
    agent = AgentDef.model_validate(
        {
            "name": "duo",
            "type": "dual_ai",
            "sideA": {"prompt": "p"},
            "sideB": {"prompt": "p"},
            "maxSessionTurns": 2,
        }
    )
    assert not session_turns_exhausted(agent, 2, 1)
    assert session_turns_exhausted(agent, 2, 2)
    unlimited = agent.model_copy(update={"max_session_turns": None})
    assert not session_turns_exhausted(unlimited, 100, 100)


def test_session_status_text() -> None:
    """sessionStatus yields its mapped text, or the raw arguments when nothing is mapped."""
    mapped = SideConfig.model_validate(
        {"prompt": "p", "sessionStatus": {"name": "status", "messageProperty": "note"}}
    )
    assert session_status(mapped, [_outcome("status", {"note": "halfway"})]) == "halfway"
    raw = SideConfig.model_validate({"prompt": "p", "sessionStatus": "status"})
    assert session_status(raw, [_outcome("status", {"pct": 50})]) == '{"pct": 50}'
    assert session_status(raw, [_outcome("status", ok=False)]) is None
