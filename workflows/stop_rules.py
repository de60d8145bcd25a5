"""Stop conditions, evaluated after each step in the spec's order (Runtime §6)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from weft.contract.definitions import AgentDef, SessionTool, SideConfig
from weft.contract.messages import Message, ToolCall
from weft.contract.thread import StopReason


@dataclass(frozen=True)
class ToolOutcome:
    """A tool call of this step and whether its result was a success."""

    call: ToolCall
    succeeded: bool
    blocked: bool = False
    # What went wrong, when known (a prompt tool reports its nested calls' errors).
    error: str | None = None

    def args(self) -> dict[str, Any]:
        """The call's arguments as an object ({} when they are not a JSON object)."""
        try:
            parsed = json.loads(self.call.function.arguments or "{}")
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}


@dataclass(frozen=True)
class Stop:
    """A decision to end the turn (`scope="turn"`) or the whole session."""

    scope: Literal["turn", "session"]
    reason: StopReason
    response: str | None = None
    attachments: tuple[str, ...] = ()


@dataclass(frozen=True)
class StepFacts:
    """What the stop rules look at after a step."""

    side: SideConfig
    reply: Message
    outcomes: list[ToolOutcome]
    side_steps_in_turn: int
    session_steps: int
    max_total_steps: int


def evaluate_step(facts: StepFacts) -> Stop | None:
    """The first stop that applies, in spec order, or None to run another step."""
    if any(o.blocked for o in facts.outcomes):
        # A before_* hook refused to store a tool result: nothing after it may run.
        return Stop("session", "hook_blocked")
    for tool, reason in (
        (facts.side.session_fail, "session_fail"),
        (facts.side.session_stop, "session_stop"),
    ):
        hit = _succeeded_call(facts.outcomes, tool)
        if tool is not None and hit is not None:
            text, files = _mapped_payload(hit, tool)
            return Stop("session", reason, text, files)  # type: ignore[arg-type]
    stop_tool = facts.side.stop_tool
    called = [o for o in facts.outcomes if stop_tool and o.call.function.name == stop_tool]
    if called:
        prop = facts.side.stop_tool_response_property
        text = _text_arg(called[0].args(), prop) if prop else None
        return Stop("turn", "stop_tool", text)
    if facts.side.stop_on_response and not facts.outcomes:
        if (facts.reply.content or "").strip():
            return Stop("turn", "stop_on_response", facts.reply.content)
    if facts.side.max_steps is not None and facts.side_steps_in_turn >= facts.side.max_steps:
        return Stop("turn", "max_side_steps")
    if facts.session_steps >= facts.max_total_steps:
        return Stop("session", "max_total_steps")
    return None


def session_turns_exhausted(agent: AgentDef, side_a_turns: int, side_b_turns: int) -> bool:
    """True when `maxSessionTurns` completed exchanges (min of both sides' turns) are done."""
    if agent.max_session_turns is None:
        return False
    return min(side_a_turns, side_b_turns) >= agent.max_session_turns


def session_status(side: SideConfig, outcomes: list[ToolOutcome]) -> str | None:
    """The text of a succeeded `sessionStatus` call of this step (it ends nothing, §8.3)."""
    hit = _succeeded_call(outcomes, side.session_status)
    if hit is None or side.session_status is None:
        return None
    text, _ = _mapped_payload(hit, side.session_status)
    return text if text is not None else hit.call.function.arguments


def _succeeded_call(outcomes: list[ToolOutcome], tool: SessionTool | None) -> ToolOutcome | None:
    if tool is None:
        return None
    return next((o for o in outcomes if o.call.function.name == tool.name and o.succeeded), None)


def _mapped_payload(outcome: ToolOutcome, tool: SessionTool) -> tuple[str | None, tuple[str, ...]]:
    args = outcome.args()
    text = _text_arg(args, tool.message_property) if tool.message_property else None
    files = args.get(tool.attachments_property) if tool.attachments_property else None
    paths = tuple(str(f) for f in files) if isinstance(files, list) else ()
    return text, paths


def _text_arg(args: dict[str, Any], prop: str | None) -> str | None:
    if prop is None or prop not in args:
        return None
    value = args[prop]
    return value if isinstance(value, str) else json.dumps(value)
