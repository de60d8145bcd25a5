"""A thread runs the same on the PostgreSQL store as on the SQLite default."""

from __future__ import annotations

import json

from support import add_script, agent_definitions, idle_after, start_thread, wait_until


async def test_thread_on_postgres(
    start_worker, temporal_client, scripted_server, weft_config, postgres_databases
):
    """Messages, events and kv land in PostgreSQL when the store URL points there."""
    weft_config.store.url = postgres_databases()
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "note", "arguments": {"text": "in postgres"}}]},
                {"text": "stored"},
            ]
        },
    )
    worker = await start_worker(agent_definitions(script))
    assert worker.store.engine.dialect.name == "postgresql"
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "note it"}]
    )
    await wait_until(handle, idle_after(1))
    messages = worker.store.messages.list(handle.id)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert json.loads(messages[2].content)["result"] == "noted (1)"
    assert worker.store.values.get(handle.id, "notes") == ["in postgres"]
    sequences = [e.sequence for e in worker.store.events.read(handle.id)]
    assert sequences == list(range(1, len(sequences) + 1))
