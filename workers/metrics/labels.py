"""Label values kept to a bounded set, so a stray name cannot grow a metric without end."""

from __future__ import annotations

import threading

OTHER = "other"


class BoundedLabel:
    """Passes the first `limit` distinct values through; every later one becomes "other".

    Model, tool and agent names come from definitions, so they are few; but a model can
    call a tool name it invented, and one worker may serve many definition sets. Each
    distinct value is a time series on every Prometheus server that scrapes the worker.
    """

    def __init__(self, limit: int = 64) -> None:
        self._limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()  # store writes report from worker threads

    def __call__(self, value: object) -> str:
        text = value if isinstance(value, str) and value else "unknown"
        with self._lock:
            if text in self._seen:
                return text
            if len(self._seen) < self._limit:
                self._seen.add(text)
                return text
        return OTHER
