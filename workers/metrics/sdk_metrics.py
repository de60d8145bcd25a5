"""The Temporal SDK runtime's own metrics, exported by its Prometheus exporter on loopback.

The worker's `/metrics` appends them to weft's at scrape time. The exporter is the SDK's
own (Rust core): its names, units, histogram buckets and label sets are exactly what
Temporal's dashboards expect, with nothing for weft to convert or keep in step with SDK
releases. (A `MetricBuffer` would instead need a task draining it before it fills and a
re-implementation of every histogram.)
"""

from __future__ import annotations

import dataclasses
import logging
import socket

import httpx
from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.service import ServiceClient

logger = logging.getLogger(__name__)

# Another process may take the free port between choosing it and the exporter binding it.
_BIND_ATTEMPTS = 5


class SdkMetrics:
    """A Temporal `Runtime` whose metrics its exporter serves on a free loopback port."""

    def __init__(self) -> None:
        self.runtime, self.url = _runtime_on_free_port()
        # Loopback, one request per scrape: no pool worth keeping, no proxy from the env.
        self._http = httpx.AsyncClient(timeout=2.0, trust_env=False)

    async def connect(self, client: Client) -> Client:
        """`client` connected again on this runtime (the SDK records a worker's metrics in
        the runtime of the client it polls with); namespace, converter and interceptors
        are kept."""
        config = dataclasses.replace(client.service_client.config, runtime=self.runtime)
        client_config = client.config()
        client_config["service_client"] = await ServiceClient.connect(config)
        return Client(**client_config)

    async def text(self) -> str:
        """The exporter's text exposition; empty when it cannot be read, so weft's own
        metrics are still served."""
        try:
            response = await self._http.get(self.url)
            response.raise_for_status()
        except httpx.HTTPError as err:
            logger.warning("could not read the Temporal SDK metrics at %s: %s", self.url, err)
            return ""
        return response.text

    async def close(self) -> None:
        await self._http.aclose()


def _runtime_on_free_port() -> tuple[Runtime, str]:
    for attempt in range(1, _BIND_ATTEMPTS + 1):
        # The exporter cannot report the port it bound, so pick a free one first.
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        address = f"127.0.0.1:{port}"
        try:
            metrics = PrometheusConfig(bind_address=address)
            return Runtime(telemetry=TelemetryConfig(metrics=metrics)), f"http://{address}/metrics"
        except ValueError:  # "Address already in use": taken since it was chosen
            if attempt == _BIND_ATTEMPTS:
                raise
    raise AssertionError("unreachable")
