"""OpenTelemetry tracing on a real dev server: one trace per thread tree, GenAI attributes,
no secrets in spans, no duplicate spans after another worker replays, ids on events."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from api_support import api_stack
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import format_span_id, format_trace_id
from pydantic import BaseModel
from subagent_support import family, start_boss
from support import add_script, agent_definitions, idle_after, store_of, wait_until

from weft.client.threads import Threads
from weft.definitions import define_tool
from weft.transport.connection import connect
from weft.workers.agent_worker import AgentWorker
from weft.workers.telemetry import tracing_interceptor, weft_tracer

SECRET = "tr4ce-secret-" + uuid.uuid4().hex[:8]
# Spans a caller makes or answers on its own (queries, signals): their traces are the
# caller's, not the thread's.
CALLER_SPANS = ("QueryWorkflow", "HandleQuery", "SignalWorkflow", "StartWorkflowUpdate")


class NoArgs(BaseModel):
    """No arguments."""


def leak(state: Any, args: NoArgs) -> dict[str, Any]:
    """A careless tool that returns the thread's secret (spans must still not show it)."""
    return {"token": state.env("API_TOKEN")}


def _text(span: ReadableSpan) -> str:
    parts = [span.name, *map(str, (span.attributes or {}).values())]
    for event in span.events:
        parts += [event.name, *map(str, (event.attributes or {}).values())]
    return " ".join(parts)


def _definitions(scripted_server: Any) -> Any:
    parent = add_script(
        scripted_server,
        {
            "turns": [
                {"match": "and now?", "replies": [{"text": "Still warm."}]},
                {
                    "match": "*",
                    "replies": [
                        {"tool_calls": [{"name": "leak", "arguments": {}}]},
                        {"tool_calls": [{"name": "researcher", "arguments": {"message": "Rome?"}}]},
                        {"text": "Rome is warm."},
                    ],
                },
            ]
        },
    )
    child = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Rome"}}]},
                {"tool_calls": [{"name": "report", "arguments": {"summary": "21 C"}}]},
            ]
        },
    )
    return family(
        parent,
        child,
        parent_tools=[{"name": "researcher"}, "leak"],
        extra=[define_tool(name="leak", description="Leaks", args=NoArgs, execute=leak)],
    )


