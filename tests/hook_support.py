"""Shared by the hook tests and the recorder: hooks that note what they saw in the thread's
key-value store, an agent on a scripted model that lists them, and event checks."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from support import CityArgs, NoteArgs, event_schema_validator, explode, note, weather

from weft.activities.tool_state import UpdateRefused
from weft.definitions import (
    Definitions,
    HookBlocked,
    define_agent,
    define_hook,
    define_model,
    define_prompt,
    define_tool,
)
from weft.store import Store


async def remember(state: Any, key: str, value: Any) -> None:
    """Append `value` to the list under `key` in the thread's key-value store."""
    seen = await state.get_value(key) or []
    await state.set_value(key, [*seen, value])


# ---- hooks that observe or reshape ------------------------------------------------------


async def thread_created(state: Any, data: dict[str, Any]) -> None:
    await remember(state, "after_thread_created", data)


async def subagent_created(state: Any, data: dict[str, Any]) -> None:
    await remember(state, "after_subagent_created", data)


def tag_system(state: Any, data: dict[str, Any]) -> str:
    """A sync hook (run in a worker thread): the system prompt gains a tag."""
    return f"{data['content']} [tagged {data['prompt']}]"


async def see_window(state: Any, data: list[dict[str, Any]]) -> None:
    await remember(state, "filter_messages", [m["role"] for m in data])


