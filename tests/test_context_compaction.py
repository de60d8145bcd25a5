"""Long threads stay within the model's window: budgets, compaction boundaries and the safety net.

Every test runs on the real dev server against the scripted model server, which enforces
a `context_limit` with the provider's real HTTP 400, so an overflow is a real error.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from support import (
    assert_every_run_replays,
    event_schema_validator,
    read,
    start_thread,
    wait_until,
)
from temporalio.client import WorkflowHandle

from weft.activities.compaction import REQUEST_MARKER
from weft.contract.context import QUERY_CONTEXT_BOUNDARY
from weft.contract.thread import ThreadRead
from weft.definitions import (
    Definitions,
    define_agent,
    define_model,
    define_prompt,
    define_tool,
)

WINDOW = 8_192
OUTPUT = 512
FILLER = "The quick brown fox jumps over the lazy dog while we count. " * 6
TURNS = 200


class DumpArgs(BaseModel):
    """Arguments of the dump tool."""

    megabytes: float


def dump(state: Any, args: DumpArgs) -> str:
    """A large, position-checkable output: line N says which line it is."""
    lines, size, n = [], 0, 0
    while size < args.megabytes * 1_000_000:
        line = f"line {n:07d} of the dump\n"
        lines.append(line)
        size += len(line)
        n += 1
    return "".join(lines)


class CompactArgs(BaseModel):
    """Arguments of the compact_now tool."""

    why: str


def compact_now(state: Any, args: CompactArgs) -> str:
    """A tool that asks its thread to compact (ThreadState.compact)."""
    state.compact(args.why)
    return "compaction requested"


def definitions(
    script: str,
    *,
    window: int = WINDOW,
    prompt: str = "You are a helpful agent. Keep answers short.",
    **prompt_fields: Any,
) -> Definitions:
    """A helper agent on the scripted model `script` with an 8k window."""
    return Definitions().add(
        define_model(
            name="small",
            provider="scripted",
            model=script,
            capabilities={"maxContextTokens": window, "maxOutputTokens": OUTPUT},
        ),
        define_prompt(
            name="helper_prompt",
            toolDescription="helps",
            model="small",
            prompt=prompt,
            tools=["dump", "compact_now"],
            **prompt_fields,
        ),
        define_agent(name="helper", sideA={"prompt": "helper_prompt"}),
        define_tool(name="dump", description="Dump a large output", args=DumpArgs, execute=dump),
        define_tool(
            name="compact_now", description="Compact", args=CompactArgs, execute=compact_now
        ),
    )


def chat_script(
    *, limit: int = WINDOW, extra_turns: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Short answers to every turn; summaries to compaction requests."""
    return {
        "context_limit": limit,
        "turns": [
            {
                "match": REQUEST_MARKER,
                "replies": [{"text": "Summary: the user sent numbered turns; all were acked."}],
            },
            *(extra_turns or []),
            {"match": "*", "replies": [{"text": "ack, noted."}]},
        ],
    }


@dataclass
class Chat:
    """A thread on its own script and worker; `handle` follows it across runs."""

    script: str
    worker: Any
    started: WorkflowHandle[Any, Any]
    handle: WorkflowHandle[Any, Any]


async def chat_thread(
    start_worker: Any,
    temporal_client: Any,
    scripted_server: Any,
    script_body: dict[str, Any],
    *,
    options: dict[str, Any] | None = None,
    **definition_fields: Any,
) -> Chat:
    """Register `script_body`, start a worker on `definitions` and a thread on it."""
    script = f"ctx-{uuid.uuid4().hex[:10]}"
    scripted_server.set_script(script, script_body)
    worker = await start_worker(definitions(script, **definition_fields))
    started = await start_thread(temporal_client, worker.task_queue, options=options or {})
    return Chat(script, worker, started, temporal_client.get_workflow_handle(started.id))


async def ask(handle: WorkflowHandle[Any, Any], text: str, turns_before: int) -> ThreadRead:
    await handle.signal("queue_message", {"role": "user", "content": text})
    return await wait_until(
        handle,
        lambda s: s.counters.turns > turns_before and s.status == "waiting_input",
        timeout=60,
    )


def chat_requests(server: Any, script: str) -> list[dict[str, Any]]:
    return [
        r for r in server.requests if r["model"] == script and REQUEST_MARKER not in _last_user(r)
    ]


