"""Each stored message as a model reads it, worked out once per message a worker holds.

A request shows every message of the window through `model_view` (a tool result's text,
not its envelope) and `preview_message` (cut to the preview cap). Redoing that for the
whole window each step cost about 10 µs a message, so a step's cost grew with the thread.
The transcript cache (store/transcripts.py) hands out the same `Message` objects step
after step, so the view is kept per object: an edited or reread message is a new object
and gets its own view.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from weft.activities.context import model_view, project_message, projection_is_fixed
from weft.activities.images import ImageView
from weft.activities.previews import preview_message
from weft.contract.context_budget import estimate_message_tokens
from weft.contract.messages import Message, Side

# Views one worker keeps, least recently used dropped first: a few long windows' worth.
DEFAULT_MAX_VIEWS = 200_000


@dataclass(frozen=True)
class WirePart:
    """One message of a request: its wire form as a side sees it (None: the side does not
    see it), whether it was previewed, its estimated tokens and its UTF-8 JSON bytes."""

    entry: dict[str, Any] | None
    previewed: bool
    tokens: int
    json_bytes: int

    @classmethod
    def of(cls, entry: dict[str, Any] | None, previewed: bool = False) -> WirePart:
        if entry is None:
            return cls(None, previewed, 0, 0)
        return cls(entry, previewed, estimate_message_tokens([entry]), json_size(entry))


def json_size(value: Any) -> int:
    """UTF-8 bytes of `value` as compact JSON (as requests are measured)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


class MessageViews:
    """`preview_message(model_view(message), cap)` and each message's wire part, memoized
    by message identity. Entries are shared between requests: never mutate them."""

    def __init__(self, max_views: int = DEFAULT_MAX_VIEWS) -> None:
        self._max_views = max_views
        # id(message) -> (message, cap, shown, previewed). Holding the message itself keeps
        # its id from being reused by another object while the entry lives.
        self._views: OrderedDict[int, tuple[Message, int, Message, bool]] = OrderedDict()
        # id(message) -> (message, (cap, side, dual), its wire part).
        self._parts: OrderedDict[int, tuple[Message, tuple[int, Side, bool], WirePart]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()  # windows are built on several pool threads at once

    def shown(self, message: Message, cap: int) -> tuple[Message, bool]:
        """The message as sent under a preview cap of `cap` tokens, and whether it was cut."""
        key = id(message)
        with self._lock:
            kept = self._views.get(key)
            if kept is not None and kept[0] is message and kept[1] == cap:
                self._views.move_to_end(key)
                return kept[2], kept[3]
        shown, previewed = preview_message(model_view(message), cap)
        with self._lock:
            self._views[key] = (message, cap, shown, previewed)
            while len(self._views) > self._max_views:
                self._views.popitem(last=False)
        return shown, previewed

    def part(
        self,
        message: Message,
        cap: int,
        *,
        side: Side,
        dual: bool,
        images: ImageView | None,
        recent: bool,
    ) -> WirePart:
        """The message as a request sends it, measured; kept per message, cap and side.

        Projecting and measuring every message each step cost about 5 µs a message (2 ms
        a step at 800 messages); kept, a window is a list of lookups. A user message with
        attachments is projected each time: its image parts depend on the request.
        """
        fixed = projection_is_fixed(message)
        key = id(message)
        if fixed:
            with self._lock:
                kept = self._parts.get(key)
                if kept is not None and kept[0] is message and kept[1] == (cap, side, dual):
                    self._parts.move_to_end(key)
                    return kept[2]
        shown, previewed = self.shown(message, cap)
        if not fixed:
            entry = project_message(shown, side=side, dual=dual, images=images, recent=recent)
            return WirePart.of(entry, previewed)
        part = WirePart.of(project_message(shown, side=side, dual=dual), previewed)
        with self._lock:
            self._parts[key] = (message, (cap, side, dual), part)
            while len(self._parts) > self._max_views:
                self._parts.popitem(last=False)
        return part
