"""OpenTelemetry spans for the work activities do: model calls, tool calls, code and hooks.

A `Spans` is built by the worker from config (workers/telemetry.py) and injected where
spans are made; the default records nothing and costs next to nothing. Content (prompts,
replies, arguments, results) is recorded only when the config asks for it, and the
thread's secret env values are redacted from it even then (docs/observability.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from weft.contract.thread_env import EnvEntry, redact, secret_values

# Content attributes are cut to this many characters (after redaction).
MAX_CONTENT_CHARS = 4000
REDACTED = "[redacted secret]"


def without_secrets(text: str, env: Mapping[str, EnvEntry]) -> str:
    """`text` with the secret values of `env` replaced: what an outside program said (an
    MCP server's error, its stderr) may quote a command line or URL with them filled in."""
    return redact(text, secret_values(env), REDACTED)


# The secret values a thread's spans must never show: from its row and its definitions.
SecretsOf = Callable[[str], Iterable[str]]


def _no_secrets(_thread_id: str) -> Iterable[str]:
    return ()


class Spans:
    """Where activities start their spans; records nothing unless given a tracer."""

    def __init__(
        self,
        tracer: trace.Tracer | None = None,
        *,
        content: bool = False,
        secrets_of: SecretsOf = _no_secrets,
    ) -> None:
        self._tracer = tracer
        self.content = content and tracer is not None
        self._secrets_of = secrets_of

    @property
    def enabled(self) -> bool:
        return self._tracer is not None

    @contextmanager
    def span(
        self,
        name: str,
        attributes: Mapping[str, AttributeValue],
        *,
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> Iterator[Span]:
        """A span around the block, current inside it; an exception marks it failed by type
        only (an error's message may quote content)."""
        if self._tracer is None:
            yield INVALID_SPAN
            return
        with self._tracer.start_as_current_span(
            name,
            kind=kind,
            attributes=dict(attributes),
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException as err:
                failed(span, type(err).__name__)
                raise

    def secrets(self, thread_id: str | None, env: Mapping[str, EnvEntry] | None = None) -> set[str]:
        """The values to redact from `thread_id`'s content (empty when content is off)."""
        if not self.content:
            return set()
        found = {str(v) for v in self._secrets_of(thread_id)} if thread_id else set()
        found.update(secret_values(env or {}))
        return {s for s in found if s}

    def record_content(self, span: Span, key: str, value: Any, secrets: Iterable[str]) -> None:
        """Set `key` to `value` as JSON text, secrets redacted, when content is on."""
        if not self.content:
            return
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        span.set_attribute(key, redact(text, secrets, REDACTED)[:MAX_CONTENT_CHARS])


def failed(span: Span, error_type: str) -> None:
    """Mark `span` failed with the error's type (`error.type`, as the conventions name it)."""
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, error_type))