def _last_user(record: dict[str, Any]) -> str:
    users = [m for m in record["messages"] or [] if m.get("role") == "user"]
    content = users[-1].get("content") if users else ""
    return content if isinstance(content, str) else str(content)


async def test_two_hundred_turns_on_an_8k_window(start_worker, temporal_client, scripted_server):
    """200 turns against an 8k model: every turn answers, no request is over the limit,
    boundaries exist, every original message stays in the store, and the runs replay."""
    chat = await chat_thread(
        start_worker,
        temporal_client,
        scripted_server,
        chat_script(),
        # About four compactions and four runs in 200 turns: several boundaries, and runs
        # that continue as new with one in force.
        options={"continueAsNewEvents": 750},
    )
    script, worker, started, handle = chat.script, chat.worker, chat.started, chat.handle
    state = await read(handle)
    for turn in range(TURNS):
        state = await ask(handle, f"turn {turn}: {FILLER}", state.counters.turns)
        assert state.stop_reason != "step_error", state.incidents
    assert state.counters.turns == TURNS

    requests = chat_requests(scripted_server, script)
    assert all(r["status"] == 200 for r in scripted_server.requests if r["model"] == script)
    largest = max(r["request_tokens"] for r in requests)
    print(f"largest request {largest} tokens of {WINDOW}; {state.counters.runs} runs")
    assert largest <= WINDOW - OUTPUT
    boundaries = worker.store.boundaries.list(started.id)
    assert len(boundaries) >= 3, boundaries
    assert state.context is not None and state.context["compactions"] == len(boundaries)
    # The request after the last compaction starts from the newest boundary.
    assert "Summary: the user sent numbered turns" in requests[-1]["messages"][0]["content"]

    messages = worker.store.messages.list(started.id)
    assert [m.position for m in messages] == list(range(len(messages)))
    users = [m.content for m in messages if m.role == "user"]
    assert users == [f"turn {n}: {FILLER}" for n in range(TURNS)]

    # Compaction events validate, and there is one completed event per boundary.
    validator = event_schema_validator()
    kinds = ["context.compaction.started", "context.compaction.completed"]
    events = worker.store.events.read(started.id, limit=10_000, types=kinds)
    for event in events:
        validator.validate(event.model_dump(mode="json", by_alias=True, exclude_none=True))
    completed = [e for e in events if e.type == "context.compaction.completed"]
    assert [e.payload["boundaryId"] for e in completed] == [b.boundary_id for b in boundaries]

    # The thread continued as new with a boundary in force, and every run replays.
    assert state.counters.runs >= 2
    await assert_every_run_replays(temporal_client, started)

    snapshot = await handle.query(QUERY_CONTEXT_BOUNDARY)
    assert snapshot["kind"] == "context_boundary_snapshot"
    assert snapshot["boundary"]["boundaryId"] == boundaries[-1].boundary_id


async def test_a_provider_context_length_error_recovers(
    start_worker, temporal_client, scripted_server
):
    """The model's real window (3,000) is smaller than it declares (8k): the provider's 400
    is caught, the thread compacts harder, retries, learns the window, and goes on."""
    chat = await chat_thread(
        start_worker, temporal_client, scripted_server, chat_script(limit=3_000)
    )
    script, worker, started, handle = chat.script, chat.worker, chat.started, chat.handle
    state = await read(handle)
    for turn in range(60):
        state = await ask(handle, f"turn {turn}: {FILLER}", state.counters.turns)
        assert state.stop_reason != "step_error", state.incidents
    assert state.counters.turns == 60

    refused = [r for r in scripted_server.requests if r["model"] == script and r["status"] == 400]
    assert 1 <= len(refused) <= 2, [r["request_tokens"] for r in refused]
    failed = worker.store.events.read(started.id, limit=10_000, types=["model.failed"])
    assert {e.payload["errorType"] for e in failed} == {"ProviderContextLengthExceeded"}
    boundaries = worker.store.boundaries.list(started.id)
    assert boundaries[0].reason == "overflow"
    assert state.context is not None and state.context["learntLimit"] == 3_000
    # After the first refusal every request fits the real window.
    sent = [r for r in scripted_server.requests if r["model"] == script]
    after = sent[sent.index(refused[-1]) + 1 :]
    assert len(after) >= 20 and {r["status"] for r in after} == {200}
    assert max(r["request_tokens"] for r in after) <= 3_000


