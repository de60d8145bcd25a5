"""A thread's window kept between its model calls, and extended by what is new.

A step's window is usually the last step's window plus the messages stored since. Built
afresh, it cost a kept-part lookup and a few sums per message (`MessageViews`), so a
step's cost grew with the thread: about 1.2 ms a step at 800 messages. A worker keeps, per
thread and request shape, the texts its last window covered and what their parts summed
to; when the new window's texts begin with exactly those, only the rest is looked up.
Anything else (an edited or deleted message, a new boundary, another worker's window) is
a different prefix, and the window is worked out afresh.

A user message with attachments is the exception: its image parts depend on the request
(which images it sends, and whether the message is still among the recent ones), so it is
projected again every time, and the kept sums leave it out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any, NamedTuple

from weft.activities.images import ImageView
from weft.activities.message_views import DEFAULT_MAX_VIEWS, MessageViews, WirePart, project_part
from weft.contract.messages import Message, Side
from weft.store.transcripts import MessageJson


class WindowSums(NamedTuple):
    """A window's messages as sent (those its side sees) and each one's JSON, how many were
    previewed, and their estimated tokens and JSON bytes summed."""

    entries: list[dict[str, Any]]
    encoded: list[bytes]
    previews: int
    tokens: int
    json_bytes: int

    @classmethod
    def of(cls, parts: Sequence[WirePart]) -> WindowSums:
        return cls(
            [p.entry for p in parts if p.entry is not None],
            [p.encoded for p in parts if p.entry is not None],
            sum(p.previewed for p in parts),
            sum(p.tokens for p in parts),
            sum(p.json_bytes for p in parts),
        )


class _Loose(NamedTuple):
    """A message projected anew for every request: where it is in the texts, and where its
    entry is in the kept entries."""

    text_index: int
    entry_index: int


class _Kept(NamedTuple):
    texts: list[MessageJson]
    # Entries and JSON of every seen message (a loose one's as last projected); the sums
    # leave the loose messages out.
    fixed: WindowSums
    loose: tuple[_Loose, ...]


class WindowTails:
    """Each thread's last window sums, kept per (thread, side, preview cap, dual) key, at
    most `max_messages` texts in all (least recently used dropped first)."""

    def __init__(self, views: MessageViews, max_messages: int = DEFAULT_MAX_VIEWS) -> None:
        self._views = views
        self._max_messages = max_messages
        self._kept: OrderedDict[Hashable, _Kept] = OrderedDict()
        self._held = 0  # texts kept in all
        self._lock = threading.Lock()  # windows are built on several pool threads at once

    def sums(
        self,
        key: Hashable,
        texts: list[MessageJson],
        cap: int,
        *,
        side: Side,
        dual: bool,
        images: ImageView | None,
    ) -> WindowSums:
        """The window of `texts` (every message of it, in order) for the request shape
        `key` names; `cap`, `side` and `dual` must be the same for every use of a key."""
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
        start = len(kept.texts) if kept is not None else 0
        # Equal lists of the cache's own text objects compare by identity: a quick check.
        if kept is not None and (len(texts) < start or texts[:start] != kept.texts):
            kept, start = None, 0
        new = self._views.parts(
            texts[start:], cap, side=side, dual=dual, images=images, offset=start, total=len(texts)
        )
        fixed, loose = _extended(kept, new.parts, new.loose, start)
        # `fixed`'s lists are new: the loose messages' places are filled in them, for this
        # request (the next one fills them again).
        previews, tokens, json_bytes = fixed.previews, fixed.tokens, fixed.json_bytes
        for place in loose:
            part = _loose_part(texts, place, new.parts, start, cap, side, dual, images)
            assert part.entry is not None, "a user message is seen by every side"
            fixed.entries[place.entry_index] = part.entry
            fixed.encoded[place.entry_index] = part.encoded
            previews += part.previewed
            tokens += part.tokens
            json_bytes += part.json_bytes
        self._keep(key, _Kept(list(texts), fixed, loose))
        return WindowSums(fixed.entries, fixed.encoded, previews, tokens, json_bytes)

    def held(self) -> int:
        """How many texts the kept windows hold in all."""
        with self._lock:
            return self._held

    def _keep(self, key: Hashable, kept: _Kept) -> None:
        with self._lock:
            old = self._kept.pop(key, None)
            self._held += len(kept.texts) - (len(old.texts) if old else 0)
            self._kept[key] = kept
            while self._held > self._max_messages and self._kept:
                _, dropped = self._kept.popitem(last=False)
                self._held -= len(dropped.texts)


def _extended(
    kept: _Kept | None, parts: list[WirePart], new_loose: list[int], start: int
) -> tuple[WindowSums, tuple[_Loose, ...]]:
    """The kept sums with `parts` (the texts from `start` on) added: fixed parts summed,
    every seen part's entry appended, the loose ones' places noted."""
    base = kept.fixed if kept is not None else WindowSums([], [], 0, 0, 0)
    loose = list(kept.loose) if kept is not None else []
    entries, encoded = list(base.entries), list(base.encoded)
    previews, tokens, json_bytes = base.previews, base.tokens, base.json_bytes
    is_loose = set(new_loose)
    for i, part in enumerate(parts):
        if i in is_loose:
            loose.append(_Loose(start + i, len(entries)))
            entries.append({})  # its place: filled for each request
            encoded.append(b"")
            continue
        if part.entry is not None:
            entries.append(part.entry)
            encoded.append(part.encoded)
        previews += part.previewed
        tokens += part.tokens
        json_bytes += part.json_bytes
    return WindowSums(entries, encoded, previews, tokens, json_bytes), tuple(loose)


def _loose_part(
    texts: list[MessageJson],
    place: _Loose,
    new_parts: list[WirePart],
    start: int,
    cap: int,
    side: Side,
    dual: bool,
    images: ImageView | None,
) -> WirePart:
    """A loose message's part for this request: just made when the message is new."""
    if place.text_index >= start:
        return new_parts[place.text_index - start]
    recent = images is not None and place.text_index >= len(texts) - images.recent
    message = Message.model_validate_json(texts[place.text_index])
    return project_part(message, cap, side=side, dual=dual, images=images, recent=recent)
