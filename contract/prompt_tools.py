"""Prompt tools (Runtime §5.3): a prompt listed in another prompt's `tools`.

Calling one runs that prompt's own model loop inside the same thread: its system prompt,
model and tools, until it answers without a tool call (or the thread's step cap). Its
messages are stored with `parent_id` = the calling tool call's id and `depth` = one more
than the caller's, and they never join the caller's transcript; the caller gets a single
tool result shaped by the include flags.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from weft.contract.wire import CamelModel

# The argument that carries the first message when the entry maps none.
DEFAULT_PROMPT_MESSAGE_PROPERTY = "message"


class PromptToolConfig(CamelModel):
    """A prompt's tool entry that names another prompt (Standard Agents "sub-prompt")."""

    name: str = Field(min_length=1)
    include_text_response: bool = True
    include_tool_calls: bool = True
    include_errors: bool = True
    init_user_message_property: str | None = None
    init_attachments_property: str | None = None

    def message_property(self) -> str:
        """The argument whose value becomes the prompt's first user message."""
        return self.init_user_message_property or DEFAULT_PROMPT_MESSAGE_PROPERTY


class PromptScope(CamelModel):
    """Where a model or tool call runs when it is inside a prompt tool.

    The main loop of a thread has no scope (None). A prompt tool's calls carry the prompt
    they run, the tool call that started it (its messages' `parent_id`) and their depth.
    The caller's conversation is the main transcript (`caller_tool_call_id` None) or, for
    a nested prompt tool, the messages of the prompt tool that called it.
    """

    prompt: str
    tool_call_id: str = Field(description="the call that runs this prompt: its messages' parent")
    depth: int = Field(ge=1)
    caller_tool_call_id: str | None = Field(
        default=None, description="the caller's own prompt-tool call (None: the main loop)"
    )
    caller_position: int = Field(
        description="the caller's messages before this position are its conversation so far"
    )
    include_chat: bool = False
    include_past_tools: bool = False

    def message_fields(self) -> dict[str, Any]:
        """`parent_id` and `depth` of every message stored inside this prompt tool."""
        return {"parent_id": self.tool_call_id, "depth": self.depth}

    def event_fields(self) -> dict[str, Any]:
        """What every event written inside this prompt tool adds to its payload, so a
        client can fold the nested steps under the call that started them."""
        return {"parentToolCallId": self.tool_call_id, "depth": self.depth}