async def test_a_request_that_cannot_fit_fails_the_turn_clearly(
    start_worker, temporal_client, scripted_server
):
    """A system prompt bigger than the window cannot be compacted away: the turn ends in a
    step_error that says so, after one retry, and the thread stays usable."""
    chat = await chat_thread(
        start_worker,
        temporal_client,
        scripted_server,
        chat_script(),
        prompt="You are helpful. " * 4_000,
    )
    script, handle = chat.script, chat.handle
    await handle.signal("queue_message", {"role": "user", "content": "hello"})
    state = await wait_until(handle, lambda s: s.stop_reason == "step_error", timeout=60)
    assert "does not fit the context window of model 'small'" in (state.last_outcome or "")
    assert not [r for r in scripted_server.requests if r["model"] == script]  # never sent
    assert state.status == "waiting_input"


async def test_summarising_fails_so_older_turns_are_cut(
    start_worker, temporal_client, scripted_server
):
    """A `compact` signal while idle, with a summariser that fails: a
    `context.compaction.failed` event, then a `cut` boundary, and the thread goes on. A
    malformed compact signal is a warning, nothing more."""
    failing = {
        "match": REQUEST_MARKER,
        "replies": [{"error": {"status": 400, "body": {"error": {"message": "no"}}}}],
    }
    body = {"turns": [failing, {"match": "*", "replies": [{"text": "ok"}]}]}
    chat = await chat_thread(start_worker, temporal_client, scripted_server, body)
    script, worker, started, handle = chat.script, chat.worker, chat.started, chat.handle
    state = await read(handle)
    for turn in range(3):
        state = await ask(handle, f"turn {turn}", state.counters.turns)

    await handle.signal("compact", {"reason": 5})
    await handle.signal("compact", {"why": "x"})
    await handle.signal("compact", {"reason": "operator asked"})
    state = await wait_until(handle, lambda s: bool(s.context and s.context["compactions"]))
    assert state.warnings == 2 and {i["code"] for i in state.incidents} >= {"malformed_signal"}
    (boundary,) = worker.store.boundaries.list(started.id)
    assert boundary.kind == "cut" and boundary.reason == "requested"
    assert "left out of this context because summarising them failed" in boundary.summary
    events = worker.store.events.read(
        started.id, limit=1_000, types=["context.compaction.failed", "context.compaction.completed"]
    )
    assert [e.type for e in events] == ["context.compaction.failed", "context.compaction.completed"]
    validator = event_schema_validator()
    for event in events:
        validator.validate(event.model_dump(mode="json", by_alias=True, exclude_none=True))

    state = await ask(handle, "turn 3", state.counters.turns)
    assert state.last_outcome == "ok"
    last = [r for r in scripted_server.requests if r["model"] == script][-1]
    assert "summarising them failed" in last["messages"][0]["content"]
    # The latest turn before the boundary is kept whole; the ones before are cut.
    assert [m["content"] for m in last["messages"][1:]] == ["turn 2", "ok", "turn 3"]
    assert len(worker.store.messages.list(started.id)) == 8  # every original kept


async def test_a_tool_compacts_its_thread(start_worker, temporal_client, scripted_server):
    """`state.compact()` in a tool: the thread compacts before its next model call."""
    tool_turn = {
        "match": "please compact",
        "replies": [
            {"tool_calls": [{"name": "compact_now", "arguments": {"why": "done with research"}}]},
            {"text": "compacted"},
        ],
    }
    chat = await chat_thread(
        start_worker, temporal_client, scripted_server, chat_script(extra_turns=[tool_turn])
    )
    script, worker, started, handle = chat.script, chat.worker, chat.started, chat.handle
    state = await read(handle)
    for turn in range(3):
        state = await ask(handle, f"turn {turn}", state.counters.turns)
    state = await ask(handle, "please compact", state.counters.turns)
    assert state.last_outcome == "compacted"
    (boundary,) = worker.store.boundaries.list(started.id)
    assert boundary.reason == "tool" and boundary.kind == "summary"
    last = chat_requests(scripted_server, script)[-1]
    assert "Summary: the user sent numbered turns" in last["messages"][0]["content"]
    assert last["messages"][1]["content"] == "please compact"
