"""Correlation ids as every part derives them: a thread's default session, and its trace
(W3C traceparent values). The worker's tracing interceptor (workers/telemetry.py), the
workflow's event ids (workflows/correlation.py) and the client read them from here, so
they agree.
"""

from __future__ import annotations

import hashlib
import re

# The header Temporal's TracingInterceptor carries the W3C context in.
TRACE_HEADER = "_tracer-data"
# An extern function the worker's tracing interceptor gives its workflows: its presence
# tells workflow code that tracing is on.
TRACING_EXTERN = "__weft_tracing_on"

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")


def parse_traceparent(value: object) -> tuple[str, str] | None:
    """(trace id, span id) of a W3C traceparent, None when it is not one (or all zeros)."""
    if not isinstance(value, str):
        return None
    match = _TRACEPARENT.match(value.strip())
    if match is None or set(match[1]) == {"0"} or set(match[2]) == {"0"}:
        return None
    return match[1], match[2]


def thread_traceparent(workflow_id: str, first_run_id: str) -> str:
    """The trace of a thread started without one: derived from its first run, so every run,
    replay and worker puts its spans in the same trace."""
    digest = hashlib.sha256(f"{workflow_id}/{first_run_id}".encode()).hexdigest()
    return f"00-{digest[:32]}-{digest[32:48]}-01"


def default_session_id(thread_id: str) -> str:
    """The session of a root thread started without one: named after the thread, so it is
    stable across continue-as-new; children inherit their parent's."""
    return f"session-{thread_id}"
