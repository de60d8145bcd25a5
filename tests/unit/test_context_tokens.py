"""Unit tests of the offline token estimator and a model's context limits."""

from __future__ import annotations

import pytest

from weft.contract.context_tokens import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_OUTPUT_TOKENS,
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    ContextLimits,
    estimate_message_tokens,
    estimate_tokens,
)
from weft.contract.definitions import ModelDef
from weft.contract.messages import Message, ToolCall, ToolCallFunction


def stored(role: str, content: str | None = None, **extra: object) -> Message:
    """A stored message with only the fields that matter here."""
    return Message.model_validate(
        {"id": "m", "thread_id": "t", "position": 0, "role": role, "content": content}
        | {"created_at": 0, **extra}
    )


def model(**capabilities: int) -> ModelDef:
    """A model definition declaring `capabilities` (camelCase, as definitions are written)."""
    caps = {"capabilities": capabilities} if capabilities else {}
    return ModelDef.model_validate({"name": "m", "provider": "openai", "model": "gpt", **caps})


def test_text_is_utf8_bytes_over_four_rounded_up() -> None:
    """A string costs ceil(UTF-8 bytes / 4): empty is 0, non-ASCII counts by bytes."""
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("é") == 1  # 2 bytes
    assert estimate_tokens("日本語") == 3  # 9 bytes
    assert estimate_tokens("x" * 4000) == 1000


def test_english_prose_is_over_estimated() -> None:
    """English prose gets at least one token per 4 characters, more than tokenizers give."""
    prose = "The quick brown fox jumps over the lazy dog. " * 20
    words = len(prose.split())
    # Real tokenizers spend about one token per common English word (plus punctuation).
    assert estimate_tokens(prose) >= words


def test_messages_count_content_calls_and_overhead() -> None:
    """Each message adds its overhead, its content, and its tool calls' id, name and arguments."""
    call = ToolCall(id="call_1", function=ToolCallFunction(name="lookup", arguments='{"q":"x"}'))
    messages = [
        stored("user", "hello there"),
        stored("assistant", None, tool_calls=[call]),
        stored("tool", "42", tool_call_id="call_1"),
    ]
    expected = 3 * MESSAGE_OVERHEAD_TOKENS + sum(
        estimate_tokens(s) for s in ["hello there", "call_1", "lookup", '{"q":"x"}', "42", "call_1"]
    )
    assert estimate_message_tokens(messages) == expected
    assert estimate_message_tokens([]) == 0


def test_stored_and_wire_shapes_agree() -> None:
    """A stored message and its OpenAI-shaped projection estimate the same."""
    call = ToolCall(id="c", function=ToolCallFunction(name="f", arguments="{}"))
    message = stored("assistant", "let me check", tool_calls=[call])
    wire = {"role": "assistant", "content": "let me check", "tool_calls": [call.model_dump()]}
    assert estimate_message_tokens([message]) == estimate_message_tokens([wire])


def test_wire_content_parts_and_odd_shapes() -> None:
    """Text parts count by the rule, images at IMAGE_TOKENS, and malformed pieces count nothing."""
    parts = [
        {"type": "text", "text": "abcdefgh"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        "not a part",
    ]
    assert estimate_message_tokens([{"role": "user", "content": parts}]) == (
        MESSAGE_OVERHEAD_TOKENS + 2 + IMAGE_TOKENS
    )
    odd = {"role": "assistant", "content": 7, "tool_calls": [None, {"function": "f"}]}
    assert estimate_message_tokens([odd]) == MESSAGE_OVERHEAD_TOKENS


def test_attachments_count_and_reasoning_does_not() -> None:
    """Attachment paths are part of the prompt; reasoning is never sent back, so is free."""
    plain = estimate_message_tokens([stored("user", "see")])
    with_file = estimate_message_tokens([stored("user", "see", attachments=["/a/report.pdf"])])
    thinking = estimate_message_tokens([stored("assistant", "see", reasoning_content="x" * 400)])
    assert with_file == plain + estimate_tokens("/a/report.pdf")
    assert thinking == plain


def test_budget_from_declared_capabilities() -> None:
    """prompt_budget is the window less the output reserve and a 10 % margin, rounded up."""
    budget = ContextLimits.for_model(model(maxContextTokens=200_000, maxOutputTokens=8_192))
    assert (budget.context_tokens, budget.output_tokens) == (200_000, 8_192)
    assert budget.margin_tokens == 20_000
    assert budget.prompt_budget == 200_000 - 8_192 - 20_000


def test_budget_defaults_when_undeclared() -> None:
    """A model without capabilities, or with only one limit, takes the module defaults."""
    bare = ContextLimits.for_model(model())
    assert (bare.context_tokens, bare.output_tokens) == (
        DEFAULT_CONTEXT_TOKENS,
        DEFAULT_OUTPUT_TOKENS,
    )
    assert bare.prompt_budget == 128_000 - 4_096 - 12_800
    only_context = ContextLimits.for_model(model(maxContextTokens=32_000))
    assert only_context.output_tokens == DEFAULT_OUTPUT_TOKENS
    only_output = ContextLimits.for_model(model(maxOutputTokens=1_000), margin=0.0)
    assert only_output.prompt_budget == DEFAULT_CONTEXT_TOKENS - 1_000


def test_budget_never_negative_and_validates() -> None:
    """An output reserve larger than the window leaves 0, and nonsense limits are refused."""
    assert ContextLimits(context_tokens=1_000, output_tokens=5_000).prompt_budget == 0
    with pytest.raises(ValueError, match="context_tokens"):
        ContextLimits(context_tokens=0, output_tokens=0)
    with pytest.raises(ValueError, match="output_tokens"):
        ContextLimits(context_tokens=10, output_tokens=-1)
    with pytest.raises(ValueError, match="margin"):
        ContextLimits(context_tokens=10, output_tokens=0, margin=1.0)


def test_fits_compares_the_estimate_with_the_budget() -> None:
    """fits() is true up to prompt_budget estimated tokens and false one token past it."""
    budget = ContextLimits(context_tokens=100, output_tokens=10, margin=0.0)
    at_limit = [{"role": "user", "content": "x" * 4 * (90 - MESSAGE_OVERHEAD_TOKENS)}]
    assert budget.fits(at_limit)
    assert not budget.fits([{"role": "user", "content": at_limit[0]["content"] + "x"}])
