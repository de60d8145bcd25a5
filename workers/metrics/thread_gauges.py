"""Gauges read at scrape time: threads by status, and entries waiting in thread queues.

Both are shared facts, not this worker's: `weft_threads` counts Temporal visibility's
open threads of the worker's task queue (every worker of the queue reports the same
value), and `weft_queue_depth` sums the store's thread rows (every worker of the store
reports the same value). They are cached for `max_age` seconds, so a scrape storm costs
the store and Temporal a handful of queries at most.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import get_args

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from temporalio.client import Client

from weft.contract.thread import ThreadStatus
from weft.store import Store
from weft.workers.metrics.labels import BoundedLabel

logger = logging.getLogger(__name__)

THREAD_STATUSES: tuple[str, ...] = get_args(ThreadStatus)


class ThreadGauges(Collector):
    """`weft_threads{status, task_queue}` and `weft_queue_depth{agent}`, refreshed by
    `refresh()` (async: Temporal and the store are asked off the event loop) and read by
    `collect()` (sync, from the cached values)."""

    def __init__(
        self, client: Client, task_queue: str, store: Store, *, max_age: float = 5.0
    ) -> None:
        self._client = client
        self._task_queue = task_queue
        self._store = store
        self._max_age = max_age
        self._agents = BoundedLabel()
        self._lock = asyncio.Lock()
        self._read_at: float | None = None
        self._threads: dict[str, int] = {}
        self._queued: dict[str, int] = {}

    async def refresh(self) -> None:
        """Ask again when the cached values are older than `max_age`; one asker at a time
        (scrapes that arrive meanwhile wait for its answer). A failure keeps the last
        values and is logged."""
        async with self._lock:
            if self._read_at is not None and time.monotonic() - self._read_at < self._max_age:
                return
            try:
                threads, queued = await asyncio.gather(
                    self._count_threads(), asyncio.to_thread(self._store.threads.queued_by_agent)
                )
            except Exception as err:  # the scrape still answers, with what was last known
                logger.warning("could not refresh the thread gauges: %s", err)
                return
            self._threads, self._queued = threads, queued
            self._read_at = time.monotonic()

    def collect(self) -> Iterator[Metric]:
        threads = GaugeMetricFamily(
            "weft_threads",
            "Open threads of this worker's task queue by status (Temporal visibility's "
            "WeftStatus; the same on every worker of the queue)",
            labels=["status", "task_queue"],
        )
        for status in THREAD_STATUSES:
            threads.add_metric([status, self._task_queue], self._threads.get(status, 0))
        yield threads
        queued = GaugeMetricFamily(
            "weft_queue_depth",
            "Entries waiting in the queues of threads not closed, by agent (the store's; "
            "the same on every worker of the store)",
            labels=["agent"],
        )
        by_agent: dict[str, int] = {}
        for agent, depth in self._queued.items():
            label = self._agents(agent)
            by_agent[label] = by_agent.get(label, 0) + depth
        for agent, depth in sorted(by_agent.items()):
            queued.add_metric([agent], depth)
        yield queued

    async def _count_threads(self) -> dict[str, int]:
        # Visibility cannot GROUP BY a custom search attribute: one count per status.
        base = (
            "WorkflowType = 'AgentThread' AND ExecutionStatus = 'Running' "
            f"AND TaskQueue = '{_quote(self._task_queue)}'"
        )
        counts = await asyncio.gather(
            *(
                self._client.count_workflows(f"{base} AND WeftStatus = '{status}'")
                for status in THREAD_STATUSES
            )
        )
        return {status: c.count for status, c in zip(THREAD_STATUSES, counts, strict=True)}


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")
