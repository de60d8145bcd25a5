"""Shared by the subagent tests: a parent agent and a dual_ai child on scripted models,
their tools, and helpers to start the parent and read tool results."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from support import CityArgs, add_script, weather

from weft.definitions import (
    Definitions,
    define_agent,
    define_model,
    define_prompt,
    define_tool,
)
from weft.store import Store
from weft.workers.scripted_model import ScriptedModelServer


def family(
    parent_script: str,
    child_script: str,
    critic_script: str | None = None,
    *,
    subagent: dict[str, Any] | None = None,
    child: dict[str, Any] | None = None,
    parent_tools: list[Any] | None = None,
    extra: list[Any] | None = None,
) -> Definitions:
    """`boss` (ai_human) whose prompt lists the `researcher` subagent (dual_ai).

    The researcher's side A ends its session with `report` (summary, files); side B is a
    critic on its own model. `subagent` is the tool entry's config; `child` overrides
    fields of the researcher agent.
    """
    entry = {"name": "researcher", **(subagent or {})}
    return Definitions().add(
        define_model(
            name="boss_model",
            provider="scripted",
            model=parent_script,
            inputPrice=1.0,
            outputPrice=2.0,
        ),
        define_model(
            name="child_model",
            provider="scripted",
            model=child_script,
            inputPrice=1.0,
            outputPrice=2.0,
        ),
        define_model(name="critic_model", provider="scripted", model=critic_script or child_script),
        define_prompt(
            name="boss_prompt",
            toolDescription="leads",
            model="boss_model",
            prompt="You lead a team.",
            tools=parent_tools if parent_tools is not None else [entry],
        ),
        define_prompt(
            name="researcher_prompt",
            toolDescription="researches",
            model="child_model",
            prompt="You research.",
            tools=["weather", "escalate"],
        ),
        define_prompt(
            name="critic_prompt",
            toolDescription="critiques",
            model="critic_model",
            prompt="You critique.",
        ),
        define_agent(name="boss", sideA={"prompt": "boss_prompt"}),
        define_agent(
            **{
                "name": "researcher",
                "type": "dual_ai",
                "exposeAsTool": True,
                "toolDescription": "Researches a question and reports back.",
                "maxSessionTurns": 3,
                "sideA": {
                    "prompt": "researcher_prompt",
                    "sessionStop": {
                        "name": "report",
                        "messageProperty": "summary",
                        "attachmentsProperty": "files",
                    },
                    "sessionFail": {"name": "give_up", "messageProperty": "why"},
                    "sessionStatus": {"name": "progress", "messageProperty": "note"},
                },
                "sideB": {"prompt": "critic_prompt"},
                **(child or {}),
            }
        ),
        define_tool(
            name="weather", description="Weather for a city", args=CityArgs, execute=weather
        ),
        define_tool(
            name="escalate", description="Tell the parent", args=TextArgs, execute=escalate
        ),
        *(extra or []),
    )


class TextArgs(BaseModel):
    """Arguments of the escalate tool."""

    text: str


def escalate(state: Any, args: TextArgs) -> str:
    """A child's tool that reaches its parent explicitly (Runtime §8.2)."""
    state.notify_parent(args.text)
    state.set_status("escalated")
    return "parent notified"


BRIEF = bytes(range(256)) * 40  # binary, every byte value
RESULT = b"\x00result\xffbytes" * 100


class PathArgs(BaseModel):
    """A path in the thread's filesystem."""

    path: str


async def write_brief(state: Any, args: PathArgs) -> str:
    """The parent writes the file it hands to its subagent."""
    await state.write_file(args.path, BRIEF)
    return args.path


async def inspect_brief(state: Any, args: PathArgs) -> dict[str, Any]:
    """The child checks the copied bytes and writes a file for its parent."""
    data = await state.read_file(args.path)
    await state.write_file("/attachments/result.bin", RESULT)
    return {"same": data == BRIEF, "size": len(data)}


def file_tools() -> list[Any]:
    return [
        define_tool(name="write_brief", description="Write", args=PathArgs, execute=write_brief),
        define_tool(
            name="inspect_brief", description="Check", args=PathArgs, execute=inspect_brief
        ),
    ]


class NoArgs(BaseModel):
    """No arguments."""


def check_token(state: Any, args: NoArgs) -> dict[str, Any]:
    """A child's tool that uses a scoped secret without ever showing it."""
    return {"matches": state.env("API_TOKEN") == SCOPED_SECRET, "type": state.env_type("API_TOKEN")}


SCOPED_SECRET = "s3cret-scoped-value-7781"


async def start_boss(client: Any, worker: Any, text: str = "go", **fields: Any) -> Any:
    """Start a `boss` thread on `worker` with one user message."""
    from support import start_thread

    return await start_thread(
        client,
        worker.task_queue,
        agent="boss",
        messages=[{"role": "user", "content": text}],
        **fields,
    )


async def look_around(state: Any, args: NoArgs) -> dict[str, Any]:
    """Reads the registry and the parent through ThreadState (Runtime §7.1)."""
    children = await state.children()
    first = await state.get_child_thread(children[0]["name"]) if children else None
    parent = await state.get_parent_thread()
    return {
        "children": [{"name": c["name"], "status": c["status"]} for c in children],
        "child_thread_agent": first["thread"]["agent"] if first and first.get("thread") else None,
        "parent": parent["threadId"] if parent else None,
        "arguments": await state.arguments(),
    }


def tool_result(store: Store, thread_id: str, name: str) -> dict[str, Any]:
    """The last result of tool `name` in the thread, decoded from its tool message."""
    found = [m for m in store.messages.list(thread_id) if m.role == "tool" and m.name == name]
    assert found, f"no {name} tool result in {thread_id}"
    result: dict[str, Any] = json.loads(found[-1].content or "")
    return result


def delegate_then_acknowledge(
    scripted_server: ScriptedModelServer, task: str, acknowledgement: str
) -> str:
    """A parent script: call the researcher with `task`, say "started", and answer the
    child's queued completion with `acknowledgement`."""
    return add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "go",
                    "replies": [
                        {"tool_calls": [{"name": "researcher", "arguments": {"message": task}}]},
                        {"text": "started"},
                    ],
                },
                {"match": "completed:", "replies": [{"text": acknowledgement}]},
            ]
        },
    )
