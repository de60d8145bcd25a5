"""One worker's `/metrics`: the Temporal SDK runtime's metrics and weft's, on one port."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from temporalio.client import Client

from weft.contract.events import Event
from weft.store import Store
from weft.workers.config import MetricsConfig
from weft.workers.metrics.event_counters import EventCounters
from weft.workers.metrics.http_server import MetricsServer
from weft.workers.metrics.sdk_metrics import SdkMetrics
from weft.workers.metrics.thread_gauges import ThreadGauges

logger = logging.getLogger(__name__)


class WorkerMetrics:
    """Built by `AgentWorker` when `telemetry.metrics.port` is set: `connect` the client
    the worker polls with, `watch` its store, `start` serving, `close`.

    weft's metrics live in a registry of their own (not prometheus_client's global one),
    so two workers in one process keep separate counts. Every weft name starts with
    `weft_` and every SDK name with `temporal_`, so the joined text has each family once.
    """

    def __init__(self, config: MetricsConfig) -> None:
        self._config = config
        self.registry = CollectorRegistry(auto_describe=True)
        self.counters = EventCounters(self.registry)
        self._sdk = SdkMetrics()
        self._gauges: ThreadGauges | None = None
        self._server = MetricsServer(self._render)

    @property
    def url(self) -> str:
        """Where `/metrics` is served, once started (the bound port when 0 was asked)."""
        return self._server.url

    async def connect(self, client: Client) -> Client:
        """`client` on the runtime whose SDK metrics are served."""
        return await self._sdk.connect(client)

    def watch(self, store: Store, client: Client, task_queue: str) -> None:
        """Count the events `store` commits; read thread gauges from `client`'s visibility
        for `task_queue` and from `store`."""
        store.database.events_committed = self._observe
        self._gauges = ThreadGauges(client, task_queue, store)
        self.registry.register(self._gauges)

    async def start(self) -> str:
        url = await self._server.start(self._config.host, self._config.port or 0)
        logger.info("weft metrics at %s", url)
        return url

    async def close(self) -> None:
        await self._server.close()
        await self._sdk.close()

    def _observe(self, events: Sequence[Event]) -> None:
        # Called after a store commit: a bug here must not fail the write that committed.
        try:
            self.counters.observe(events)
        except Exception:
            logger.exception("could not count stored events for metrics")

    async def _render(self) -> bytes:
        if self._gauges is not None:
            await self._gauges.refresh()
        sdk = await self._sdk.text()
        ours = generate_latest(_WithoutCreated(self.registry))
        if sdk and not sdk.endswith("\n"):
            sdk += "\n"
        return ours + sdk.encode("utf-8")


class _WithoutCreated(Collector):
    """The registry's metrics less the `_created` timestamps prometheus_client adds to
    each counter series: a second series per label set that no weft dashboard reads
    (Prometheus itself only uses them from OpenMetrics)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        for metric in self._registry.collect():
            metric.samples = [s for s in metric.samples if not s.name.endswith("_created")]
            yield metric
