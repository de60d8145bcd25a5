"""A server span per HTTP request, continuing the caller's W3C `traceparent`.

With it, a `POST /threads` and the thread it starts are one trace: the span is current
while the route runs, and the Temporal client's tracing interceptor carries it into the
workflow's start headers.
"""

from __future__ import annotations

from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_PROPAGATOR = TraceContextTextMapPropagator()


class RequestSpans:
    """ASGI middleware: one `SERVER` span per HTTP request, child of its `traceparent`."""

    def __init__(self, app: ASGIApp, tracer: Tracer) -> None:
        self._app = app
        self._tracer = tracer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        method = scope["method"]
        attributes = {"http.request.method": method, "url.path": scope["path"]}
        with self._tracer.start_as_current_span(
            method,
            context=_PROPAGATOR.extract(carrier),
            kind=SpanKind.SERVER,
            attributes=attributes,
        ) as span:

            async def sending(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status = int(message["status"])
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_status(Status(StatusCode.ERROR))
                await send(message)

            try:
                await self._app(scope, receive, sending)
            finally:
                # The route template (not the path with its ids) names the span.
                route = getattr(scope.get("route"), "path", None)
                if route:
                    span.update_name(f"{method} {route}")
                    span.set_attribute("http.route", route)
