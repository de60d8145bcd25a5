"""A stored message as the model reads it (Runtime §4), worked out once per message a
worker holds, and each thread's window kept between its model calls.

One step per message, all of it here: a tool result becomes its text, not its stored
envelope (`model_view`); a message over the preview cap is cut to a preview
(previews.py); the message is projected to the wire as its side sees it
(`project_message`, with image parts from images.py for a user message's attachments);
then it is measured and encoded. The pieces a message does not need are not entered: a
message that fits the cap is not previewed, one without attachments sends no images.

**Kept parts.** Redoing that for the whole window each step cost about 10 µs a message,
so a step's cost grew with the thread. The worker keeps each message's wire part under
the message's JSON text (`MessageJson`, the form the transcript cache keeps): equal texts
are equal messages, so an edited message is a new key, and the texts the cache hands out
step after step are found without being parsed. What is kept is tuples of plain values
(a wire entry is a dict of strings, or holds one list of tool calls), which the garbage
collector does not track, or tracks once: see store/transcripts.py for why that matters.

**Kept per thread.** Parts are kept for as many threads as the worker's workflow cache
holds (store/thread_cache_budget.py): a thread the cache dropped replays on its next task
anyway, and leaves no parts behind (`forget`). A thread's parts of one request shape are
those of its last whole window and what was added since, so a message before a new
boundary, or edited away, goes with the next whole window.

**Kept windows.** A step's window is usually the last step's window plus the messages
stored since. Built afresh, it cost a kept-part lookup and a few sums per message, about
1.2 ms a step at 800 messages. A worker keeps, per thread and request shape, the texts its
last window covered and what their parts summed to (`WindowTails`); when the new window's
texts begin with exactly those, only the rest is looked up. Anything else (an edited or
deleted message, a new boundary, another worker's window) is a different prefix, and the
window is worked out afresh. Windows are kept for as many threads as the parts. A user
message with attachments is the exception: its image parts depend on the request (which
images it sends, and whether the message is still among the recent ones), so it is
projected again every time, and the kept sums leave it out.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, NamedTuple

from weft.activities.images import ImageView, user_content
from weft.activities.previews import preview_message
from weft.contract.activities import ToolResult
from weft.contract.context_tokens import BYTES_PER_TOKEN, each_message_tokens
from weft.contract.messages import Message, Side
from weft.store.thread_cache_budget import DEFAULT_THREADS
from weft.store.transcripts import MessageJson, message_json

# Parts (or kept window texts) one worker keeps in all for each thread it keeps, beyond
# which the least recently used threads' are dropped: a bound on memory whatever the
# threads' lengths (a long thread's window is kept whole while it is in use).
VIEWS_PER_THREAD = 200
DEFAULT_MAX_VIEWS = DEFAULT_THREADS * VIEWS_PER_THREAD
# The most UTF-8 bytes one character takes: a text of n characters is within
# n * _MAX_CHAR_BYTES / BYTES_PER_TOKEN estimated tokens, whatever its characters.
_MAX_CHAR_BYTES = 4


# -- one message as its side reads it -------------------------------------------------


def model_view(message: Message) -> Message:
    """`message` as the model reads it: a tool message's stored envelope becomes its text
    (`tool_result_text`); any other message is returned as it is.

    Previews are cut from this view and `read_output` pages it, so a preview's offsets are
    offsets into the text the model saw (docs/tool-results.md).
    """
    if message.role != "tool" or not message.content:
        return message
    text = tool_message_text(message.content)
    return message if text == message.content else message.model_copy(update={"content": text})


def tool_message_text(content: str) -> str:
    """The model's text for a stored tool message's content; content that is not a
    `ToolResult` envelope (none that weft writes) is sent as it is."""
    try:
        result = ToolResult.model_validate_json(content)
    except ValueError:
        return content
    return tool_result_text(result)


def tool_result_text(result: ToolResult) -> str:
    """What the model reads of a tool result, instead of the stored envelope.

    A success is its `result`: a string as it is (the empty string as `""`, so a tool
    message is never empty), anything else as compact JSON. An error is `Error (code):
    message`, then its `error_data` and any partial `result` as compact JSON, a line each;
    never the stack. Attachments, of either, follow on a line naming their paths.
    """
    if result.status == "success":
        value = result.result
        text = value if isinstance(value, str) and value else _compact(value)
    else:
        head = f"Error ({result.error_code})" if result.error_code else "Error"
        lines = [f"{head}: {result.error or 'the tool failed'}"]
        lines += [_compact(v) for v in (result.error_data, result.result) if v is not None]
        text = "\n".join(lines)
    if result.attachments:
        text += "\n\n[attachments: " + ", ".join(result.attachments) + "]"
    return text


def project_messages(
    messages: list[Message], *, side: Side, dual: bool, images: ImageView | None = None
) -> list[dict[str, Any]]:
    """OpenAI-shaped history as `side` sees it.

    In `dual_ai`, a side sees its own messages as `assistant` and the other side's text as
    `user`, and never the other side's tool calls or results. With `images`, a user
    message's image attachments are sent as image parts (activities/images.py).
    """
    first_recent = len(messages) - images.recent if images else 0
    projected = (
        project_message(m, side=side, dual=dual, images=images, recent=i >= first_recent)
        for i, m in enumerate(messages)
    )
    return [entry for entry in projected if entry is not None]


def project_message(
    message: Message,
    *,
    side: Side,
    dual: bool,
    images: ImageView | None = None,
    recent: bool = False,
) -> dict[str, Any] | None:
    """One message as `side` sees it (see `project_messages`); None when it sees nothing.

    `recent` says whether a user message is among the last ones whose images are sent.
    """
    own = not dual or message.side in (side, None)
    if message.role == "assistant":
        if not own:
            return {"role": "user", "content": message.content} if message.content else None
        entry: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            entry["tool_calls"] = [c.model_dump() for c in message.tool_calls]
        signature = message.metadata.get("reasoningSignature")
        if signature and message.reasoning_content:
            # Anthropic needs its signed thinking back in a tool-use turn; other adapters
            # drop it.
            entry["thinking"] = {"text": message.reasoning_content, "signature": signature}
        return entry
    if message.role == "tool":
        if not own:
            return None
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": message.content or "",
        }
    # Attachments are files of the thread's filesystem: the model is always told their
    # paths (the images among them may also go as image parts, see activities/images.py).
    text = message.content or ""
    if not message.attachments:
        return {"role": message.role, "content": text}
    text += "\n\n[attachments: " + ", ".join(message.attachments) + "]"
    if message.role == "user":
        return {"role": "user", "content": user_content(message, text, images, recent=recent)}
    return {"role": message.role, "content": text}


def projection_is_fixed(message: Message) -> bool:
    """Whether the message projects the same way whatever images a request sends: only a
    user message with attachments may carry image parts."""
    return message.role != "user" or not message.attachments


def shown_message(
    message: Message,
    cap: int,
    *,
    side: Side,
    dual: bool,
    images: ImageView | None = None,
    recent: bool = False,
) -> tuple[dict[str, Any] | None, bool]:
    """One message as `side` reads it under the preview cap: its wire entry (None: the
    side does not see it) and whether it was cut to a preview."""
    shown, previewed = model_view(message), False
    if _may_exceed(shown, cap):
        shown, previewed = preview_message(shown, cap)
    return project_message(shown, side=side, dual=dual, images=images, recent=recent), previewed


def _may_exceed(message: Message, cap: int) -> bool:
    """Whether the message's content or a tool call's arguments may be estimated over
    `cap` tokens: a text of at most `cap * BYTES_PER_TOKEN / _MAX_CHAR_BYTES` characters
    never is, so only a longer one is measured (by `preview_message`)."""
    most = cap * BYTES_PER_TOKEN // _MAX_CHAR_BYTES
    if len(message.content or "") > most:
        return True
    return any(len(c.function.arguments) > most for c in message.tool_calls or ())


# -- measured and encoded -------------------------------------------------------------


class WirePart(NamedTuple):
    """One message of a request: its wire form as a side sees it (None: the side does not
    see it), whether it was previewed, its estimated tokens, its compact UTF-8 JSON (what
    the request body holds for it; b"" when unseen) and that JSON's length."""

    entry: dict[str, Any] | None
    previewed: bool
    tokens: int
    encoded: bytes
    json_bytes: int

    @classmethod
    def of(cls, entry: dict[str, Any] | None, previewed: bool = False) -> WirePart:
        return measured([(entry, previewed)])[0]


