"""`weft.Worker`: runs agent threads from definitions, a store and model providers."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from types import TracebackType

from opentelemetry.sdk.trace import TracerProvider
from temporalio.client import Client

from weft._config import ProviderSpec, deployment_config, worker_config
from weft.definitions import Definitions, load_directory
from weft.store import Store
from weft.workers.agent_worker import AgentWorker
from weft.workers.config import MetricsConfig, WeftConfig


class Worker:
    """A weft worker: runs the `AgentThread` workflow and its activities for `definitions`.

    ```python
    async with weft.Worker(client, definitions) as worker:   # polls until the block ends
        ...
    await weft.Worker(client, "path/to/definitions").run()  # or: run until cancelled
    ```

    `definitions` is a `weft.Definitions` or a definitions directory (one file per
    definition, as `weft worker --definitions DIR` reads). Defaults a user must know:

    - `store`: a SQLAlchemy URL, default `sqlite:///weft.db` (relative to `root`, the
      current directory by default); `postgresql://...` for several workers.
    - `providers`: the model providers by name, e.g. `{"openai": weft.ProviderConfig(
      kind="openai", base_url=..., api_key=...)}` or the same as a dict of the config file's
      keys. `define_model(provider=...)` names a KEY of this mapping, not a provider kind.
      Without `providers` (and without `config`): `openai` when `$OPENAI_BASE_URL` or
      `$OPENAI_API_KEY` is set (base URL default https://api.openai.com/v1), `anthropic`
      likewise with `$ANTHROPIC_*`.
    - `config`: a `weft.WeftConfig` or the path of a config file (temporal-dev.yml, read
      with its environment overrides, as the CLI does); the arguments above override it.
    - `task_queue`: default `agents`, which `Thread.start` uses too.
    - encryption switches on by itself when keys are found: `keys`, else `$WEFT_CODEC_KEYS`,
      else the file `<root>/.weft/codec.keys` (`weft dev` writes one there on first use).
      Env is then encrypted in Temporal history and sealed in the store.
    - search attributes: before polling, the worker checks weft's five Keyword search
      attributes on the client's namespace and registers missing ones (a dev server allows
      it); when it cannot (`register_search_attributes=False`, Temporal Cloud, a locked
      cluster) it raises `weft.SearchAttributesMissing` listing the exact
      `temporal operator search-attribute create` commands, and never polls.
    - model calls stream (`model.delta` events); a model with
      `capabilities={"supportsStreaming": False}` is called without streaming.
    - `graceful_shutdown_seconds`: how long leaving the `async with` lets running
      activities finish; default the config's `worker.gracefulShutdownSeconds` (10 s).
    - `options.maxTotalSteps` (a thread's start option) caps a session at 64 steps, where a
      model call with the tool calls it asked for is one step.
    - `deployment` / `build_id`: join a Temporal worker deployment (Worker Versioning;
      docs/deploys.md) as version `build_id`, default `weft-<version>-<definitions digest>`;
      default the config's `deployment` section, else an unversioned worker.
      `set_current=True` makes this worker's version the current one once it polls.
    - `metrics_port`: serve Prometheus metrics (the Temporal SDK's and weft's) at
      `metrics_url`; 0 picks a free port; default the config's `telemetry.metrics.port`
      (off). docs/observability.md lists the metrics.
    """

    def __init__(
        self,
        client: Client,
        definitions: Definitions | str | os.PathLike[str],
        *,
        store: str | None = None,
        providers: Mapping[str, ProviderSpec] | None = None,
        config: WeftConfig | str | os.PathLike[str] | None = None,
        task_queue: str | None = None,
        keys: str | os.PathLike[str] | None = None,
        root: str | os.PathLike[str] | None = None,
        register_search_attributes: bool = True,
        max_cached_workflows: int = 1000,
        graceful_shutdown_seconds: float | None = None,
        tracer_provider: TracerProvider | None = None,
        metrics_port: int | None = None,
        deployment: str | None = None,
        build_id: str | None = None,
        set_current: bool | None = None,
    ) -> None:
        self._tracer_provider = tracer_provider
        self.config = worker_config(
            config=config,
            store=store,
            providers=providers,
            task_queue=task_queue,
            keys=keys,
            root=root,
        )
        self.client = client
        self._definitions = definitions
        self._max_cached = max_cached_workflows
        self._grace = graceful_shutdown_seconds
        self._register = register_search_attributes
        self._worker: AgentWorker | None = None
        if metrics_port is not None:
            self.config.telemetry.metrics.port = MetricsConfig(port=metrics_port).port
        self.config.deployment = deployment_config(
            self.config.deployment, name=deployment, build_id=build_id, set_current=set_current
        )

    @property
    def metrics_url(self) -> str | None:
        """Where the running worker serves Prometheus metrics, or None when it does not."""
        if self._worker is None or self._worker.metrics is None:
            return None
        return self._worker.metrics.url

    @property
    def build_id(self) -> str | None:
        """The running worker's build id, or None when it is unversioned (or not running)."""
        if self._worker is None or self._worker.deployment_version is None:
            return None
        return self._worker.deployment_version.build_id

    @property
    def task_queue(self) -> str:
        """The task queue the worker polls (threads must be started on it)."""
        return self.config.temporal.task_queue

    @property
    def store(self) -> Store:
        """The open store (messages, events, values); for `Thread(..., store=worker.store)`."""
        if self._worker is None or self._worker.store is None:
            raise RuntimeError("the worker is not running: use `async with weft.Worker(...)`")
        return self._worker.store

    async def __aenter__(self) -> Worker:
        if self._worker is not None:
            raise RuntimeError("this weft.Worker is already running")
        definitions = self._definitions
        if not isinstance(definitions, Definitions):
            definitions = await asyncio.to_thread(
                load_directory, self.config.path(str(definitions))
            )
        worker = AgentWorker(
            self.client,
            self.config,
            definitions=definitions,
            register_search_attributes=self._register,
            max_cached_workflows=self._max_cached,
            graceful_shutdown_seconds=self._grace,
            tracer_provider=self._tracer_provider,
        )
        await worker.__aenter__()
        self._worker = worker
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            await worker.__aexit__(exc_type, exc, tb)

    async def wait(self) -> None:
        """Block until the worker stops polling (it raises if polling failed)."""
        if self._worker is None:
            raise RuntimeError("the worker is not running: use `async with weft.Worker(...)`")
        await self._worker.wait()

    async def run(self) -> None:
        """Start, poll until cancelled (or polling fails), then drain and close."""
        async with self:
            await self.wait()
