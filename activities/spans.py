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
        span.set_attribute(key, redacted_json(value, secrets)[:MAX_CONTENT_CHARS])


# How deep JSON text nested in strings is decoded to find a secret (arguments in a
# message, a result's JSON quoted in another tool's arguments, ...).
MAX_NESTING = 4


def redacted_json(value: Any, secrets: Iterable[str]) -> str:
    """`value` as JSON text (a string as itself) with every secret masked.

    Redaction runs on the structured value before it is encoded: each string, and each
    string that is JSON text itself, decoded and masked in turn. Masking encoded text
    instead misses a secret with `"` or `\\` once it is escaped twice or more.
    """
    forms = _spellings([s for s in secrets if s])
    if isinstance(value, str):
        return _text(value, forms, 0)
    if not forms:
        return json.dumps(value, default=str)
    plain = json.loads(json.dumps(value, default=str))  # models, tuples: plain JSON
    return _text(json.dumps(_masked(plain, forms, 0)), forms, MAX_NESTING)


def _masked(node: Any, forms: list[str], depth: int) -> Any:
    if isinstance(node, str):
        return _text(node, forms, depth)
    if isinstance(node, dict):
        return {_text(k, forms, depth): _masked(v, forms, depth) for k, v in node.items()}
    if isinstance(node, list):
        return [_masked(v, forms, depth) for v in node]
    return node


def _text(text: str, forms: list[str], depth: int) -> str:
    """`text` masked; when it is JSON text with a container or string in it, its decoded
    value is masked and encoded again (only if that changed something)."""
    if not forms:
        return text
    if depth < MAX_NESTING and text.lstrip()[:1] in ("{", "[", '"'):
        try:
            node = json.loads(text)
        except ValueError:
            node = None
        if isinstance(node, (dict, list, str)):
            masked = _masked(node, forms, depth + 1)
            if masked != node:
                text = json.dumps(masked)
    for form in forms:
        text = text.replace(form, REDACTED)
    return text


def _spellings(secrets: list[str]) -> list[str]:
    """Each secret as it reads after 0 to MAX_NESTING rounds of JSON string escaping (the
    last resort for JSON that is not whole: a quote of it inside prose), longest first."""
    forms: set[str] = set()
    for secret in secrets:
        form = secret
        for _ in range(MAX_NESTING + 1):
            forms.add(form)
            form = json.dumps(form)[1:-1]
    return sorted(forms, key=len, reverse=True)


def failed(span: Span, error_type: str) -> None:
    """Mark `span` failed with the error's type (`error.type`, as the conventions name it)."""
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, error_type))