def measured(shown: Sequence[tuple[dict[str, Any] | None, bool]]) -> list[WirePart]:
    """Wire entries (and whether each was previewed) measured and encoded, in one pass:
    the estimates of all of them in one call."""
    seen = [entry for entry, _ in shown if entry is not None]
    counts = iter(each_message_tokens(seen))
    parts: list[WirePart] = []
    for entry, previewed in shown:
        if entry is None:
            parts.append(WirePart(None, previewed, 0, b"", 0))
            continue
        # Compact UTF-8 JSON, byte for byte what httpx sends for it (as
        # `providers.transport.compact_json` encodes a body).
        encoded = json.dumps(
            entry, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        ).encode()
        parts.append(WirePart(entry, previewed, next(counts), encoded, len(encoded)))
    return parts


def _compact(value: Any) -> str:
    # As the store's JSON: no spaces, non-ASCII text as it is (cheaper than \u escapes).
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# -- kept parts -----------------------------------------------------------------------

_Shape = tuple[int, Side, bool]  # the preview cap, side, dual
_Views = dict[MessageJson, WirePart]


class Parts(NamedTuple):
    """Messages' wire parts in order, and the indexes of those projected for one request
    only (user messages with attachments), which a later request must project again."""

    parts: list[WirePart]
    loose: list[int]


