"""A small Server-Sent Events parser over an httpx line iterator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event: its `event:` name (if any) and its joined `data:` lines."""

    event: str | None
    data: str


async def iter_sse(lines: AsyncIterator[str]) -> AsyncIterator[SseEvent]:
    """Yield events as blank lines dispatch them, following the WHATWG field rules."""
    event: str | None = None
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield SseEvent(event, "\n".join(data))
            event, data = None, []
            continue
        if line.startswith(":"):  # comment / keep-alive ping
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value
    # Leniency: a last event without its trailing blank line still counts; if the stream
    # was cut inside it, the caller's JSON parse reports the damage.
    if data:
        yield SseEvent(event, "\n".join(data))
