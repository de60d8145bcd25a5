"""Replayed tools for evals: a thread's tool calls served from a recording, never run.

The eval runner registers a table per thread with the worker's `ToolReplays` before the
thread starts; `tool.call` asks it first. A recorded result matches a call by tool name and
canonical JSON arguments, and each is served once, in recorded order, so a case that calls
the same tool twice gets the two recorded answers. A call with no recorded match gets an
error result naming it, and the miss is kept for the runner to fail the case with.

Subagents of an eval thread are served from the table's `subagents`: the recorded thread's
subagents' results (its whole tree), matched the same way. A subagent is known by its
thread row's parent (`ToolReplays.parents`), read once per thread.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable
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

    def __init__(
        self,
        recorded: Iterable[tuple[str, Any, ToolResult]],
        *,
        subagents: Iterable[tuple[str, Any, ToolResult]] = (),
        misses: list[str] | None = None,
    ) -> None:
        self._results: dict[tuple[str, str], deque[ToolResult]] = {}
        for name, arguments, result in recorded:
            self._results.setdefault((name, canonical(arguments)), deque()).append(result)
        # One list for the thread and its subagents: the case fails naming every miss.
        self.misses: list[str] = [] if misses is None else misses
        self._subagents = list(subagents)
        self._subagent_table: ReplayTable | None = None
        self.served = 0
        # What each call was given, by its result message id: a retried attempt of the
        # same call gets the same answer instead of consuming the next one.
        self._given: dict[str, ToolResult] = {}
        # One thread's calls come in order, but a worker may run calls of different
        # threads at once; the lock keeps a table sound if two attempts overlap.
        self._lock = threading.Lock()

    @property
    def subagents(self) -> ReplayTable:
        """The table the thread's subagents (at any depth) are served from."""
        with self._lock:
            if self._subagent_table is None:
                self._subagent_table = ReplayTable(self._subagents, misses=self.misses)
            return self._subagent_table

    def take(
        self, name: str, arguments_json: str | None, call_key: str = "", where: str = ""
    ) -> ToolResult:
        """The next recorded result of this call (the one already given to `call_key`, for
        a retry), or an error result naming it (and `where` it was made)."""
        with self._lock:
            if call_key in self._given:
                return self._given[call_key]
        result = self._take(name, arguments_json, where)
        if call_key:
            with self._lock:
                self._given[call_key] = result
        return result

    def _take(self, name: str, arguments_json: str | None, where: str) -> ToolResult:
        try:
            arguments = json.loads(arguments_json or "{}")
        except ValueError:
            arguments = arguments_json
        with self._lock:
            queued = self._results.get((name, canonical(arguments)))
            if queued:
                self.served += 1
                return queued.popleft()
            text = call_text(name, arguments) + where
            self.misses.append(text)
        return ToolResult(
            status="error",
            error=f"eval replay: no recorded result for the call {text}",
            error_code=NO_RECORDING,
        )


class ToolReplays:
    """The worker's replay tables, by thread id; threads without one run their tools.

    `parents` gives a thread's parent thread id (its store row's): a thread with no table
    of its own whose ancestor has one is that eval thread's subagent, served from the
    ancestor's `subagents` table. Without it, subagents would run their tools live.
    """

    def __init__(self, parents: Callable[[str], str | None] | None = None) -> None:
        self._tables: dict[str, ReplayTable] = {}
        self.parents = parents
        # A thread's eval ancestor (None: it has none), found once: a row's parent never
        # changes, and an eval thread is registered before it starts any subagent.
        self._roots: dict[str, str | None] = {}

    def register(self, thread_id: str, table: ReplayTable) -> None:
        """Serve `thread_id`'s tool calls, and its subagents', from `table` from now on."""
        self._tables[thread_id] = table

    def forget(self, thread_id: str) -> None:
        """Drop a finished thread's table (its subagents then run live too)."""
        self._tables.pop(thread_id, None)
        for thread, root in list(self._roots.items()):
            if root == thread_id:
                del self._roots[thread]

    def serve(
        self, thread_id: str, name: str, arguments_json: str | None, call_key: str
    ) -> ToolResult | None:
        """The recorded result for this call, or None when the thread's tools run live."""
        table = self._tables.get(thread_id)
        if table is not None:
            return table.take(name, arguments_json, call_key)
        root = self._root_of(thread_id)
        table = self._tables.get(root) if root is not None else None
        if table is None:
            return None
        return table.subagents.take(name, arguments_json, call_key, f" in subagent {thread_id}")

    def _root_of(self, thread_id: str) -> str | None:
        """The registered eval thread `thread_id` descends from, if any."""
        if not self._tables or self.parents is None:
            return None  # no eval is running: nothing to look up
        if thread_id in self._roots:
            return self._roots[thread_id]
        seen = {thread_id}
        parent = self.parents(thread_id)
        while parent is not None and parent not in self._tables and parent not in seen:
            seen.add(parent)
            parent = self._roots.get(parent) if parent in self._roots else self.parents(parent)
        root = parent if parent in self._tables else None
        self._roots[thread_id] = root
        return root
