"""Helpers of the fork and rewind tests: an agent whose tool writes a key and a file, and a
source thread with two finished turns."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel
from support import add_script, agent_definitions, idle_after, wait_until

from weft.client.threads import Threads
from weft.contract.events import Event
from weft.definitions import Definitions, define_tool
from weft.store import Store
from weft.workers.scripted_model import ScriptedModelServer


class JotArgs(BaseModel):
    """Arguments of the jot tool."""

    stage: str
    path: str
    text: str


async def jot(state: Any, args: JotArgs) -> str:
    """Records the stage in the key-value store and writes a file."""
    await state.set_value("stage", args.stage)
    await state.write_file(args.path, args.text)
    return f"jotted {args.stage}"


def jot_call(stage: str, path: str, text: str) -> dict[str, Any]:
    """A scripted turn: the model calls jot once, then answers."""
    return {
        "match": stage,
        "replies": [
            {
                "tool_calls": [
                    {"name": "jot", "arguments": {"stage": stage, "path": path, "text": text}}
                ]
            },
            {"text": f"did {stage}"},
        ],
    }


def jot_definitions(script: str) -> Definitions:
    """The test agent with the jot tool, on the scripted model `script`."""
    return agent_definitions(script, tools=["jot"]).add(
        define_tool(name="jot", description="Jot", args=JotArgs, execute=jot)
    )


def source_script(server: ScriptedModelServer) -> str:
    """Two jotting turns, then plain answers that name who speaks."""
    return add_script(
        server,
        {
            "turns": [
                jot_call("one", "/notes/a.txt", "v1"),
                jot_call("two", "/notes/b.txt", "v2"),
                {"match": "*", "replies": [{"text": "same model answers"}]},
            ]
        },
    )


async def two_turns(threads: Threads, store: Store, agent: str = "helper") -> str:
    """A source thread that ran turns "one" and "two"; returns its id."""
    handle = await threads.start(agent, messages=["one"])
    await wait_until(handle, idle_after(1))
    await threads.send(handle.id, "two")
    await wait_until(handle, idle_after(2))
    return handle.id


def turn_ends(store: Store, thread_id: str) -> list[Event]:
    """The source's turn.completed events, oldest first."""
    return store.events.read(thread_id, types=["turn.completed"])


def turn_id_of(event: Event) -> str:
    """The turn a stored turn event names."""
    assert event.turn_id is not None, f"{event.type} {event.event_id} names no turn"
    return event.turn_id


async def eventually(check: Callable[[], Any], *, timeout: float = 30.0) -> Any:
    """Poll `check` (a coroutine function) until it returns something truthy, or fail."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = await check()
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not true within {timeout} s")
        await asyncio.sleep(0.1)
