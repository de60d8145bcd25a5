"""A thread as the store recorded it: its user turns, what each turn did, and the tool
results a replay serves."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from weft.contract.activities import ToolResult
from weft.contract.evals import CallRecord, TurnRecord
from weft.contract.messages import Message
from weft.store import Store


@dataclass
class Recording:
    """One recorded thread: its agent, its turns, and its tool calls with their results."""

    thread_id: str
    agent: str
    turns: list[TurnRecord]
    tool_results: list[tuple[str, Any, ToolResult]] = field(default_factory=list)
    # Its subagents' tool calls with their results (the whole tree, oldest child first).
    subagent_results: list[tuple[str, Any, ToolResult]] = field(default_factory=list)


def arguments_of(text: str | None) -> Any:
    """A tool call's arguments as JSON, or the raw text when they are not JSON."""
    try:
        return json.loads(text or "{}")
    except ValueError:
        return text


def turn_records(messages: list[Message]) -> list[TurnRecord]:
    """The transcript cut at each user message: the answer is the turn's last assistant
    message as the user saw it, the calls are its assistant tool calls in order, steps its
    model replies."""
    turns: list[TurnRecord] = []
    for message in messages:
        if message.role == "user":
            turns.append(TurnRecord(user=message.content or ""))
        elif message.role == "assistant" and turns:
            turn = turns[-1]
            turn.steps += 1
            # The turn's response is its latest assistant message, whatever it holds (as
            # the workflow's turn result says): a stop tool's empty response is the answer
            # the user saw, not the text the model wrote beside the call.
            turn.answer = message.content
            for call in message.tool_calls or []:
                turn.tool_calls.append(
                    CallRecord(name=call.function.name, arguments=_as_dict(call.function.arguments))
                )
    return turns


def _as_dict(text: str | None) -> dict[str, Any]:
    parsed = arguments_of(text)
    return parsed if isinstance(parsed, dict) else {"_raw": parsed}


def read_recording(store: Store, thread_id: str) -> Recording:
    """The recorded thread `thread_id`, or a ValueError naming it when the store has none."""
    row = store.threads.get(thread_id)
    if row is None:
        raise ValueError(f"recorded thread {thread_id!r} is not in the store")
    messages = store.messages.list(thread_id, depth=0)
    turns = turn_records(messages)
    if not turns:
        raise ValueError(f"recorded thread {thread_id!r} has no user turn to replay")
    return Recording(
        thread_id=thread_id,
        agent=row.agent,
        turns=turns,
        tool_results=tool_results(messages),
        subagent_results=subagent_results(store, thread_id),
    )


def tool_results(messages: list[Message]) -> list[tuple[str, Any, ToolResult]]:
    """Each tool call of the transcript with the result stored for it, in order."""
    calls: dict[str, tuple[str, Any]] = {}
    results: list[tuple[str, Any, ToolResult]] = []
    for message in messages:
        for call in message.tool_calls or []:
            calls[call.id] = (call.function.name, arguments_of(call.function.arguments))
        if message.role == "tool" and message.tool_call_id in calls:
            name, arguments = calls.pop(message.tool_call_id)
            results.append((name, arguments, _tool_result(message)))
    return results


def subagent_results(store: Store, thread_id: str) -> list[tuple[str, Any, ToolResult]]:
    """The tool results of every subagent under `thread_id`, each child's before its own
    children's, in the order the children were created."""
    results: list[tuple[str, Any, ToolResult]] = []
    seen = {thread_id}
    pending = [thread_id]
    while pending:
        parent = pending.pop(0)
        for entry in store.subagents.list(parent):
            child = str(entry.get("reference") or "")
            if child and child not in seen:
                seen.add(child)
                pending.append(child)
                results += tool_results(store.messages.list(child, depth=0))
    return results


def _tool_result(message: Message) -> ToolResult:
    """The stored result envelope (docs/tool-results.md); plain text is a success."""
    try:
        return ToolResult.model_validate_json(message.content or "")
    except ValueError:
        return ToolResult(status=message.tool_status or "success", result=message.content)