async def test_one_trace_covers_a_thread_tree_and_survives_replay(
    dev_server, weft_config, scripted_server
):
    """A parent, its child, their model and tool calls are one trace with GenAI attributes;
    no secret shows in any span even with content on; a second worker replaying the
    thread adds no duplicate spans; events carry the ids of exported spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    weft_config.telemetry.tracing.content = True
    client = await connect(dev_server.address, interceptors=[tracing_interceptor(provider)])
    definitions = _definitions(scripted_server)
    queue = f"tq-{uuid.uuid4().hex[:12]}"

    def worker() -> AgentWorker:
        return AgentWorker(
            client,
            weft_config,
            definitions=definitions,
            scripted=scripted_server,
            task_queue=queue,
            tracer_provider=provider,
        )

    async with worker() as first:
        handle = await start_boss(client, first, env={"API_TOKEN": SECRET})
        state = await wait_until(handle, idle_after(1))
    # A fresh worker (empty cache) replays turn 1 to run turn 2.
    async with worker() as second:
        await Threads(client, task_queue=queue).send(handle.id, "and now?")
        await wait_until(handle, idle_after(2))
        [entry] = state.children
        child_id = entry["reference"]
        events = [
            *store_of(second).events.read(handle.id, limit=10_000),
            *store_of(second).events.read(child_id, limit=10_000),
        ]
    provider.force_flush()
    spans = exporter.get_finished_spans()
    tree = {handle.id, child_id}

    def in_tree(span: ReadableSpan) -> bool:
        attributes = span.attributes or {}
        return attributes.get("temporalWorkflowID") in tree or span.name.startswith(
            ("chat ", "execute_tool ", "hook ")
        )

    thread_spans = [s for s in spans if in_tree(s) and not s.name.startswith(CALLER_SPANS)]
    assert {s.context.trace_id for s in thread_spans if s.context} == {
        thread_spans[0].context.trace_id
    }
    names = Counter(s.name for s in thread_spans)
    assert names["StartChildWorkflow:AgentThread"] == 1
    assert names["RunWorkflow:AgentThread"] == 2  # the parent's and the child's
    # Replay-safe: one workflow-side span per activity execution, none re-made by worker 2.
    for activity in ("model.call", "tool.call"):
        assert names[f"StartActivity:{activity}"] == names[f"RunActivity:{activity}"] > 0
    parent_runs = {s.attributes.get("temporalRunID") for s in thread_spans if s.attributes}
    assert len(parent_runs - {None}) == 2  # no span from a run that does not exist

    chats = [s for s in thread_spans if s.name.startswith("chat ")]
    assert len(chats) == 6  # parent: leak, researcher, answer, turn 2; child: weather, report
    for chat in chats:
        attributes = chat.attributes or {}
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "scripted"
        assert attributes["gen_ai.request.model"] == attributes["gen_ai.response.model"]
        assert attributes["gen_ai.usage.input_tokens"] > 0  # type: ignore[operator]
        assert attributes["gen_ai.usage.output_tokens"] > 0  # type: ignore[operator]
        assert attributes["gen_ai.response.finish_reasons"]
    tools = {s.name: s.attributes or {} for s in thread_spans if s.name.startswith("execute_")}
    assert set(tools) == {"execute_tool leak", "execute_tool weather"}
    assert tools["execute_tool weather"]["weft.tool.status"] == "success"
    assert tools["execute_tool leak"]["gen_ai.tool.call.id"]
    # Content is on: arguments and results are there, the secret is not.
    assert "[redacted secret]" in str(tools["execute_tool leak"]["gen_ai.tool.call.result"])
    assert not [s.name for s in spans if SECRET in _text(s)]

    exported = {format_span_id(s.context.span_id) for s in spans if s.context}
    trace = format_trace_id(thread_spans[0].context.trace_id)
    for event in events:
        assert (event.trace_id, event.span_id in exported) == (trace, True), event
    by_span = {format_span_id(s.context.span_id): s.name for s in spans if s.context}
    # An activity's events name the span of its work, not the workflow's.
    writers = {by_span[e.span_id] for e in events if e.type == "model.completed" and e.span_id}
    assert writers == {"RunActivity:model.call"}


async def test_a_post_with_traceparent_and_its_thread_are_one_trace(
    dev_server, weft_config, scripted_server
):
    """`POST /threads` continues the caller's `traceparent` in a server span, and the thread
    it starts (workflow, model call) joins that trace; the thread's events carry it."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    client = await connect(dev_server.address, interceptors=[tracing_interceptor(provider)])
    script = add_script(scripted_server, {"replies": [{"text": "hi"}]})
    caller_trace, caller_span = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    async with (
        AgentWorker(
            client,
            weft_config,
            definitions=agent_definitions(script),
            scripted=scripted_server,
            task_queue=weft_config.temporal.task_queue,
            tracer_provider=provider,
        ) as worker,
        api_stack(client, weft_config, worker.task_queue, tracer=weft_tracer(provider)) as stack,
    ):
        started = await stack.http.post(
            "/threads",
            json={"agent": "helper", "messages": ["hello"]},
            headers={"traceparent": f"00-{caller_trace}-{caller_span}-01"},
        )
        assert started.status_code == 201, started.text
        thread_id = started.json()["threadId"]
        await wait_until(client.get_workflow_handle(thread_id), idle_after(1))
        events = store_of(worker).events.read(thread_id)
    provider.force_flush()
    spans = exporter.get_finished_spans()
    [server] = [s for s in spans if s.name == "POST /threads"]
    assert server.parent is not None and format_span_id(server.parent.span_id) == caller_span
    joined = {
        s.name for s in spans if s.context and format_trace_id(s.context.trace_id) == caller_trace
    }
    assert {"POST /threads", "StartWorkflow:AgentThread", "RunWorkflow:AgentThread"} <= joined
    assert any(name.startswith("chat ") for name in joined)
    assert events and {e.trace_id for e in events} == {caller_trace}
