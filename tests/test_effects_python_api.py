"""Effects through the public Python API: define_effect, Thread.schedule_effect / effects /
remove_effect, on a real dev server."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from pydantic import BaseModel
from support import add_script, agent_definitions
from temporalio.client import WorkflowUpdateFailedError

import weft


class PingArgs(BaseModel):
    text: str


async def ping(state: Any, args: PingArgs) -> None:
    await state.set_value("pinged", args.text)
    state.queue_message(args.text)


async def test_thread_effect_methods(dev_server, scripted_server, tmp_path):
    """An effect scheduled through `weft.Thread` is listed, fires, and queues a turn; a
    second one is removed; an unknown name is refused with its name; an id is idempotent."""
    client = await weft.connect(dev_server.address)
    script = add_script(scripted_server, {"replies": [{"text": "pong"}]})
    definitions = agent_definitions(script).add(
        weft.define_effect(name="ping", args=PingArgs, execute=ping)
    )
    async with weft.Worker(
        client,
        definitions,
        store=f"sqlite:///{tmp_path / 'weft.db'}",
        providers={"scripted": {"kind": "openai", "baseUrl": scripted_server.openai_base_url}},
        task_queue=f"tq-{uuid.uuid4().hex[:12]}",
    ) as running:
        thread = await weft.Thread.start(client, "helper", task_queue=running.task_queue)
        first = await thread.schedule_effect(
            "ping", {"text": "ping!"}, delay_ms=800, effect_id="p1"
        )
        again = await thread.schedule_effect(
            "ping", {"text": "ping!"}, delay_ms=800, effect_id="p1"
        )
        assert (first.id, first.status, again.status) == ("p1", "scheduled", "exists")
        later = await thread.schedule_effect("ping", {"text": "never"}, delay_ms=60_000)
        assert [e["id"] for e in await thread.effects()] == ["p1", later.id]
        assert await thread.remove_effect(later.id) is True
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await thread.schedule_effect("pong")
        assert "unknown effect 'pong'" in str(refused.value.cause)
        for _ in range(200):
            state = await thread.read()
            if state.counters.turns >= 1 and state.status == "waiting_input":
                break
            await asyncio.sleep(0.05)
        assert state.counters.turns == 1 and await thread.effects() == []
        assert running.store.values.get(thread.id, "pinged") == "ping!"
        await thread.terminate()
