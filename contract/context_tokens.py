"""Offline token estimates and the token limits of one model request, the ground floor of
context management.
Pure and deterministic (no tokenizer, no I/O): the same messages give the same number anywhere.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from weft.contract.definitions import ModelDef
from weft.contract.messages import Message

# The rule: a string costs ceil(UTF-8 bytes / BYTES_PER_TOKEN) tokens. BPE tokenizers
# (OpenAI's cl100k/o200k, Anthropic's) average about 4 to 5 bytes of English prose per token,
# so bytes/4 over-estimates English, which is the safe side for a budget. Counting bytes
# rather than characters charges accented and non-Latin text more. Dense code, JSON and CJK
# text can tokenize tighter than 4 bytes per token, so the estimate is not an upper bound:
# the budget's safety margin is there to absorb that.
BYTES_PER_TOKEN = 4
# Role and framing of each message. OpenAI documents 3 tokens per message plus 3 to prime
# the reply; 4 covers both on average without a per-request term.
MESSAGE_OVERHEAD_TOKENS = 4
# An image content part: about what Anthropic charges for one image at its default maximum
# size (1092 x 1092 px / 750); OpenAI's high-detail tiles cost less.
IMAGE_TOKENS = 1_600

# The window assumed when a model's capabilities declare none: the common 128k context of
# current hosted models, and Anthropic's adapter default for the output reserve.
DEFAULT_CONTEXT_TOKENS = 128_000
DEFAULT_OUTPUT_TOKENS = 4_096
# Share of the context window kept free for the estimator's error (see BYTES_PER_TOKEN).
DEFAULT_SAFETY_MARGIN = 0.10

# Anything a message can be: a stored `Message`, or the OpenAI-shaped dict adapters receive.
MessageLike = Message | Mapping[str, Any]


def estimate_tokens(text: str) -> int:
    """Tokens for `text` by the module's rule: ceil(UTF-8 bytes / 4); 0 for ''."""
    return math.ceil(len(text.encode("utf-8")) / BYTES_PER_TOKEN)


def estimate_message_tokens(messages: Iterable[MessageLike]) -> int:
    """Tokens for a list of messages: each message's strings plus its fixed overhead.

    Counted per message: content (text parts; images at IMAGE_TOKENS each), `name`,
    `tool_call_id`, and each tool call's id, function name and arguments; for a stored
    `Message` also its attachment paths. Each string is rounded up on its own.
    `reasoning_content` is not counted: only the Anthropic adapter sends it back (signed
    thinking, within a tool-use turn), an underestimate the learnt token scale absorbs.
    """
    return sum(MESSAGE_OVERHEAD_TOKENS + _message_tokens(m) for m in messages)


def each_message_tokens(messages: Iterable[MessageLike]) -> list[int]:
    """Each message's estimate, as `estimate_message_tokens` gives it for that message
    alone: a window measures its new messages with one call."""
    return [MESSAGE_OVERHEAD_TOKENS + _message_tokens(m) for m in messages]


def _message_tokens(message: MessageLike) -> int:
    if isinstance(message, Message):
        strings = [message.content, message.name, message.tool_call_id, *message.attachments]
        for call in message.tool_calls or []:
            strings += [call.id, call.function.name, call.function.arguments]
        return sum(estimate_tokens(s) for s in strings if s)
    # Wire dicts come from outside (the scripted server reads them off HTTP): skip odd shapes.
    total = _content_tokens(message.get("content"))
    strings = [message.get("name"), message.get("tool_call_id")]
    for wire_call in _dicts(message.get("tool_calls")):
        function = wire_call.get("function")
        function = function if isinstance(function, Mapping) else {}
        strings += [wire_call.get("id"), function.get("name"), function.get("arguments")]
    return total + sum(estimate_tokens(s) for s in strings if isinstance(s, str))


def _content_tokens(content: Any) -> int:
    if isinstance(content, str):
        return estimate_tokens(content)
    total = 0
    for part in _dicts(content):
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            total += estimate_tokens(part["text"])
        elif part.get("type") in ("image_url", "image"):
            total += IMAGE_TOKENS
    return total


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


@dataclass(frozen=True)
class ContextLimits:
    """How many prompt tokens a model call may send: the window less reply and margin.

    `prompt_budget` = context_tokens - output_tokens - ceil(context_tokens * margin),
    never below 0.
    """

    context_tokens: int
    output_tokens: int
    margin: float = DEFAULT_SAFETY_MARGIN

    def __post_init__(self) -> None:
        if self.context_tokens <= 0:
            raise ValueError(f"context_tokens must be positive, got {self.context_tokens}")
        if self.output_tokens < 0:
            raise ValueError(f"output_tokens must not be negative, got {self.output_tokens}")
        if not 0.0 <= self.margin < 1.0:
            raise ValueError(f"margin must be in [0, 1), got {self.margin}")

    @classmethod
    def for_model(
        cls,
        model: ModelDef,
        *,
        margin: float = DEFAULT_SAFETY_MARGIN,
        learnt_limit: int | None = None,
    ) -> ContextLimits:
        """The limits of `model`; each limit it does not declare takes the module default.

        `learnt_limit` is a window a provider reported in a context-length error: when it
        is smaller than the declared one, the provider is right.
        """
        caps = model.capabilities
        context = caps.max_context_tokens if caps else None
        context = DEFAULT_CONTEXT_TOKENS if context is None else context
        if learnt_limit is not None:
            context = min(context, learnt_limit)
        output = caps.max_output_tokens if caps else None
        return cls(
            context_tokens=context,
            output_tokens=DEFAULT_OUTPUT_TOKENS if output is None else output,
            margin=margin,
        )

    @property
    def margin_tokens(self) -> int:
        """Tokens held back for estimation error."""
        return math.ceil(self.context_tokens * self.margin)

    @property
    def prompt_budget(self) -> int:
        """Estimated prompt tokens a request may hold and still leave room for the reply."""
        return max(0, self.context_tokens - self.output_tokens - self.margin_tokens)

    def fits(self, messages: Iterable[MessageLike]) -> bool:
        """Whether the estimate of `messages` is within `prompt_budget`."""
        return estimate_message_tokens(messages) <= self.prompt_budget


# A message may use at most this share of the prompt budget before the model gets a preview
# in its place (`ContextOptions.preview_share`), and never less than this many tokens.
MIN_PREVIEW_TOKENS = 256


def preview_cap_tokens(prompt_budget: int, share: float) -> int:
    """The most tokens one message may take in a request before it is sent as a preview."""
    return max(MIN_PREVIEW_TOKENS, int(prompt_budget * share))


def message_tokens(message: Message, cap: int | None) -> int:
    """Estimated tokens `message` adds to a request, as the model activity will send it.

    A spilled or blob-backed message is counted at its full size (the workflow holds only
    a preview of it); content over `cap` is sent as a preview, so it counts as `cap`. A tool
    result counts as its stored envelope, a little more than the text the model is sent
    (docs/tool-results.md): the safe side, and the same count on replay as before. The
    request's own estimate (`model.call`'s report) counts the text that was sent.
    """
    counted = estimate_message_tokens([message])
    meta = message.metadata or {}
    spilled = meta.get("spilled")
    full_bytes = spilled.get("bytes") if isinstance(spilled, dict) else meta.get("contentBytes")
    if isinstance(full_bytes, int):
        counted += math.ceil(full_bytes / BYTES_PER_TOKEN) - estimate_tokens(message.content or "")
    if cap is not None:
        counted = min(counted, cap + 2 * MESSAGE_OVERHEAD_TOKENS + 64)
    return counted