async def redact(state: Any, data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the provider gets says [redacted] where the stored message says secret."""
    await remember(state, "prefilter_llm_history", [m["role"] for m in data])
    return [
        {**m, "content": m["content"].replace("secret", "[redacted]")}
        if m["role"] == "user" and isinstance(m.get("content"), str)
        else m
        for m in data
    ]


def stamp(state: Any, data: dict[str, Any]) -> dict[str, Any]:
    """Every message is stored with metadata.stamped = its role."""
    return {**data, "metadata": {**data["metadata"], "stamped": data["role"]}}


async def created_log(state: Any, data: dict[str, Any]) -> None:
    await remember(
        state,
        "after_create_message",
        {"id": data["id"], "role": data["role"], "stamped": data["metadata"].get("stamped")},
    )


def audit_success(state: Any, data: dict[str, Any]) -> dict[str, Any]:
    return {**data["result"], "result": {"audited": True, "original": data["result"]["result"]}}


def soften_failure(state: Any, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": "error",
        "error": "the tool failed (details withheld)",
        "error_code": "hidden",
    }


async def store_log(state: Any, data: dict[str, Any]) -> None:
    result = data["result"]
    await remember(
        state,
        "before_store_tool_result",
        {
            "tool": data["toolCall"]["function"]["name"],
            "status": result["status"],
            "result": result.get("result"),
            "error": result.get("error"),
        },
    )


def upper_update(state: Any, data: dict[str, Any]) -> dict[str, Any] | None:
    update = data["update"]
    if "forbidden" in (update.get("content") or ""):
        raise HookBlocked("no forbidden edits")
    return {**update, "content": update["content"].upper()} if "content" in update else None


async def updated_log(state: Any, data: dict[str, Any]) -> None:
    await remember(state, "after_update_message", data["content"])


# ---- hooks that refuse, fail or break pairs ---------------------------------------------


def guard(state: Any, data: dict[str, Any]) -> None:
    """Refuses any message with the word `forbidden` in it."""
    if "forbidden" in (data.get("content") or ""):
        raise HookBlocked(f"a {data['role']} message may not say that")


def refuse_explosions(state: Any, data: dict[str, Any]) -> None:
    if data["toolCall"]["function"]["name"] == "explode":
        raise HookBlocked("explosions are not recorded")


def broken(state: Any, data: Any) -> Any:
    raise RuntimeError("hook bug")


def drop_results(state: Any, data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A filter that breaks pairs: every tool result goes."""
    return [m for m in data if m["role"] != "tool"]


def drop_calls(state: Any, data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A prefilter that breaks pairs: every assistant forgets its tool calls."""
    return [{k: v for k, v in m.items() if k != "tool_calls"} for m in data]


HOOKS = [
    define_hook(id="created_audit", hook="after_thread_created", execute=thread_created),
    define_hook(id="spawned_log", hook="after_subagent_created", execute=subagent_created),
    define_hook(id="system_tag", hook="after_system_message", execute=tag_system),
    define_hook(id="window_seen", hook="filter_messages", execute=see_window),
    define_hook(id="redact", hook="prefilter_llm_history", execute=redact),
    define_hook(id="stamp", hook="before_create_message", execute=stamp),
    define_hook(id="created_log", hook="after_create_message", execute=created_log),
    define_hook(id="success_audit", hook="after_tool_call_success", execute=audit_success),
    define_hook(id="failure_soften", hook="after_tool_call_failure", execute=soften_failure),
    define_hook(id="store_log", hook="before_store_tool_result", execute=store_log),
    define_hook(id="update_upper", hook="before_update_message", execute=upper_update),
    define_hook(id="updated_log", hook="after_update_message", execute=updated_log),
    define_hook(id="guard", hook="before_create_message", execute=guard),
    define_hook(id="refuse_explosions", hook="before_store_tool_result", execute=refuse_explosions),
    define_hook(id="broken_system", hook="after_system_message", execute=broken),
    define_hook(id="broken_filter", hook="filter_messages", execute=broken),
    define_hook(id="drop_results", hook="filter_messages", execute=drop_results),
    define_hook(id="drop_calls", hook="prefilter_llm_history", execute=drop_calls),
    define_hook(
        id="tag_agent", hook="after_system_message", execute=lambda s, d: d["content"] + " [agent]"
    ),
    define_hook(
        id="tag_prompt",
        hook="after_system_message",
        execute=lambda s, d: d["content"] + " [prompt]",
    ),
    define_hook(
        id="tag_unused",
        hook="after_system_message",
        execute=lambda s, d: d["content"] + " [unused]",
    ),
]


class EditArgs(BaseModel):
    """Arguments of the edit tool: the new text of the thread's first user message."""

    text: str
    then: str | None = None


async def edit_first(state: Any, args: EditArgs) -> dict[str, Any]:
    """Edits the first user message through ThreadState.update_message, twice if asked."""
    first = next(m for m in await state.get_messages() if m.role == "user")
    updated = await state.update_message(first.id, {"content": args.text})
    refused = None
    if args.then is not None:
        try:
            await state.update_message(first.id, {"content": args.then})
        except UpdateRefused as err:
            refused = str(err)
    try:
        await state.update_message(first.id, {"role": "assistant"})
        wrong_field = None
    except ValueError as err:
        wrong_field = str(err)
    return {"content": updated.content, "refused": refused, "wrongField": wrong_field}


def hook_definitions(
    script: str,
    *,
    agent_hooks: list[str],
    prompt_hooks: list[str] | None = None,
    agent: str = "helper",
) -> Definitions:
    """An ai_human agent on the scripted model `script`, the test tools, and every hook."""
    return Definitions().add(
        define_model(name="scripted", provider="scripted", model=script),
        define_prompt(
            name="helper_prompt",
            toolDescription="helps",
            model="scripted",
            prompt="You are a helpful agent.",
            tools=["weather", "note", "explode", "edit_first"],
            hooks=prompt_hooks,
        ),
        define_agent(name=agent, sideA={"prompt": "helper_prompt"}, hooks=agent_hooks),
        define_tool(
            name="weather", description="Weather for a city", args=CityArgs, execute=weather
        ),
        define_tool(name="note", description="Remember a note", args=NoteArgs, execute=note),
        define_tool(name="explode", description="Always fails", args=NoteArgs, execute=explode),
        define_tool(
            name="edit_first",
            description="Edit the first message",
            args=EditArgs,
            execute=edit_first,
        ),
        *HOOKS,
    )


def valid_events(store: Store, thread_id: str) -> list[dict[str, Any]]:
    """The thread's events as clients see them, each checked against the event schema."""
    validator = event_schema_validator()
    wire = [e.to_wire() for e in store.events.read(thread_id, limit=10_000)]
    for event in wire:
        errors = sorted(validator.iter_errors(event), key=lambda e: e.path)
        assert not errors, f"{event['type']} is invalid: {errors[0].message}"
    return wire


def hook_runs(events: list[dict[str, Any]], hook_id: str) -> list[dict[str, Any]]:
    """The end events (hook.completed / hook.failed) of one hook, in order."""
    return [
        e
        for e in events
        if e["type"] in ("hook.completed", "hook.failed") and e["payload"]["hookId"] == hook_id
    ]


def tool_message(store: Store, thread_id: str, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The last result message of tool `name`: (its decoded ToolResult, its metadata)."""
    found = [m for m in store.messages.list(thread_id) if m.role == "tool" and m.name == name]
    assert found, f"no {name} result in {thread_id}"
    return json.loads(found[-1].content or "{}"), found[-1].metadata
