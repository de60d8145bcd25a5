"""Span content never shows a secret in any spelling: secrets with `"` and `\\` inside
tool-call arguments, tool results and JSON nested in strings are redacted."""

from __future__ import annotations

import json
import uuid
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support import add_script, agent_definitions, idle_after, start_thread, wait_until

from weft.activities.spans import REDACTED, Spans

# A quote and a backslash: JSON escapes both, so every level of encoding spells it anew.
SECRET = 'sp"an\\secret-' + uuid.uuid4().hex[:8]


def _decoded(text: str) -> list[str]:
    """`text` and every string inside it that is JSON text, decoded recursively."""
    found = [text]
    try:
        node = json.loads(text)
    except ValueError:
        return found
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str) and item != text:
            found += _decoded(item)
    return found


def _spellings(secret: str, levels: int = 4) -> list[str]:
    """The secret as it reads after 0..levels-1 rounds of JSON string escaping."""
    forms = [secret]
    for _ in range(levels - 1):
        forms.append(json.dumps(forms[-1])[1:-1])
    return forms


def _leaks(value: Any) -> list[str]:
    texts = [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
    found = [s for t in texts for s in _spellings(SECRET) if s in t]
    found += [t for raw in texts for t in _decoded(raw) if SECRET in t]
    return found


def test_record_content_redacts_every_spelling_of_a_secret() -> None:
    """record_content redacts a secret plain, escaped, and inside JSON nested in strings."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans = Spans(provider.get_tracer("t"), content=True)
    nested = json.dumps({"inner": json.dumps({"deeper": SECRET})})
    value = {
        "messages": [
            {"role": "assistant", "tool_calls": [{"function": {"arguments": nested}}]},
            {"role": "tool", "content": json.dumps({"token": SECRET, SECRET: 1})},
            {"role": "user", "content": f"say {json.dumps(json.dumps(SECRET))} twice"},
        ]
    }
    with spans.span("s", {}) as span:
        spans.record_content(span, "v", value, {SECRET})
        spans.record_content(span, "raw", nested, {SECRET})
    [finished] = exporter.get_finished_spans()
    attributes = dict(finished.attributes or {})
    assert REDACTED in str(attributes["v"]) and REDACTED in str(attributes["raw"])
    assert not [k for k, v in attributes.items() if _leaks(v)]


async def test_no_span_shows_a_secret_from_tool_arguments_or_results(
    start_worker, temporal_client, weft_config, scripted_server
):
    """With content on, a secret holding `"` and `\\` that the model puts in tool arguments
    and a tool returns in its result shows in no span attribute, in any spelling."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    weft_config.telemetry.tracing.content = True
    nested = json.dumps({"inner": json.dumps({"key": SECRET})})
    script = add_script(
        scripted_server,
        {
            "replies": [
                # weather echoes its city into the result: the secret is in both.
                {"tool_calls": [{"name": "weather", "arguments": {"city": SECRET}}]},
                {"tool_calls": [{"name": "note", "arguments": {"text": nested}}]},
                {"text": "done"},
            ]
        },
    )
    worker = await start_worker(agent_definitions(script), tracer_provider=provider)
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        messages=[{"role": "user", "content": "go"}],
        env={"API_TOKEN": SECRET},
    )
    await wait_until(handle, idle_after(1))
    provider.force_flush()
    spans = exporter.get_finished_spans()
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 3
    last_input = str((chats[-1].attributes or {})["gen_ai.input.messages"])
    assert last_input.count(REDACTED) >= 3  # arguments, the result, the nested note
    leaked = [
        (s.name, key) for s in spans for key, value in (s.attributes or {}).items() if _leaks(value)
    ]
    assert not leaked
