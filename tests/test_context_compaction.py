"""Long threads stay within the model's window: budgets, compaction boundaries and the safety net.

Every test runs on the real dev server against the scripted model server, which enforces
a `context_limit` with the provider's real HTTP 400, so an overflow is a real error.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from support import event_schema_validator, read, run_histories, start_thread, wait_until
from temporalio.client import WorkflowHandle
from temporalio.worker import Replayer

from activities.compaction import REQUEST_MARKER
from activities.definitions import (
    Definitions,
    define_agent,
    define_model,
    define_prompt,
    define_tool,
)
from contract.context import QUERY_CONTEXT_BOUNDARY
from contract.thread import ThreadRead
from transport.codec import data_converter
from workers.agent_worker import workflow_runner
from workflows.agent_thread import AgentThreadWorkflow

WINDOW = 8_192
OUTPUT = 512
FILLER = "The quick brown fox jumps over the lazy dog while we count. " * 6


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


def definitions(script: str, *, window: int = WINDOW, **prompt_fields: Any) -> Definitions:
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
            prompt="You are a helpful agent. Keep answers short.",
            tools=["dump"],
            **prompt_fields,
        ),
        define_agent(name="helper", sideA={"prompt": "helper_prompt"}),
        define_tool(name="dump", description="Dump a large output", args=DumpArgs, execute=dump),
    )


def chat_script(*, limit: int = WINDOW, extra_turns: list[dict[str, Any]] | None = None) -> dict:
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


async def test_four_hundred_turns_on_an_8k_window(start_worker, temporal_client, scripted_server):
    """400 turns against an 8k model: every turn answers, no request is over the limit,
    boundaries exist, every original message stays in the store, and the runs replay."""
    script = f"ctx-{id(object())}"
    scripted_server.set_script(script, chat_script())
    worker = await start_worker(definitions(script))
    started = await start_thread(
        temporal_client, worker.task_queue, options={"continueAsNewEvents": 1500}
    )
    handle = temporal_client.get_workflow_handle(started.id)
    state = await read(handle)
    for turn in range(400):
        state = await ask(handle, f"turn {turn}: {FILLER}", state.counters.turns)
        assert state.stop_reason != "step_error", state.incidents
    assert state.counters.turns == 400

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
    assert users == [f"turn {n}: {FILLER}" for n in range(400)]

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
    runs = await run_histories(temporal_client, started.id, started.first_execution_run_id)
    replayer = Replayer(
        workflows=[AgentThreadWorkflow],
        data_converter=data_converter(None),
        workflow_runner=workflow_runner(),
    )
    for history in runs:
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        assert result.replay_failure is None, result.replay_failure

    snapshot = await handle.query(QUERY_CONTEXT_BOUNDARY)
    assert snapshot["kind"] == "context_boundary_snapshot"
    assert snapshot["boundary"]["boundaryId"] == boundaries[-1].boundary_id
