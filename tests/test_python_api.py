"""The public Python API (`import weft`) end to end: connect, Worker, Thread on a real dev
server with the scripted model server reached as an OpenAI-compatible provider."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from support import add_script, agent_definitions, json_texts, sequence_of
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

import weft
from weft.activities.crypto import new_key
from weft.definitions import Definitions
from weft.workers.scripted_model import ScriptedModelServer

ROOT = Path(__file__).resolve().parents[1]

WEATHER_THEN_ANSWER = {
    "turns": [
        {
            "match": "Paris",
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
                {"text": "It is sunny in Paris."},
            ],
        },
        {"match": "Oslo", "replies": [{"text": "Oslo is cold."}]},
    ]
}


def providers(scripted_server: ScriptedModelServer) -> dict[str, dict[str, str]]:
    """The scripted model server as the `scripted` provider, the way a user names an
    OpenAI-compatible endpoint (a key of `providers`, used by define_model(provider=...))."""
    return {"scripted": {"kind": "openai", "baseUrl": scripted_server.openai_base_url}}


def worker(
    client: Client,
    definitions: Definitions | str,
    tmp_path: Path,
    scripted_server: ScriptedModelServer,
    **options: Any,
) -> weft.Worker:
    """A weft.Worker on its own task queue and store."""
    return weft.Worker(
        client,
        definitions,
        store=f"sqlite:///{tmp_path / 'weft.db'}",
        providers=providers(scripted_server),
        task_queue=f"tq-{uuid.uuid4().hex[:12]}",
        **options,
    )


async def test_ask_send_events_read_terminate(dev_server, scripted_server, tmp_path):
    """A thread started through the public API answers `ask` with the turn's final text,
    streams its events from a cursor, takes `send`, reports `read`, and terminates."""
    client = await weft.connect(dev_server.address)
    script = add_script(scripted_server, WEATHER_THEN_ANSWER)
    async with worker(client, agent_definitions(script), tmp_path, scripted_server) as running:
        thread = await weft.Thread.start(
            client, "helper", task_queue=running.task_queue, store=running.store
        )
        result = await thread.ask("Weather in Paris?")
        assert (result.status, result.stop_reason) == ("completed", "stop_on_response")
        assert result.response == "It is sunny in Paris."
        assert result.usage is not None and result.usage.input_tokens > 0
        assert result.events_cursor is not None

        first_turn = [e async for e in thread.events(follow=False)]
        types = [e.type for e in first_turn]
        # Streaming is on by default: the answer arrived as model.delta events.
        assert "model.delta" in types and "tool.result" in types
        (cursor,) = [sequence_of(e) for e in first_turn if e.event_id == result.events_cursor]
        sequences = [sequence_of(e) for e in first_turn]
        assert sequences == sorted(sequences)

        await thread.send("And in Oslo?")
        seen = []
        async for event in thread.events(after=result.events_cursor):
            seen.append(event)
            if event.type == "turn.completed":
                break
        assert seen and all(sequence_of(e) > cursor for e in seen)
        texts = "".join(str(e.payload.get("text", "")) for e in seen if e.type == "model.delta")
        assert "Oslo is cold." in texts

        state = await thread.read()
        assert state.thread_id == thread.id and state.counters.turns == 2
        assert state.status == "waiting_input"

        # Attaching by id sees the same thread.
        again = weft.Thread(client, thread.id, task_queue=running.task_queue)
        assert (await again.read()).counters.turns == 2

        await thread.terminate("done")
        closed = await thread.result()
        assert closed.status == "cancelled" and closed.reason == "done"


async def test_respond_answers_a_waiting_ask(dev_server, scripted_server, tmp_path):
    """`ask` waits through an ask_human action; `respond` answers it and the turn ends with
    the model's reply to that answer."""
    client = await weft.connect(dev_server.address)
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "ask_human", "arguments": {"question": "Which city?"}}]},
                {"text": "Thanks, Lisbon it is."},
            ]
        },
    )
    definitions = weft.Definitions().add(
        weft.define_model(name="scripted", provider="scripted", model=script),
        weft.define_prompt(
            name="asker",
            toolDescription="asks",
            model="scripted",
            prompt="Ask.",
            tools=["ask_human"],
        ),
        weft.define_agent(name="helper", sideA={"prompt": "asker"}),
    )
    async with worker(client, definitions, tmp_path, scripted_server) as running:
        thread = await weft.Thread.start(client, "helper", task_queue=running.task_queue)
        asking = asyncio.create_task(thread.ask("Plan a trip"))
        for _ in range(600):
            pending = (await thread.read()).pending_actions
            if pending:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("no pending action")
        assert not asking.done()
        answered = await thread.respond(pending[0]["actionId"], "answer", answer="Lisbon")
        assert answered.decision == "answer"
        result = await asking
        assert result.response == "Thanks, Lisbon it is."
        tool = next(m for m in running.store.messages.list(thread.id) if m.role == "tool")
        assert "Lisbon" in (tool.content or "")
        await thread.terminate()


