"""Replayed tools for evals: a thread's tool calls served from a recording, never run.

The eval runner registers a table per thread with the worker's `ToolReplays` before the
thread starts; `tool.call` asks it first. A recorded result matches a call by tool name and
canonical JSON arguments, and each is served once, in recorded order, so a case that calls
the same tool twice gets the two recorded answers. A call with no recorded match gets an
error result naming it, and the miss is kept for the runner to fail the case with.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterable
from typing import Any

from weft.contract.activities import ToolResult

NO_RECORDING = "no_recorded_result"


def canonical(arguments: Any) -> str:
    """The JSON text two equal argument objects share, whatever their key order."""
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def call_text(name: str, arguments: Any) -> str:
    """A call as a person reads it: `name({...})`."""
    return f"{name}({canonical(arguments)})"


class ReplayTable:
    """The recorded results of one thread's tool calls, keyed by name and arguments."""

    def __init__(self, recorded: Iterable[tuple[str, Any, ToolResult]]) -> None:
        self._results: dict[tuple[str, str], deque[ToolResult]] = {}
        for name, arguments, result in recorded:
            self._results.setdefault((name, canonical(arguments)), deque()).append(result)
        self.misses: list[str] = []
        self.served = 0
        # What each call was given, by its result message id: a retried attempt of the
        # same call gets the same answer instead of consuming the next one.
        self._given: dict[str, ToolResult] = {}
        # One thread's calls come in order, but a worker may run calls of different
        # threads at once; the lock keeps a table sound if two attempts overlap.
        self._lock = threading.Lock()

    def take(self, name: str, arguments_json: str | None, call_key: str = "") -> ToolResult:
        """The next recorded result of this call (the one already given to `call_key`, for
        a retry), or an error result naming it."""
        with self._lock:
            if call_key in self._given:
                return self._given[call_key]
        result = self._take(name, arguments_json)
        if call_key:
            with self._lock:
                self._given[call_key] = result
        return result

    def _take(self, name: str, arguments_json: str | None) -> ToolResult:
        try:
            arguments = json.loads(arguments_json or "{}")
        except ValueError:
            arguments = arguments_json
        with self._lock:
            queued = self._results.get((name, canonical(arguments)))
            if queued:
                self.served += 1
                return queued.popleft()
            text = call_text(name, arguments)
            self.misses.append(text)
        return ToolResult(
            status="error",
            error=f"eval replay: no recorded result for the call {text}",
            error_code=NO_RECORDING,
        )


class ToolReplays:
    """The worker's replay tables, by thread id; threads without one run their tools."""

    def __init__(self) -> None:
        self._tables: dict[str, ReplayTable] = {}

    def register(self, thread_id: str, table: ReplayTable) -> None:
        """Serve `thread_id`'s tool calls from `table` from now on."""
        self._tables[thread_id] = table

    def forget(self, thread_id: str) -> None:
        """Drop a finished thread's table."""
        self._tables.pop(thread_id, None)

    def serve(
        self, thread_id: str, name: str, arguments_json: str | None, call_key: str
    ) -> ToolResult | None:
        """The recorded result for this call, or None when the thread's tools run live."""
        table = self._tables.get(thread_id)
        return None if table is None else table.take(name, arguments_json, call_key)
