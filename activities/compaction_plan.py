"""Where a compaction cuts the transcript, and how the summarised part reads to the summariser.

Pure functions over stored messages. The cut never separates a tool call from its result:
the kept tail starts at a user or system message (a turn) when one lies within the tail
budget, else at an assistant message (a step); never at a tool result. Pinned messages
before the cut are kept verbatim instead of summarised.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from weft.activities.message_views import model_view
from weft.activities.previews import preview_message
from weft.contract.context import PINNED_METADATA_KEY
from weft.contract.context_tokens import estimate_tokens, message_tokens
from weft.contract.messages import Message

# What a tool call's arguments may take in the summariser's input.
ARGUMENT_CHARS = 500
# Framing of each rendered line ("[12] assistant: ").
LINE_OVERHEAD_TOKENS = 8


@dataclass(frozen=True)
class Plan:
    """One compaction's split of the messages after the previous boundary."""

    summarised: list[Message]  # folded into the summary
    pinned: list[Message]  # before the cut, kept verbatim
    tail: list[Message]  # from the cut on, sent whole

    @property
    def first_kept_position(self) -> int:
        return self.tail[0].position


def plan_cut(
    messages: list[Message], tail_tokens: int, cap: int, *, forced: bool = False
) -> Plan | None:
    """Split `messages` so the tail fits `tail_tokens`; None when nothing precedes the tail.

    When even the latest step is over `tail_tokens`, the tail is that step alone. A
    `forced` compaction (asked for by a signal or a tool) keeps only the latest turn.
    """
    if forced:
        cut = _last(messages, ("user", "system"))
        return _split(messages, cut if cut is not None else _last(messages, ("assistant",)))
    start = len(messages)
    used = 0
    for index in range(len(messages) - 1, -1, -1):
        used += message_tokens(messages[index], cap)
        if used > tail_tokens:
            break
        start = index
    if start == 0:
        return None  # everything fits in the tail
    cut = _first(messages, start, ("user", "system"))
    if cut is None:
        cut = _first(messages, start, ("assistant",))
    if cut is None:  # the newest step alone is over the tail budget: keep just that step
        cut = _last(messages, ("user", "system", "assistant"))
    return _split(messages, cut)


def _split(messages: list[Message], cut: int | None) -> Plan | None:
    if not cut:  # None, or 0: nothing before the tail
        return None
    head = messages[:cut]
    pinned = [m for m in head if is_pinned(m)]
    return Plan([m for m in head if not is_pinned(m)], pinned, messages[cut:])


def is_pinned(message: Message) -> bool:
    """Whether `message` is pinned and can stand alone (a call without its result cannot)."""
    if not (message.metadata or {}).get(PINNED_METADATA_KEY):
        return False
    return message.role in ("user", "system") or (
        message.role == "assistant" and not message.tool_calls
    )


def render_lines(messages: list[Message], cap: int) -> Iterator[str]:
    """The messages as the summariser reads them, one block each, big ones previewed;
    tool results as the model reads them (`model_view`)."""
    for message in messages:
        shown, _ = preview_message(model_view(message), cap)
        text = shown.content or ""
        if message.role == "assistant":
            calls = [
                f" -> called {c.function.name}({c.function.arguments[:ARGUMENT_CHARS]})"
                for c in message.tool_calls or []
            ]
            yield f"[{message.position}] assistant: {text}{''.join(calls)}"
        elif message.role == "tool":
            status = f", {message.tool_status}" if message.tool_status else ""
            yield f"[{message.position}] tool result ({message.name or 'tool'}{status}): {text}"
        else:
            yield f"[{message.position}] {message.role}: {text}"


def chunk_lines(lines: Iterator[str], chunk_tokens: int) -> Iterator[list[str]]:
    """Consecutive lines grouped so each group's estimate stays within `chunk_tokens`."""
    chunk: list[str] = []
    used = 0
    for line in lines:
        size = estimate_tokens(line) + LINE_OVERHEAD_TOKENS
        if chunk and used + size > chunk_tokens:
            yield chunk
            chunk, used = [], 0
        chunk.append(line)
        used += size
    if chunk:
        yield chunk


def _first(messages: list[Message], start: int, roles: tuple[str, ...]) -> int | None:
    return next((i for i in range(start, len(messages)) if messages[i].role in roles), None)


def _last(messages: list[Message], roles: tuple[str, ...]) -> int | None:
    return next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role in roles), None)
