"""The composition root of a weft worker: store, definitions, providers, Temporal worker."""

from __future__ import annotations

import asyncio
import os
from contextlib import AsyncExitStack
from types import TracebackType

from mcp.client.stdio import get_default_environment
from opentelemetry.sdk.trace import TracerProvider
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.worker import Worker

from weft.activities.background import stop
from weft.activities.code_run import CodeRunActivities
from weft.activities.compaction import CompactionActivities
from weft.activities.correlation import stamp_event
from weft.activities.effect_run import EffectActivities
from weft.activities.env import ToolEnv, ToolSource, ToolSources
from weft.activities.files_copy import FileCopyActivities
from weft.activities.hooks import HookRegistry
from weft.activities.job_admit import JobAdmitActivities
from weft.activities.job_records import JobRecordActivities
from weft.activities.mcp.catalog_activity import CatalogActivities
from weft.activities.mcp.catalog_store import CatalogStore
from weft.activities.mcp.pool import McpSessionPool
from weft.activities.model_call import ModelActivities
from weft.activities.rate_limits import RateLimiter
from weft.activities.retention import RetentionActivities
from weft.activities.sandbox import SandboxPool
from weft.activities.snapshots import SnapshotCache
from weft.activities.spans import Spans
from weft.activities.task_attempts import TaskAttemptActivities
from weft.activities.task_commands import TaskCommands
from weft.activities.task_records import TaskRecordActivities
from weft.activities.task_tools import TaskTools
from weft.activities.thread_records import ThreadRecordActivities
from weft.activities.tool_call import ToolActivities
from weft.activities.tool_replay import ToolReplays
from weft.activities.tool_sources import FunctionTools, McpTools, ReplayedTools
from weft.activities.variables_request import VariableRequestActivities
from weft.definitions import Definitions, load_directory
from weft.store import Store
from weft.store.protocols import HasMessages
from weft.store.thread_cache_budget import ThreadCacheBudget
from weft.transport.connection import with_keyring
from weft.workers.config import WeftConfig
from weft.workers.deployment import (
    deployment_options,
    deployment_version,
    set_current_when_polling,
)
from weft.workers.eager_gate import eager_gate
from weft.workers.gc_policy import freeze_startup_heap
from weft.workers.metrics import WorkerMetrics
from weft.workers.providers import build_providers
from weft.workers.recovery import (
    RESULTS_SWEEP_SECONDS,
    RecoveryInterceptor,
    recovery_options,
)
from weft.workers.scripted_model import ScriptedModelServer
from weft.workers.search_attributes import check_search_attributes
from weft.workers.secrets import load_keyring
from weft.workers.telemetry import activity_spans, has_tracing, tracing_interceptor
from weft.workers.telemetry import tracer_provider as tracer_provider_for
from weft.workers.workflow_runner import EvictionNotices, workflow_runner
from weft.workflows.agent_thread import AgentThreadWorkflow
from weft.workflows.jobs.job_run import JobRunWorkflow
from weft.workflows.retention import RetentionSweepWorkflow
from weft.workflows.scheduled_delivery import ScheduledDeliveryWorkflow
from weft.workflows.scheduled_thread import scheduled_thread_workflow
from weft.workflows.tasks.task_run import TaskRunWorkflow

# What a stdio MCP server inherits beyond the SDK's safe base (HOME, LOGNAME, PATH, SHELL,
# TERM, USER): the locale and the temp folder. Never the whole environment: it holds the
# providers' keys.
_MCP_INHERITED = ("LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ")


def mcp_server_environment() -> dict[str, str]:
    """The environment a stdio MCP server starts from (its definition's `env` on top)."""
    inherited = get_default_environment()
    inherited.update({k: os.environ[k] for k in _MCP_INHERITED if k in os.environ})
    return inherited


def tool_env(
    store: HasMessages,
    definitions: Definitions,
    mcp: McpSessionPool | None,
    *,
    spans: Spans,
    replays: ToolReplays | None = None,
    tasks: ToolSource | None = None,
) -> ToolEnv:
    """The worker's Env: an eval's replayed results first (they stand for the live tool),
    then MCP calls, then the task tools, then function tools; a name none claims is an
    `unknown_tool` error."""
    sources: list[ToolSource] = [ReplayedTools(replays)] if replays is not None else []
    sources += [McpTools(mcp, spans=spans), *([tasks] if tasks else [])]
    sources += [FunctionTools(store, definitions, spans=spans)]
    return ToolEnv(ToolSources(sources))


def load_definitions(config: WeftConfig) -> Definitions:
    """The definitions of the configured directory, validated against the providers."""
    definitions = load_directory(config.path(config.definitions))
    definitions.validate(providers=config.providers.keys())
    return definitions


