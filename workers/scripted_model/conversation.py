"""A protocol-neutral view of a chat request, used to select replies and check expectations."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from weft.workers.scripted_model.script import Expect


@dataclass(frozen=True)
class Said:
    """One message reduced to what scripts look at."""

    role: str  # system | user | assistant | tool
    text: str
    tool_calls: list[tuple[str, str]] = field(default_factory=list)  # (id, name)
    tool_call_id: str | None = None
    tool_name: str | None = None


@dataclass(frozen=True)
class View:
    """The request as scripts see it, whichever wire protocol it came in."""

    protocol: str  # openai | anthropic
    model: str
    system: str
    messages: list[Said]
    tool_names: list[str]
    request_chars: int
    # The one tool an Anthropic request forces (`tool_choice: {type: tool, name}`).
    forced_tool: str | None = None

    @property
    def last_user_index(self) -> int:
        """Position of the last user message with text (tool results do not count), or -1."""
        for index in range(len(self.messages) - 1, -1, -1):
            if self.messages[index].role == "user":
                return index
        return -1

    @property
    def last_user_text(self) -> str:
        """Text of the last user message ('' when there is none)."""
        index = self.last_user_index
        return self.messages[index].text if index >= 0 else ""

    @property
    def reply_index(self) -> int:
        """How many assistant messages follow the last user message."""
        tail = self.messages[self.last_user_index + 1 :]
        return sum(1 for m in tail if m.role == "assistant")

    @property
    def conversation_key(self) -> str:
        """A hash of the conversation up to its last user message; retries share it."""
        head = [(m.role, m.text) for m in self.messages[: self.last_user_index + 1]]
        digest = hashlib.sha256(json.dumps([self.system, head]).encode())
        return digest.hexdigest()[:16]

    def tool_result_names(self) -> set[str]:
        """Names of tools whose calls have a result in the request."""
        names = {cid: name for m in self.messages for cid, name in m.tool_calls}
        return {
            m.tool_name or names.get(m.tool_call_id or "", "")
            for m in self.messages
            if m.role == "tool"
        }

    def failed_expectations(self, expect: Expect) -> list[str]:
        """Each expectation the request breaks, worded for the HTTP 400 body."""
        failures = []
        if expect.last_user_contains is not None and (
            expect.last_user_contains not in self.last_user_text
        ):
            failures.append(
                f"last_user_contains {expect.last_user_contains!r}: "
                f"last user message is {self.last_user_text[:200]!r}"
            )
        if expect.has_tool_result_for and expect.has_tool_result_for not in (
            self.tool_result_names()
        ):
            failures.append(
                f"has_tool_result_for {expect.has_tool_result_for!r}: "
                f"results present for {sorted(self.tool_result_names())}"
            )
        if expect.system_contains is not None and expect.system_contains not in self.system:
            failures.append(
                f"system_contains {expect.system_contains!r}: system is {self.system[:200]!r}"
            )
        missing = [name for name in expect.tools_include if name not in self.tool_names]
        if missing:
            failures.append(f"tools_include {missing}: tools sent are {self.tool_names}")
        count = len(self.messages) + (1 if self.system else 0)
        if expect.messages_count is not None and expect.messages_count != count:
            failures.append(f"messages_count {expect.messages_count}: request has {count}")
        return failures


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def openai_view(body: dict[str, Any], raw_chars: int) -> View:
    """Read an OpenAI Chat Completions body; system messages count in `messages_count`."""
    system, turns = [], []
    for m in body.get("messages") or []:
        role = m.get("role")
        if role in ("system", "developer"):
            system.append(_text(m.get("content")))
            continue
        calls = [
            (c.get("id", ""), (c.get("function") or {}).get("name", ""))
            for c in m.get("tool_calls") or []
        ]
        turns.append(
            Said(
                role,
                _text(m.get("content")),
                calls,
                m.get("tool_call_id"),
                m.get("name") if role == "tool" else None,
            )
        )
    tools = [(t.get("function") or {}).get("name", "") for t in body.get("tools") or []]
    return View("openai", str(body.get("model", "")), "\n\n".join(system), turns, tools, raw_chars)


def anthropic_view(body: dict[str, Any], raw_chars: int) -> View:
    """Read an Anthropic Messages body; a user message of only tool results counts as tool."""
    system = body.get("system") or ""
    turns = []
    for m in body.get("messages") or []:
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if m.get("role") == "assistant":
            calls = [
                (b.get("id", ""), b.get("name", "")) for b in blocks if b.get("type") == "tool_use"
            ]
            turns.append(Said("assistant", _text(blocks), calls))
            continue
        for b in blocks:
            if b.get("type") == "tool_result":
                turns.append(
                    Said("tool", _text(b.get("content")), tool_call_id=b.get("tool_use_id"))
                )
        if any(b.get("type") != "tool_result" for b in blocks):
            turns.append(Said("user", _text(blocks)))
    tools = [t.get("name", "") for t in body.get("tools") or []]
    choice = body.get("tool_choice") or {}
    forced = choice.get("name") if choice.get("type") == "tool" else None
    model = str(body.get("model", ""))
    return View("anthropic", model, _text(system), turns, tools, raw_chars, forced)
