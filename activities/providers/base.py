"""The provider-neutral request and reply types, and the protocol every adapter implements."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field, SkipValidation

from weft.activities.providers.errors import excerpt, protocol_error
from weft.activities.providers.reasoning import ReasoningConfig
from weft.activities.providers.transport import loads
from weft.contract.messages import ToolCall, ToolCallFunction

# The tool the Anthropic adapter forces for structured output (a prompt's requiredSchema).
STRUCTURED_OUTPUT_TOOL = "structured_output"


class ChatRequest(BaseModel):
    """One model call, in OpenAI chat shape; adapters translate it to their wire format."""

    model: str
    # OpenAI chat format: {role, content, name?, tool_calls?, tool_call_id?}; system first.
    # An assistant entry may add `thinking: {text, signature}` (signed Anthropic reasoning,
    # which Anthropic needs back in a tool-use turn); other adapters drop it.
    messages: list[dict[str, Any]]
    # [{name, description, parameters (JSON schema)}]: adapters map to their wire shape.
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: str | None = None  # auto | none | required
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = None
    # Merged into the request body last, so it can override anything the adapter set.
    provider_options: dict[str, Any] = Field(default_factory=dict)
    # Raw provider tool objects (ModelDef.providerTools), appended to the function tools.
    provider_tools: list[dict[str, Any]] = Field(default_factory=list)
    # A prompt's requiredSchema: the final answer is a JSON object valid against it.
    response_schema: dict[str, Any] | None = None
    reasoning: ReasoningConfig | None = None
    # False for a model whose capabilities say it cannot stream: one plain request.
    stream: bool = True
    # Each of `messages` as compact JSON (compact_json), when the caller has it already
    # (the window keeps it per message): an adapter that sends the messages unchanged
    # joins these instead of encoding the whole transcript again. Not validated (it is
    # built with the messages) and never dumped.
    encoded_messages: SkipValidation[list[bytes] | None] = Field(default=None, exclude=True)
    # For a shared rate limit (rate_limited.py), never sent: the caller's estimate of the
    # request's input tokens (else the limit estimates them), and how long the request may
    # wait for its place, asked only when it must wait (seconds; None: no bound).
    estimated_input_tokens: int | None = Field(default=None, exclude=True)
    wait_allowance: SkipValidation[Callable[[], Awaitable[float | None]] | None] = Field(
        default=None, exclude=True
    )


class Usage(BaseModel):
    """Token counts for one call; `input_tokens` includes `cached_tokens`."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0


class Delta(BaseModel):
    """A streamed fragment: text, reasoning, or a piece of a tool call's arguments."""

    kind: Literal["text", "reasoning", "tool_call"]
    text: str
    tool_call_index: int | None = None
    # The call's id once the provider has named it (before its arguments, in both APIs).
    tool_call_id: str | None = None


class RateLimitWait(BaseModel):
    """A request that waited for its place under a shared rate limit."""

    limit_key: str
    waited_seconds: float


class ChatReply(BaseModel):
    """The assembled assistant message with usage and why the model stopped."""

    content: str | None
    tool_calls: list[ToolCall]
    reasoning_content: str | None = None
    # Anthropic signs its thinking; the signature must come back with a tool-use turn.
    reasoning_signature: str | None = None
    # A summary the provider gives of its reasoning (OpenRouter's `reasoning.summary`
    # details), written as a `reasoning.summary` event; not sent back to any model.
    reasoning_summary: str | None = None
    usage: Usage
    # OpenAI vocabulary (stop, tool_calls, length, content_filter) whatever the provider.
    finish_reason: str | None
    model: str
    # The content parsed and validated against the request's response_schema.
    parsed: dict[str, Any] | None = None
    # How long a shared rate limit held the request back, and on which key (None when it
    # went at once): written as a `rate_limit.hit` with the attempt's other facts.
    rate_limit_wait: RateLimitWait | None = None

    def message_metadata(self) -> dict[str, Any]:
        """What the stored assistant message keeps of this reply besides its text."""
        kept: dict[str, Any] = {}
        if self.parsed is not None:
            kept["parsed"] = self.parsed
        if self.reasoning_signature:
            kept["reasoningSignature"] = self.reasoning_signature
        return kept


DeltaCallback = Callable[[Delta], Awaitable[None]]


async def emit_whole(reply: ChatReply, on_delta: DeltaCallback | None) -> None:
    """A reply that was not streamed still reaches listeners: one delta per kind."""
    if on_delta is None:
        return
    if reply.reasoning_content:
        await on_delta(Delta(kind="reasoning", text=reply.reasoning_content))
    if reply.content:
        await on_delta(Delta(kind="text", text=reply.content))


class ChatProvider(Protocol):
    """A chat model reached over HTTP; failures surface as classified ApplicationErrors."""

    async def complete(
        self, request: ChatRequest, *, on_delta: DeltaCallback | None = None
    ) -> ChatReply: ...


def make_tool_call(index: int, call_id: str | None, name: str | None, arguments: str) -> ToolCall:
    """Build a finished tool call, rejecting a missing id or name and arguments that are not
    a JSON object (a protocol error: the next attempt may be well formed)."""
    if not call_id:
        raise protocol_error(f"tool call #{index} ({name or 'unnamed'}) has no id")
    if not name:
        raise protocol_error(f"tool call #{index} ({call_id}) has no function name")
    text = arguments if arguments.strip() else "{}"
    parsed = loads(text, what=f"arguments of tool call #{index} ({name})")
    if not isinstance(parsed, dict):
        raise protocol_error(
            f"arguments of tool call #{index} ({name}) are not a JSON object: {excerpt(text, 120)}"
        )
    return ToolCall(id=call_id, function=ToolCallFunction(name=name, arguments=text))
