"""Script format of the scripted model server, validated with pydantic when loaded.

A script is chosen by the request's `model`. Its `turns` are matched against the last user
message (`match`: substring, `regex:`-prefixed regex, or `*`); the reply is picked by how many
assistant messages follow that user message. Selection is therefore a pure function of the
request, so retries and concurrent conversations need no server-side state.

A script may set `context_limit` (tokens): a request whose messages estimate above it, by
`contract.context_tokens`, gets the provider's own "context length exceeded" HTTP 400.

Structured output: a reply's `text` is the answer. When an Anthropic request forces one
tool (`tool_choice: {type: tool, name}`, as weft does for requiredSchema), a reply with
text and no tool calls is played as that tool's call with the text (JSON) as its input, as
Anthropic would answer. `faulty_text` is a fault like the others: the first `times`
requests get it instead of `text` (an invalid answer, then a valid one on the retry).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


class ScriptError(ValueError):
    """A script failed validation; the message names the script and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolCallSpec(_Strict):
    """A scripted tool call; `id` is derived from the conversation when omitted."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None


class ErrorSpec(_Strict):
    """An HTTP error reply (fault injection)."""

    status: int = Field(ge=400, le=599)
    body: str | dict[str, Any] | None = None
    headers: dict[str, str] = Field(default_factory=dict)


class UsageSpec(_Strict):
    """Usage override; unset fields keep the chars/4 estimate."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None


class Expect(_Strict):
    """Checks on the request; a failure replies HTTP 400 naming the expectation."""

    last_user_contains: str | None = None
    has_tool_result_for: str | None = None
    system_contains: str | None = None
    tools_include: list[str] = Field(default_factory=list)
    messages_count: int | None = None


class Reply(_Strict):
    """One scripted reply, with optional pacing and fault injection."""

    text: str | None = None
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    reasoning: str | None = None
    finish_reason: str | None = None
    repeat: int = Field(default=1, ge=1)
    delay_ms: int = Field(default=0, ge=0)
    chunk_size: int = Field(default=8, ge=1)
    chunk_delay_ms: int = Field(default=0, ge=0)
    usage: UsageSpec | None = None
    # Round-robin the argument chunks of several tool calls, as some providers interleave.
    interleave_tool_calls: bool = False
    error: ErrorSpec | None = None
    # Faults apply to the first `times` requests landing on this reply (None: every time).
    times: int | None = Field(default=None, ge=1)
    drop_after_chunks: int | None = Field(default=None, ge=0)
    truncate: bool = False
    invalid_json_after_chunks: int | None = Field(default=None, ge=0)
    faulty_text: str | None = None
    expect: Expect | None = None

    @property
    def has_fault(self) -> bool:
        """Whether this reply injects any fault that `times` counts."""
        return bool(
            self.error
            or self.truncate
            or self.drop_after_chunks is not None
            or self.invalid_json_after_chunks is not None
            or self.faulty_text is not None
        )


class Turn(_Strict):
    """Replies played after a user message that `match` selects."""

    match: str = "*"
    replies: list[Reply] = Field(min_length=1)

    @field_validator("match")
    @classmethod
    def _regex_compiles(cls, value: str) -> str:
        if value.startswith("regex:"):
            try:
                re.compile(value[6:])
            except re.error as exc:
                raise ValueError(f"invalid regex {value[6:]!r}: {exc}") from None
        return value

    def matches(self, text: str) -> bool:
        """Whether this turn answers a last user message of `text`."""
        if self.match == "*":
            return True
        if self.match.startswith("regex:"):
            return re.search(self.match[6:], text) is not None
        return self.match in text

    def expanded(self) -> list[Reply]:
        """Replies with `repeat: N` unrolled into N entries."""
        return [r for r in self.replies for _ in range(r.repeat)]


class Script(_Strict):
    """A named script: `turns`, or a bare `replies` list as shorthand for one `*` turn."""

    turns: list[Turn] = Field(min_length=1)
    # Strict, so "8000" or 8000.5 in a script is an error rather than silently coerced.
    context_limit: int | None = Field(default=None, gt=0, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, dict) and "replies" in data and "turns" not in data:
            rest = {k: v for k, v in data.items() if k != "replies"}
            return {**rest, "turns": [{"match": "*", "replies": data["replies"]}]}
        return data


class CompiledScript:
    """A validated script with its repeats unrolled once, at load time."""

    def __init__(self, name: str, script: Script) -> None:
        self.name = name
        self.context_limit = script.context_limit
        self.turns = [(turn, turn.expanded()) for turn in script.turns]

    def select(self, last_user_text: str) -> tuple[int, list[Reply]] | None:
        """The first turn matching the last user message, as (turn index, replies)."""
        for index, (turn, replies) in enumerate(self.turns):
            if turn.matches(last_user_text):
                return index, replies
        return None


def compile_script(name: str, raw: Any) -> CompiledScript:
    """Validate `raw`, raising ScriptError that names the script and the failing field."""
    try:
        return CompiledScript(name, Script.model_validate(raw))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ScriptError(f"script {name!r} is invalid: {problems}") from None


def load_script_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML (or JSON) file mapping script names to scripts."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ScriptError(f"{path}: expected a mapping of script names to scripts")
    # A file may hold the scripts at top level or under a `scripts:` key.
    scripts = data.get("scripts", data)
    if not isinstance(scripts, dict):
        raise ScriptError(f"{path}: `scripts` must be a mapping of names to scripts")
    return scripts
