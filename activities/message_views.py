"""Each stored message as a model reads it, worked out once per message a worker holds.

A request shows every message of the window through `model_view` (a tool result's text,
not its envelope) and `preview_message` (cut to the preview cap). Redoing that for the
whole window each step cost about 10 µs a message, so a step's cost grew with the thread.
The transcript cache (store/transcripts.py) hands out the same `Message` objects step
after step, so the view is kept per object: an edited or reread message is a new object
and gets its own view.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from weft.activities.context import model_view
from weft.activities.previews import preview_message
from weft.contract.messages import Message

# Views one worker keeps, least recently used dropped first: a few long windows' worth.
DEFAULT_MAX_VIEWS = 200_000


class MessageViews:
    """`preview_message(model_view(message), cap)`, memoized by message identity."""

    def __init__(self, max_views: int = DEFAULT_MAX_VIEWS) -> None:
        self._max_views = max_views
        # id(message) -> (message, cap, shown, previewed). Holding the message itself keeps
        # its id from being reused by another object while the entry lives.
        self._views: OrderedDict[int, tuple[Message, int, Message, bool]] = OrderedDict()
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