class AgentWorker:
    """Runs `AgentThread` and its activities on one task queue until closed.

    `async with AgentWorker(client, config) as worker:` builds everything, starts polling,
    and on exit drains in-flight activities and closes the store and HTTP clients.
    `definitions`, when given, replace the configured definitions directory.
    Before polling it checks weft's search attributes on the namespace, registering missing
    ones unless `register_search_attributes` is False, and otherwise raises
    `SearchAttributesMissing` listing the commands (workers/search_attributes.py).
    Its recovery timeouts come from `config.worker` (`graceful_shutdown_seconds`, when
    given, wins over the config).
    """

    def __init__(
        self,
        client: Client,
        config: WeftConfig,
        *,
        definitions: Definitions | None = None,
        task_queue: str | None = None,
        scripted: ScriptedModelServer | None = None,
        max_cached_workflows: int = 1000,
        graceful_shutdown_seconds: float | None = None,
        register_search_attributes: bool = True,
        tracer_provider: TracerProvider | None = None,
        tool_replays: ToolReplays | None = None,
    ) -> None:
        self._client = client
        # Tracing: the given provider, else one from config.telemetry.tracing (None: off).
        self._owns_provider = tracer_provider is None
        self._tracer_provider = tracer_provider or tracer_provider_for(config.telemetry.tracing)
        self._config = config
        self._given_definitions = definitions
        self.task_queue = task_queue or config.temporal.task_queue
        self._scripted = scripted
        self._max_cached = max_cached_workflows
        self._recovery = config.worker
        if graceful_shutdown_seconds is not None:
            self._recovery = config.worker.model_copy(
                update={"graceful_shutdown_seconds": graceful_shutdown_seconds}
            )
        self._register_attributes = register_search_attributes
        self._tool_replays = tool_replays  # an eval's recorded tool results (weft eval)
        self._stack = AsyncExitStack()
        self._run_task: asyncio.Task[None] | None = None
        self.worker: Worker | None = None
        self.store: Store | None = None
        self.definitions: Definitions | None = None
        # The /metrics endpoint, when `telemetry.metrics.port` is set (its `url` once up).
        self.metrics: WorkerMetrics | None = None
        # The worker deployment version it joins (`config.deployment`); None: unversioned.
        self.deployment_version: WorkerDeploymentVersion | None = None

    async def __aenter__(self) -> AgentWorker:
        try:
            await self._build()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def _build(self) -> None:
        if self._given_definitions is not None:
            self._given_definitions.validate(providers=self._config.providers.keys())
            self.definitions = self._given_definitions
        else:
            self.definitions = load_definitions(self._config)
        version = self.deployment_version = deployment_version(
            self._config.deployment, self.definitions
        )
        # Before polling: a missing attribute would fail every workflow task, forever.
        await check_search_attributes(
            self._client, self._client.namespace, register=self._register_attributes
        )
        # With keys configured, env is encrypted in Temporal payloads and in the store,
        # whatever data converter the given client was built with.
        keyring = load_keyring(self._config)
        client = self._client
        if self._config.telemetry.metrics.port is not None:
            self.metrics = WorkerMetrics(self._config.telemetry.metrics)
            # The SDK records a worker's metrics in the runtime of the client it polls with.
            client = await self.metrics.connect(client)
        if keyring is not None:
            client = with_keyring(client, keyring, encrypt=self._config.codec.encrypt)
        # Its per-thread caches keep the threads its workflow cache keeps, and forget those
        # the cache drops (store/thread_cache_budget.py).
        caches = ThreadCacheBudget(self._max_cached)
        store = self.store = await asyncio.to_thread(
            Store.open, self._config.store_url(), keyring=keyring, caches=caches
        )
        self._stack.callback(store.close)
        store.database.stamp_event = stamp_event  # run, attempt, trace and span ids
        if self.metrics is not None:
            self.metrics.watch(store, client, self.task_queue)
            await self.metrics.start()
            self._stack.push_async_callback(self.metrics.close)
        spans = activity_spans(
            self._tracer_provider,
            self._config.telemetry.tracing,
            store=store,
            definitions=self.definitions,
        )
        providers = await build_providers(
            self._config,
            self._stack,
            scripted=self._scripted,
            spans=spans,
            limiter=RateLimiter(store.rate_limits),
        )
        # Sandbox worker processes start lazily, on the first runCode of this worker.
        pool = SandboxPool()
        self._stack.callback(pool.close)
        # MCP sessions open lazily, on the first listing or call of a server and env;
        # closed (their stdio processes ended) after the worker stops.
        mcp = McpSessionPool(root=self.definitions.root, base_env=mcp_server_environment())
        self._stack.push_async_callback(mcp.aclose)
        snapshots = SnapshotCache(store)
        catalogs = CatalogStore(store)
        hooks = HookRegistry(store, self.definitions.hooks, spans=spans)
        records = ThreadRecordActivities(store, self.definitions, snapshots, hooks=hooks)
        models = ModelActivities(
            store, providers, snapshots, served=records.served, hooks=hooks, catalogs=catalogs
        )
        compaction = CompactionActivities(store, providers, snapshots, catalogs=catalogs)
        tools = ToolActivities(
            store,
            self.definitions,
            snapshots,
            env=tool_env(
                store,
                self.definitions,
                mcp,
                spans=spans,
                replays=self._tool_replays,
                tasks=TaskTools(TaskCommands(client, store, task_queue=self.task_queue)),
            ),
            sandbox=pool,
            hooks=hooks,
            spans=spans,
        )
        tool_catalogs = CatalogActivities(store, snapshots, mcp, catalogs=catalogs)
        code = CodeRunActivities(pool, spans=spans)
        effects = EffectActivities(store, self.definitions, snapshots, sandbox=pool)
        copies = FileCopyActivities(store)
        variable_requests = VariableRequestActivities(store)
        task_records = TaskRecordActivities(store)
        task_attempts = TaskAttemptActivities(store, client)
        job_records = JobRecordActivities(store)
        job_admit = JobAdmitActivities(store)
        retention = RetentionActivities(store, client, self.definitions.agents)
        gate = eager_gate(self._recovery)
        # Read by benchmarks too: what its book of finished results holds (bench_idle.py).
        self.recovering = RecoveryInterceptor(
            client,
            heartbeat_every_seconds=self._recovery.heartbeat_throttle_seconds,
            start_delays=gate.delays if gate else None,
        )
        self._stack.push_async_callback(
            stop,
            asyncio.create_task(self.recovering.forget_expired_every(RESULTS_SWEEP_SECONDS)),
        )
        options = recovery_options(self._recovery)
        if gate is not None:
            options["tuner"] = gate.tuner
            if gate.lag is not None:  # the loop is watched only when a limit reads it
                self._stack.push_async_callback(stop, asyncio.create_task(gate.lag.run()))
        self.worker = Worker(
            client,
            task_queue=self.task_queue,
            workflows=[
                AgentThreadWorkflow,
                ScheduledDeliveryWorkflow,
                scheduled_thread_workflow(versioned=version is not None),
                TaskRunWorkflow,
                JobRunWorkflow,
                RetentionSweepWorkflow,
            ],
            activities=[
                records.init_thread,
                records.refresh_definitions,
                records.flush,
                models.call_model,
                compaction.compact,
                tools.call_tool,
                tool_catalogs.resolve_catalog,
                effects.run_effect,
                code.run,
                copies.copy_files,
                variable_requests.request_variables,
                task_records.record,
                task_records.link,
                task_records.lose,
                task_records.dependencies,
                task_records.dependents,
                task_attempts.attempt,
                job_records.record,
                job_records.load,
                job_records.claim,
                job_admit.admit,
                retention.find,
                retention.delete,
            ],
            workflow_runner=EvictionNotices(workflow_runner(client.data_converter), caches.evicted),
            max_cached_workflows=self._max_cached,
            interceptors=[self.recovering, *self._tracing(client)],
            deployment_config=deployment_options(version) if version else None,
            **options,
        )
        if self._config.worker.gc_freeze:
            freeze_startup_heap()
        self._run_task = asyncio.create_task(self.worker.run())
        if version is not None and self._config.deployment.set_current_on_start:
            await set_current_when_polling(client, version)

    def _tracing(self, client: Client) -> list[TracingInterceptor]:
        """Temporal's tracing interceptor, unless off or the client brings its own (a
        client's interceptors reach its workers: two would duplicate every span)."""
        if self._tracer_provider is None or has_tracing(client):
            return []
        return [tracing_interceptor(self._tracer_provider)]

    async def wait(self) -> None:
        """Block until the worker stops (it fails loudly if polling fails)."""
        if self._run_task is not None:
            # Shielded: a caller that stops waiting must not cancel the worker itself.
            await asyncio.shield(self._run_task)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self.worker is not None and self._run_task is not None:
                if not self._run_task.done():
                    await self.worker.shutdown()
                await asyncio.gather(self._run_task, return_exceptions=True)
                await self.recovering.stop_abandoned()
        finally:
            await self._stack.aclose()
            if self._tracer_provider is not None:
                # Spans still batched are exported before the worker is gone.
                provider = self._tracer_provider
                close = provider.shutdown if self._owns_provider else provider.force_flush
                await asyncio.to_thread(close)
