"""A provider wrapped in a span per completion, with the GenAI semantic conventions.

The worker wraps each provider it builds (workers/providers.py) when tracing is on, so the
model activity needs no tracing code of its own: the `chat {model}` span is a child of the
activity's span and the model events written while it streams carry its ids.
"""

from __future__ import annotations

from opentelemetry.trace import SpanKind
from opentelemetry.util.types import AttributeValue
from temporalio import activity

from weft.activities.providers.base import ChatProvider, ChatReply, ChatRequest, DeltaCallback
from weft.activities.spans import Spans


class TracedProvider:
    """`inner` with one client span per `complete`: model, provider, tokens, finish reason."""

    def __init__(self, inner: ChatProvider, *, provider_name: str, system: str, spans: Spans):
        self._inner = inner
        self._provider_name = provider_name
        self._system = system
        self._spans = spans

    async def complete(
        self, request: ChatRequest, *, on_delta: DeltaCallback | None = None
    ) -> ChatReply:
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self._system,
            "gen_ai.system": self._system,
            "gen_ai.request.model": request.model,
            "weft.provider": self._provider_name,
        }
        if request.max_output_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = request.max_output_tokens
        with self._spans.span(f"chat {request.model}", attributes, kind=SpanKind.CLIENT) as span:
            secrets = self._spans.secrets(_thread_id())
            self._spans.record_content(span, "gen_ai.input.messages", request.messages, secrets)
            reply = await self._inner.complete(request, on_delta=on_delta)
            span.set_attributes(
                {
                    "gen_ai.response.model": reply.model,
                    "gen_ai.usage.input_tokens": reply.usage.input_tokens,
                    "gen_ai.usage.output_tokens": reply.usage.output_tokens,
                    "gen_ai.response.finish_reasons": [reply.finish_reason or "unknown"],
                }
            )
            output = {
                "content": reply.content,
                "tool_calls": [c.model_dump() for c in reply.tool_calls],
            }
            self._spans.record_content(span, "gen_ai.output.messages", output, secrets)
            return reply


def _thread_id() -> str | None:
    return activity.info().workflow_id if activity.in_activity() else None