class MessageViews:
    """Each message's wire part under a preview cap, for a side, memoized per thread by the
    message's JSON text: at most `max_threads` threads' and `max_views` parts in all, least
    recently used threads dropped first. Parts are shared between requests: never mutate
    them."""

    def __init__(
        self, max_threads: int = DEFAULT_THREADS, max_views: int = DEFAULT_MAX_VIEWS
    ) -> None:
        self._max_threads = max_threads
        self._max_views = max_views
        self._threads: OrderedDict[str, dict[_Shape, _Views]] = OrderedDict()
        self._held = 0  # parts kept in all
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
        thread_id: str = "",
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

        The parts are kept as `thread_id`'s; a whole window (`offset` 0) replaces what the
        thread kept for the shape (cap, side, dual), a window's end adds to it.
        """
        keys = [m if isinstance(m, str) else message_json(m) for m in messages]
        shape: _Shape = (cap, side, dual)
        with self._lock:
            kept = self._threads.get(thread_id, {}).get(shape, {})
            found: list[WirePart | None] = [kept.get(key) for key in keys]
        length = offset + len(keys) if total is None else total
        first_recent = length - images.recent if images else 0
        # The messages not kept, shown first and measured together.
        missing: list[int] = []
        shown: list[tuple[dict[str, Any] | None, bool]] = []
        loose: list[int] = []
        for i, part in enumerate(found):
            if part is not None:
                continue
            message = messages[i]
            if not isinstance(message, Message):
                message = Message.model_validate_json(message)
            if projection_is_fixed(message):
                shown.append(shown_message(message, cap, side=side, dual=dual))
            else:
                recent = offset + i >= first_recent
                shown.append(
                    shown_message(message, cap, side=side, dual=dual, images=images, recent=recent)
                )
                loose.append(i)
            missing.append(i)
        is_loose = set(loose)
        made: _Views = {}
        if missing:
            for i, part in zip(missing, measured(shown), strict=True):
                found[i] = part
                if i not in is_loose:
                    made[keys[i]] = part
        if offset == 0:
            # A whole window: the thread keeps this window's parts, and no older ones.
            made = {
                keys[i]: part
                for i, part in enumerate(found)
                if part is not None and i not in is_loose
            }
        self._keep(thread_id, shape, made, whole=offset == 0)
        return Parts([p for p in found if p is not None], loose)

    def forget(self, thread_id: str) -> None:
        """Drop the thread's parts (the workflow cache dropped the thread)."""
        with self._lock:
            self._drop(thread_id)

    def threads_held(self) -> int:
        """How many threads' parts are kept."""
        with self._lock:
            return len(self._threads)

    def held(self) -> int:
        """How many parts are kept in all."""
        with self._lock:
            return self._held

    def _keep(self, thread_id: str, shape: _Shape, made: _Views, *, whole: bool) -> None:
        with self._lock:
            shapes = self._threads.setdefault(thread_id, {})
            self._threads.move_to_end(thread_id)
            kept = shapes.get(shape)
            if whole or kept is None:
                self._held += len(made) - (len(kept) if kept is not None else 0)
                shapes[shape] = made
            else:
                before = len(kept)
                kept.update(made)
                self._held += len(kept) - before
            # The thread just used stays, even alone over `max_views` (its window is needed).
            while len(self._threads) > 1 and (
                len(self._threads) > self._max_threads or self._held > self._max_views
            ):
                self._drop(next(iter(self._threads)))

    def _drop(self, thread_id: str) -> None:
        shapes = self._threads.pop(thread_id, None)
        if shapes is not None:
            self._held -= sum(len(views) for views in shapes.values())


