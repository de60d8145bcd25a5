"""Where an in-process weft worker spends an activity's time, measured from outside weft.

It hooks only stable public surfaces, so it keeps working while weft's internals change:
- a Temporal activity interceptor (on a copy of the client) times each activity in the
  worker and names the activity every SQL statement and provider call belongs to (a
  context variable, which `asyncio.to_thread` carries into the store's threads);
- SQLAlchemy's `before/after_cursor_execute` and `commit` events on the Engine class
  count and time every statement (BEGIN IMMEDIATE and its lock wait included) and count
  commits; the commit itself is timed by wrapping `DefaultDialect.do_commit`;
- the provider adapters' `complete` is wrapped to time provider I/O.
What is left of an activity's time is context assembly, serialization and the rest.
Work outside any activity (a background thread, say) lands in the `OUTSIDE` bucket.
"""

from __future__ import annotations

import contextvars
import functools
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.engine.default import DefaultDialect
from temporalio import activity
from temporalio import client as temporal_client
from temporalio import worker as temporal_worker

from weft.activities.providers import AnthropicMessagesProvider, OpenAIChatProvider

OUTSIDE = "(outside any activity)"
_current = contextvars.ContextVar("bench_activity", default=OUTSIDE)
_STARTS = "bench_statement_starts"


@dataclass
class Bucket:
    """What one activity type (or OUTSIDE) spent, summed over a run."""

    activities: int = 0
    activity_seconds: float = 0.0
    statements: int = 0
    statement_seconds: float = 0.0
    commits: int = 0
    commit_seconds: float = 0.0
    provider_calls: int = 0
    provider_seconds: float = 0.0

    def rest_seconds(self) -> float:
        """Activity time that is neither SQL nor provider I/O: context assembly,
        serialization, hooks, validation, event building, the event loop..."""
        measured = self.statement_seconds + self.commit_seconds + self.provider_seconds
        return self.activity_seconds - measured


class WorkerProbe:
    """Install once per process, `reset()` before a measured run, `snapshot()` after."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buckets: dict[str, Bucket] = defaultdict(Bucket)
        self._restore: list[Callable[[], None]] = []

    def client(self, client: temporal_client.Client) -> temporal_client.Client:
        """A copy of `client` whose workers time their activities into this probe."""
        config = client.config()
        config["interceptors"] = [*config["interceptors"], _ActivityTimer(self)]
        return temporal_client.Client(**config)

    def install(self) -> None:
        """Listen to every engine and wrap the commit and the provider adapters."""
        listeners: list[tuple[str, Callable[..., Any]]] = [
            ("before_cursor_execute", self._before_statement),
            ("after_cursor_execute", self._after_statement),
            ("commit", self._on_commit),
        ]
        for name, listener in listeners:
            event.listen(Engine, name, listener)
            self._restore.append(functools.partial(event.remove, Engine, name, listener))
        self._wrap(DefaultDialect, "do_commit", self._timed_commit)
        for adapter in (OpenAIChatProvider, AnthropicMessagesProvider):
            self._wrap(adapter, "complete", self._timed_complete)

    def uninstall(self) -> None:
        """Undo `install`."""
        while self._restore:
            self._restore.pop()()

    def reset(self) -> None:
        """Forget what was measured so far."""
        with self._lock:
            self._buckets = defaultdict(Bucket)

    def snapshot(self) -> dict[str, Bucket]:
        """What was measured since `reset`, by activity type."""
        with self._lock:
            return {name: Bucket(**vars(b)) for name, b in self._buckets.items()}

    def add(self, bucket: str, **amounts: float) -> None:
        """Add `amounts` (Bucket field names) to `bucket`, from any thread."""
        with self._lock:
            target = self._buckets[bucket]
            for name, amount in amounts.items():
                setattr(target, name, getattr(target, name) + amount)

    def _wrap(self, owner: type, name: str, make: Callable[[Any], Any]) -> None:
        original = owner.__dict__[name]
        setattr(owner, name, make(original))
        self._restore.append(functools.partial(setattr, owner, name, original))

    def _before_statement(self, conn: Any, *_: Any) -> None:
        conn.info.setdefault(_STARTS, []).append(time.perf_counter())

    def _after_statement(self, conn: Any, *_: Any) -> None:
        elapsed = time.perf_counter() - conn.info[_STARTS].pop()
        self.add(_current.get(), statements=1, statement_seconds=elapsed)

    def _on_commit(self, conn: Any) -> None:
        self.add(_current.get(), commits=1)

    def _timed_commit(self, original: Callable[..., Any]) -> Callable[..., Any]:
        probe = self

        @functools.wraps(original)
        def do_commit(dialect: Any, dbapi_connection: Any) -> None:
            began = time.perf_counter()
            try:
                original(dialect, dbapi_connection)
            finally:
                probe.add(_current.get(), commit_seconds=time.perf_counter() - began)

        return do_commit

    def _timed_complete(self, original: Callable[..., Any]) -> Callable[..., Any]:
        probe = self

        @functools.wraps(original)
        async def complete(adapter: Any, *args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return await original(adapter, *args, **kwargs)
            finally:
                elapsed = time.perf_counter() - began
                probe.add(_current.get(), provider_calls=1, provider_seconds=elapsed)

        return complete


class _ActivityTimer(temporal_client.Interceptor, temporal_worker.Interceptor):
    """A client interceptor that is also a worker interceptor, so the worker uses it."""

    def __init__(self, probe: WorkerProbe) -> None:
        self._probe = probe

    def intercept_activity(
        self, next: temporal_worker.ActivityInboundInterceptor
    ) -> temporal_worker.ActivityInboundInterceptor:
        return _TimedActivity(next, self._probe)


class _TimedActivity(temporal_worker.ActivityInboundInterceptor):
    def __init__(self, next: temporal_worker.ActivityInboundInterceptor, probe: WorkerProbe):
        super().__init__(next)
        self._probe = probe

    async def execute_activity(self, input: temporal_worker.ExecuteActivityInput) -> Any:
        name = activity.info().activity_type
        token = _current.set(name)
        began = time.perf_counter()
        try:
            return await super().execute_activity(input)
        finally:
            elapsed = time.perf_counter() - began
            _current.reset(token)
            self._probe.add(name, activities=1, activity_seconds=elapsed)
