"""What a prompt tool's model call sees (Runtime §5.3): the caller's chat, then its own.

A prompt tool's messages are stored with `parent_id` = the tool call that runs it; they are
its conversation. With `includeChat` it first sees the caller's conversation before the
call (the main transcript from the boundary in force, or the messages of the prompt tool
that called it), with tool calls and results removed unless `includePastTools`; either way
every tool call it sees keeps its result, as providers require.
"""

from __future__ import annotations

from weft.activities.context_window import load_window
from weft.contract.context import ContextBoundary, ContextWindow
from weft.contract.messages import Message
from weft.contract.prompt_tools import PromptScope
from weft.store import Store


def load_scoped_window(
    store: Store, thread_id: str, window: ContextWindow, scope: PromptScope
) -> tuple[ContextBoundary | None, list[Message], list[Message]]:
    """(boundary, pinned, history) for a model call inside the prompt tool `scope`."""
    own = store.messages.list(thread_id, parent_id=scope.tool_call_id)
    if not scope.include_chat:
        return None, [], own
    boundary: ContextBoundary | None = None
    if scope.caller_tool_call_id is None:
        boundary, pinned, main = load_window(store, thread_id, window)
        chat = [*pinned, *(m for m in main if m.position < scope.caller_position)]
    else:
        chat = store.messages.list(
            thread_id,
            parent_id=scope.caller_tool_call_id,
            before_position=scope.caller_position,
        )
    chat = paired_tools(chat) if scope.include_past_tools else without_tools(chat)
    return boundary, [], [*chat, *own]


def without_tools(messages: list[Message]) -> list[Message]:
    """The conversation without tool calls and results (`includePastTools: false`)."""
    kept = []
    for message in messages:
        if message.role == "tool":
            continue
        if message.tool_calls:
            if not (message.content or "").strip():
                continue
            message = message.model_copy(update={"tool_calls": None})
        kept.append(message)
    return kept


def paired_tools(messages: list[Message]) -> list[Message]:
    """The conversation with only the tool calls that have a result, and the results of
    calls it holds: the call being answered now has none yet."""
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    called = {c.id for m in messages for c in m.tool_calls or []}
    kept = []
    for message in messages:
        if message.role == "tool":
            if message.tool_call_id in called:
                kept.append(message)
            continue
        if message.tool_calls:
            calls = [c for c in message.tool_calls if c.id in answered]
            if not calls and not (message.content or "").strip():
                continue
            message = message.model_copy(update={"tool_calls": calls or None})
        kept.append(message)
    return kept