async def test_worker_from_a_directory_and_provider_keys(dev_server, scripted_server, tmp_path):
    """Definitions can be a directory; `define_model(provider=...)` names a key of the
    worker's providers, and a missing key is refused at start with the known keys."""
    client = await weft.connect(dev_server.address)
    folder = tmp_path / "definitions"
    for kind in ("models", "prompts", "agents"):
        (folder / kind).mkdir(parents=True)
    script = add_script(scripted_server, {"replies": [{"text": "from a directory"}]})
    (folder / "models" / "m.yaml").write_text(f"provider: scripted\nmodel: {script}\n")
    (folder / "prompts" / "p.yaml").write_text("toolDescription: t\nmodel: m\nprompt: Hi.\n")
    (folder / "agents" / "a.yaml").write_text("sideA: {prompt: p}\n")

    async with worker(client, str(folder), tmp_path, scripted_server) as running:
        thread = await weft.Thread.start(client, "a", task_queue=running.task_queue)
        assert (await thread.ask("hello")).response == "from a directory"
        await thread.terminate()

    wrong = weft.Worker(
        client,
        folder,
        store=f"sqlite:///{tmp_path / 'other.db'}",
        providers={"openai": {"kind": "openai", "baseUrl": scripted_server.openai_base_url}},
        task_queue=f"tq-{uuid.uuid4().hex[:12]}",
    )
    with pytest.raises(weft.DefinitionError) as refused:
        await wrong.__aenter__()
    assert "scripted" in str(refused.value) and "openai" in str(refused.value)


async def test_codec_key_file_under_the_root_switches_encryption_on(
    dev_server, scripted_server, tmp_path
):
    """A keys file at <root>/.weft/codec.keys makes connect and Worker encrypt env: the
    secret never appears in Temporal history, and the thread still runs."""
    keys_file = tmp_path / ".weft" / "codec.keys"
    keys_file.parent.mkdir()
    keys_file.write_text(f"test-1:{new_key()}\n")
    client = await weft.connect(dev_server.address, root=tmp_path)
    script = add_script(scripted_server, {"replies": [{"text": "encrypted fine"}]})
    async with worker(
        client, agent_definitions(script), tmp_path, scripted_server, root=tmp_path
    ) as running:
        thread = await weft.Thread.start(
            client, "helper", env={"API_TOKEN": "s3cr3t-value-42"}, task_queue=running.task_queue
        )
        assert (await thread.ask("hi")).response == "encrypted fine"
        history = await client.get_workflow_handle(thread.id).fetch_history()
        await thread.terminate()
    dumped = json.loads(history.to_json())
    assert not any("s3cr3t-value-42" in text for text in json_texts(dumped))
    encodings = [
        e.workflow_execution_started_event_attributes.input.payloads[0].metadata["encoding"]
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
    ]
    assert encodings and all(b"encrypted" in encoding for encoding in encodings)
