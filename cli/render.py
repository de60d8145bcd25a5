"""Renders a thread's event stream as a readable, live transcript for a terminal."""

from __future__ import annotations

import json
from typing import Any, TextIO

from weft.contract.events import Event

# The most of a user's message the transcript shows: the rest is in the store.
USER_TEXT_SHOWN = 2000


class TranscriptPrinter:
    """Prints streamed reasoning and text as they arrive, and one line per tool call and turn
    boundary."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._mid_line = False
        self._label = ""  # what the current streamed line is: reasoning or the answer
        self._indent = ""  # inside a prompt tool: one step in per depth

    def show(self, event: Event) -> None:
        """Print what `event` adds to the transcript (most bookkeeping events print nothing)."""
        payload: Any = event.payload if isinstance(event.payload, dict) else {}
        kind = event.type
        nested = "parentToolCallId" in payload  # written inside a prompt tool
        self._indent = "    " * int(payload.get("depth") or 0) if nested else ""
        if kind == "model.requested" and payload.get("reset"):
            self._line(f"  (retrying the model call, attempt {payload.get('attempt')})")
        elif kind == "model.delta" and payload.get("kind") == "text":
            self._stream("assistant: ", str(payload.get("text", "")))
        elif kind == "reasoning.delta":
            self._stream("  (thinking) ", str(payload.get("text", "")))
        elif kind == "model.completed":
            self._end_line()
        elif kind == "model.failed":
            self._line(
                f"  ! model failed (attempt {payload.get('attempt')}): {payload.get('error')}"
            )
        elif kind == "tool.started":
            self._line(f"  → {payload.get('name')}({_short(payload.get('arguments'))})")
        elif kind in ("tool.result", "tool.failed"):
            status = payload.get("status") or "error"
            detail = (
                f": {payload.get('error') or payload.get('message')}" if status != "success" else ""
            )
            self._line(f"  ← {payload.get('name')} {status}{detail}")
        elif kind == "queue.changed" and payload.get("action") == "enqueued":
            self._line(f"  (queued {payload.get('queueId')})")
        elif kind == "turn.completed":
            self._line(f"[turn completed: {payload.get('stopReason')}]")
        elif kind == "turn.failed":
            self._line(f"[turn failed: {payload.get('reason')}]")
        elif kind == "action.required":
            # The id to answer with `weft thread respond`, and what is asked.
            self._line(
                f"  ? waiting on a human ({payload.get('actionType')} {event.action_id}):"
                f" {payload.get('prompt')}"
            )
        elif kind == "action.resolved":
            self._line(
                f"  ✓ {payload.get('actionType')} {event.action_id}: {payload.get('decision')}"
                f" (by {payload.get('decidedBy')})"
            )
        elif kind == "tool.catalog.resolved":
            for name, server in (payload.get("servers") or {}).items():
                self._line(_catalog_line(name, server, payload.get("reason")))
        elif kind == "runtime.warning":
            self._line(f"  ! warning: {payload.get('message')}")
        elif kind in ("hook.completed", "hook.failed"):
            self._line(_hook_line(payload))
        elif kind == "history.rollback.completed":  # where to follow on (docs/time-travel.md)
            self._line(f"[rewound: continued by thread {payload.get('successorThreadId')}]")
        self._out.flush()

    def user(self, text: str) -> None:
        """Print a message the user sent; a long one (a pasted file) is cut, with its size."""
        self._indent = ""
        if len(text) > USER_TEXT_SHOWN:
            text = f"{text[:USER_TEXT_SHOWN]}… ({len(text)} characters)"
        self._line(f"user: {text}")
        self._out.flush()

    def _line(self, text: str) -> None:
        self._end_line()
        self._out.write(self._indent + text + "\n")

    def _stream(self, label: str, text: str) -> None:
        """Continue the streamed line, or start one under `label` when the kind changes."""
        label = self._indent + label
        if self._mid_line and self._label != label:
            self._end_line()
        if not self._mid_line:
            self._out.write(label)
            self._label = label
        self._out.write(text)
        self._mid_line = True

    def _end_line(self) -> None:
        if self._mid_line:
            self._out.write("\n")
            self._mid_line = False


def _hook_line(payload: dict[str, Any]) -> str:
    """One line per hook run: what it did to the data, or why it failed (docs/hooks.md)."""
    hook = f"hook {payload.get('hookId')} ({payload.get('hook')})"
    if "error" in payload:
        return f"  ! {hook} failed: {payload['error']}"
    reason = f": {payload['reason']}" if payload.get("reason") else ""
    return f"  · {hook} {payload.get('outcome')}{reason}"


def _catalog_line(name: str, server: dict[str, Any], reason: Any) -> str:
    """One line per MCP server listed: its tools, or why there are none (docs/mcp.md)."""
    why = "" if reason == "prompt_active" else f", {reason}"
    if server.get("status") != "ready":
        return f"  (MCP {name} unavailable{why}: {server.get('error')})"
    tools = ", ".join(server.get("tools") or []) or "no tools"
    return f"  (MCP {name} ready{why}: {_short(tools)})"


def _short(arguments: Any, limit: int = 80) -> str:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return text if len(text) <= limit else text[: limit - 1] + "…"