# -- kept windows ---------------------------------------------------------------------


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
        return _summed(None, parts, [], 0)[0]


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
    """Each thread's last window sums, kept per thread and request shape (side, preview
    cap, dual), for at most `max_threads` threads and `max_messages` texts in all (least
    recently used threads dropped first)."""

    def __init__(
        self,
        views: MessageViews,
        max_messages: int = DEFAULT_MAX_VIEWS,
        *,
        max_threads: int = DEFAULT_THREADS,
    ) -> None:
        self._views = views
        self._max_messages = max_messages
        self._max_threads = max_threads
        self._kept: OrderedDict[str, dict[_Shape, _Kept]] = OrderedDict()
        self._held = 0  # texts kept in all
        self._lock = threading.Lock()  # windows are built on several pool threads at once

    def sums(
        self,
        thread_id: str,
        texts: list[MessageJson],
        cap: int,
        *,
        side: Side,
        dual: bool,
        images: ImageView | None,
    ) -> WindowSums:
        """The window of `texts` (every message of it, in order) of the thread's request
        shape (`cap`, `side`, `dual`)."""
        shape: _Shape = (cap, side, dual)
        with self._lock:
            kept = self._kept.get(thread_id, {}).get(shape)
        start = len(kept.texts) if kept is not None else 0
        # Equal lists of the cache's own text objects compare by identity: a quick check.
        if kept is not None and (len(texts) < start or texts[:start] != kept.texts):
            kept, start = None, 0
        new = self._views.parts(
            texts[start:],
            cap,
            side=side,
            dual=dual,
            images=images,
            offset=start,
            total=len(texts),
            thread_id=thread_id,
        )
        fixed, loose = _summed(kept, new.parts, new.loose, start)
        sums = (
            _with_loose(fixed, loose, texts, new.parts, start, cap, side, dual, images)
            if loose
            else fixed
        )
        with self._lock:
            shapes = self._kept.setdefault(thread_id, {})
            self._kept.move_to_end(thread_id)
            old = shapes.get(shape)
            self._held += len(texts) - (len(old.texts) if old else 0)
            shapes[shape] = _Kept(list(texts), fixed, loose)
            while self._kept and (
                len(self._kept) > self._max_threads or self._held > self._max_messages
            ):
                self._drop(next(iter(self._kept)))
        return sums

    def forget(self, thread_id: str) -> None:
        """Drop the thread's windows (the workflow cache dropped the thread)."""
        with self._lock:
            self._drop(thread_id)

    def held(self) -> int:
        """How many texts the kept windows hold in all."""
        with self._lock:
            return self._held

    def threads_held(self) -> int:
        """How many threads' windows are kept."""
        with self._lock:
            return len(self._kept)

    def _drop(self, thread_id: str) -> None:
        shapes = self._kept.pop(thread_id, None)
        if shapes is not None:
            self._held -= sum(len(kept.texts) for kept in shapes.values())


def _summed(
    kept: _Kept | None, parts: Sequence[WirePart], new_loose: list[int], start: int
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


def _with_loose(
    fixed: WindowSums,
    loose: tuple[_Loose, ...],
    texts: list[MessageJson],
    new_parts: list[WirePart],
    start: int,
    cap: int,
    side: Side,
    dual: bool,
    images: ImageView | None,
) -> WindowSums:
    """The loose messages' parts for this request (just made for the new ones) in their
    places: in copies of the kept lists, which the next request fills again."""
    parts: dict[int, WirePart] = {}
    again: list[_Loose] = []
    shown: list[tuple[dict[str, Any] | None, bool]] = []
    for place in loose:
        if place.text_index >= start:
            parts[place.entry_index] = new_parts[place.text_index - start]
            continue
        recent = images is not None and place.text_index >= len(texts) - images.recent
        message = Message.model_validate_json(texts[place.text_index])
        shown.append(
            shown_message(message, cap, side=side, dual=dual, images=images, recent=recent)
        )
        again.append(place)
    if again:
        for place, part in zip(again, measured(shown), strict=True):
            parts[place.entry_index] = part
    entries, encoded = list(fixed.entries), list(fixed.encoded)
    previews, tokens, json_bytes = fixed.previews, fixed.tokens, fixed.json_bytes
    for index, part in parts.items():
        assert part.entry is not None, "a user message is seen by every side"
        entries[index] = part.entry
        encoded[index] = part.encoded
        previews += part.previewed
        tokens += part.tokens
        json_bytes += part.json_bytes
    return WindowSums(entries, encoded, previews, tokens, json_bytes)
