"""Hooks (Standard Agents): the twelve hook points, how a snapshot freezes them, scoping.

A hook is `{hook, id, execute}`: `hooks/<id>.py` in a definitions directory, or
`define_hook(...)` in Python. The code stays in the worker (like a function tool's); a
thread's snapshot freezes which ids exist and which point each one hooks, so scoping is
decided from the snapshot alone. Hooks run inside the activity that produces the fact they
see (no round trip of their own): the `filter_*` hooks and `after_system_message` in
`model.call`, the tool hooks in `tool.call`, the message hooks wherever messages are written,
`after_thread_created` / `after_subagent_created` in `thread.init`.

What each point passes as `data` and what its return value does (docs/hooks.md):

| hook | data | return |
|---|---|---|
| after_thread_created | {threadId, agent, parentThreadId} | ignored |
| after_subagent_created | {threadId (the child), agent, parentThreadId} | ignored |
| after_system_message | {prompt, content} | a string replaces the system prompt of this request |
| filter_messages | [stored messages of the window, as dicts] | a list replaces them |
| prefilter_llm_history | [the request's chat messages, OpenAI shape] | a list replaces them |
| before_create_message | the message dict | a dict replaces it; `HookBlocked` refuses it |
| after_create_message | the message dict as stored | ignored |
| before_update_message | {message, update} | a dict replaces the update; `HookBlocked` refuses it |
| after_update_message | the message dict as updated | ignored |
| before_store_tool_result | {toolCall, result} | a dict replaces the result; `HookBlocked` refuses it |
| after_tool_call_success | {toolCall, result} | a dict replaces the result |
| after_tool_call_failure | {toolCall, result} | a dict replaces the result |

`None` always means "keep the data as it was". A hook that raises anything but
`HookBlocked` is recorded as `hook.failed` and the data it was given is used unchanged.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from weft.contract.wire import CamelModel

HookName = Literal[
    "after_thread_created",
    "after_subagent_created",
    "after_system_message",
    "filter_messages",
    "prefilter_llm_history",
    "before_create_message",
    "after_create_message",
    "before_update_message",
    "after_update_message",
    "before_store_tool_result",
    "after_tool_call_success",
    "after_tool_call_failure",
]
HOOK_NAMES: tuple[str, ...] = get_args(HookName)

# The hooks whose return value may refuse a write (by raising HookBlocked).
BLOCKING_HOOKS = ("before_create_message", "before_update_message", "before_store_tool_result")

# ApplicationError type an activity raises when a `before_*` hook refused a write; the
# workflow ends the turn with the stop reason `hook_blocked`.
HOOK_BLOCKED = "HookBlocked"

HOOK_ID_PATTERN = r"^[a-z][a-z0-9_]*$"


class HookSpec(CamelModel):
    """What a snapshot freezes of one hook: its id and the point it hooks."""

    id: str = Field(pattern=HOOK_ID_PATTERN)
    hook: HookName


class HookBlock(CamelModel):
    """A `before_*` hook refused a write: which hook, and the reason it gave."""

    hook_id: str
    hook: HookName
    reason: str
    message_id: str | None = Field(default=None, description="the message it refused, if any")


def hook_ids_in_scope(prompt_hooks: list[str] | None, agent_hooks: list[str]) -> list[str]:
    """Standard Agents scoping: the active prompt's list replaces the agent's when present."""
    return list(prompt_hooks) if prompt_hooks is not None else list(agent_hooks)
