"""The ids a run stamps on the events it produces: its Temporal run id and, when traced,
the trace it belongs to (read from the start headers, so replays agree)."""

from __future__ import annotations

from temporalio import workflow

from weft.contract.correlation import (
    TRACE_HEADER,
    TRACING_EXTERN,
    parse_traceparent,
    thread_traceparent,
)


def run_correlation() -> dict[str, str]:
    """`run_id`, and `trace_id` / `span_id` of the span that started this run when known."""
    info = workflow.info()
    ids = {"run_id": info.run_id}
    header = info.headers.get(TRACE_HEADER)
    if header is not None:
        carrier = workflow.payload_converter().from_payload(header)
        traced = parse_traceparent(
            carrier.get("traceparent") if isinstance(carrier, dict) else None
        )
        if traced is not None:
            ids["trace_id"], ids["span_id"] = traced
    elif TRACING_EXTERN in workflow.extern_functions():
        # Started without a trace: the interceptor roots it in a derived trace whose parent
        # span is never exported, so only the trace id is a true join.
        traced = parse_traceparent(
            thread_traceparent(info.workflow_id, info.first_execution_run_id)
        )
        if traced is not None:
            ids["trace_id"] = traced[0]
    return ids
