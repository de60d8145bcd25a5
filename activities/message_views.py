"""Each stored message as a model reads it, worked out once per message a worker holds.

A request shows every message of the window through `model_view` (a tool result's text,
not its envelope) and `preview_message` (cut to the preview cap), projected to the wire.
Redoing that for the whole window each step cost about 10 µs a message, so a step's cost
grew with the thread. The worker keeps each message's wire part under the message's JSON
text (`MessageJson`, the form the transcript cache keeps): equal texts are equal messages,
so an edited message is a new key, and the texts the cache hands out step after step are
found without being parsed.

What is kept is tuples of plain values (a wire entry is a dict of strings, or holds one
list of tool calls), which the garbage collector does not track, or tracks once: see
store/transcripts.py for why that matters.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, NamedTuple

from weft.activities.context import model_view, project_message, projection_is_fixed
from weft.activities.images import ImageView
from weft.activities.previews import preview_message
from weft.activities.providers.transport import compact_json
from weft.contract.context_tokens import estimate_message_tokens
from weft.contract.messages import Message, Side
from weft.store.transcripts import MessageJson, message_json

# Parts one worker keeps, least recently used dropped first: a few long windows' worth.
DEFAULT_MAX_VIEWS = 200_000


class WirePart(NamedTuple):
    """One message of a request: its wire form as a side sees it (None: the side does not
    see it), whether it was previewed, its estimated tokens, and its compact UTF-8 JSON
    (what the request body holds for it; b"" when unseen) and that JSON's length."""

    entry: dict[str, Any] | None
    previewed: bool
    tokens: int
    encoded: bytes

    @property
    def json_bytes(self) -> int:
        return len(self.encoded)

    @classmethod
    def of(cls, entry: dict[str, Any] | None, previewed: bool = False) -> WirePart:
        if entry is None:
            return cls(None, previewed, 0, b"")
        # What httpx would send for it.
        return cls(entry, previewed, estimate_message_tokens([entry]), compact_json(entry))


_Key = tuple[MessageJson, int, Side, bool]  # the message, the preview cap, side, dual


class MessageViews:
    """Each message's wire part under a preview cap, for a side, memoized by the message's
    JSON text. Parts are shared between requests: never mutate them."""

    def __init__(self, max_views: int = DEFAULT_MAX_VIEWS) -> None:
        self._max_views = max_views
        self._parts: OrderedDict[_Key, WirePart] = OrderedDict()
        self._lock = threading.Lock()  # windows are built on several pool threads at once

    def parts(
        self,
        messages: Sequence[Message | MessageJson],
        cap: int,
        *,
        side: Side,
        dual: bool,
        images: ImageView | None,
        offset: int = 0,
        total: int | None = None,
    ) -> Parts:
        """The messages as a request sends them, measured, in order, and which of them
        were projected for this request only (`loose`).

        A kept part is a lookup; a new message is parsed, projected and measured once
        (about 10 µs). A user message with attachments is projected each time: its image
        parts depend on the request (`images`, and whether it is among the recent ones).
        A `Message` (a pinned one, or one a hook or prompt tool rebuilt) is keyed by its
        JSON, so an unchanged one is found too. `messages` may be the end of a longer
        window: they start at `offset` in it, and it holds `total` messages (recent images
        are counted from the window's end).
        """
        keys: list[_Key] = [
            (m if isinstance(m, str) else message_json(m), cap, side, dual) for m in messages
        ]
        with self._lock:
            found: list[WirePart | None] = [self._parts.get(key) for key in keys]
            for key, part in zip(keys, found, strict=True):
                if part is not None:
                    self._parts.move_to_end(key)
        length = offset + len(keys) if total is None else total
        first_recent = length - images.recent if images else 0
        made: dict[_Key, WirePart] = {}
        parts: list[WirePart] = []
        loose: list[int] = []
        for i, (key, part) in enumerate(zip(keys, found, strict=True)):
            if part is None:
                message = messages[i]
                if not isinstance(message, Message):
                    message = Message.model_validate_json(message)
                if projection_is_fixed(message):
                    part = made[key] = project_part(message, cap, side=side, dual=dual)
                else:
                    recent = offset + i >= first_recent
                    part = project_part(
                        message, cap, side=side, dual=dual, images=images, recent=recent
                    )
                    loose.append(i)
            parts.append(part)
        if made:
            with self._lock:
                self._parts.update(made)
                while len(self._parts) > self._max_views:
                    self._parts.popitem(last=False)
        return Parts(parts, loose)


class Parts(NamedTuple):
    """Messages' wire parts in order, and the indexes of those projected for one request
    only (user messages with attachments), which a later request must project again."""

    parts: list[WirePart]
    loose: list[int]


def project_part(
    message: Message,
    cap: int,
    *,
    side: Side,
    dual: bool,
    images: ImageView | None = None,
    recent: bool = False,
) -> WirePart:
    """One message as `side` reads it under the preview cap, measured."""
    shown, previewed = preview_message(model_view(message), cap)
    entry = project_message(shown, side=side, dual=dual, images=images, recent=recent)
    return WirePart.of(entry, previewed)
