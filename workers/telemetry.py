"""OpenTelemetry tracing built from config and handed to what traces (docs/observability.md).

Nothing here is global: `tracer_provider(config)` builds a provider (None when the exporter
is `none`), and callers inject it: into `TracingInterceptor` (Temporal's own, on clients and
workers), into the activities' `Spans`, and into the HTTP API's request spans. Tests pass a
provider of their own with an in-memory exporter.
"""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Tracer
from temporalio import workflow
from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor, TracingWorkflowInboundInterceptor
from temporalio.worker import WorkflowInterceptorClassInput

from weft.activities.spans import Spans
from weft.contract.correlation import TRACING_EXTERN, thread_traceparent
from weft.contract.thread_env import secret_values
from weft.definitions import Definitions
from weft.store import Store
from weft.workers.config import TracingConfig

TRACER_NAME = "weft"


def tracer_provider(config: TracingConfig) -> TracerProvider | None:
    """The provider `config` asks for, exporting in batches; None when tracing is off."""
    if config.exporter == "none":
        return None
    provider = TracerProvider(resource=Resource.create({"service.name": config.service_name}))
    provider.add_span_processor(BatchSpanProcessor(_exporter(config)))
    return provider


def _exporter(config: TracingConfig) -> SpanExporter:
    if config.exporter == "console":
        return ConsoleSpanExporter(service_name=config.service_name)
    # Imported here: the OTLP exporter pulls in protobuf, which `none` never needs.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    if config.endpoint is None:
        raise ValueError("telemetry.tracing.endpoint is required when exporter is 'otlp'")
    return OTLPSpanExporter(endpoint=config.endpoint)


def weft_tracer(provider: TracerProvider) -> Tracer:
    return provider.get_tracer(TRACER_NAME)


def tracing_interceptor(provider: TracerProvider) -> TracingInterceptor:
    """Temporal's interceptor on `provider`, creating workflow spans for every thread."""
    return WeftTracingInterceptor(weft_tracer(provider), always_create_workflow_spans=True)


def has_tracing(client: Client) -> bool:
    """Whether `client` already carries a tracing interceptor (its workers then inherit it)."""
    return any(isinstance(i, TracingInterceptor) for i in client.config()["interceptors"])


def activity_spans(
    provider: TracerProvider | None,
    config: TracingConfig,
    *,
    store: Store,
    definitions: Definitions,
) -> Spans:
    """The activities' spans: nothing without a provider; content only if configured, with
    the thread's and the definitions' secret values redacted."""
    if provider is None:
        return Spans()
    defined = _definition_secrets(definitions)

    def secrets_of(thread_id: str) -> Iterable[str]:
        row = store.threads.get(thread_id)
        return defined | (set(secret_values(row.env)) if row else set())

    return Spans(weft_tracer(provider), content=config.content, secrets_of=secrets_of)


def _definition_secrets(definitions: Definitions) -> set[str]:
    layers = [a.env for a in definitions.agents.values()]
    layers += [p.env for p in definitions.prompts.values()]
    return {s for layer in layers for s in secret_values(layer)}


class WeftTracingInterceptor(TracingInterceptor):
    """Temporal's TracingInterceptor whose workflows root a thread started without a trace
    in one derived from the thread, so its runs' spans still form one trace."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[TracingWorkflowInboundInterceptor]:
        super().workflow_interceptor_class(input)
        input.unsafe_extern_functions[TRACING_EXTERN] = _tracing_on
        return _ThreadTracing


def _tracing_on() -> bool:
    return True


class _ThreadTracing(TracingWorkflowInboundInterceptor):
    def _load_workflow_context_carrier(self) -> dict[str, str] | None:  # type: ignore[override]
        carrier = super()._load_workflow_context_carrier()
        if carrier:
            return carrier  # type: ignore[return-value]
        # Derived from the first run (history), so replays and later runs agree.
        info = workflow.info()
        derived = {"traceparent": thread_traceparent(info.workflow_id, info.first_execution_run_id)}
        self._workflow_context_carrier = derived  # type: ignore[assignment]
        return derived
