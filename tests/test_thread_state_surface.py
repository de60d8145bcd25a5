"""The rest of ThreadState end to end: inject_message, delete_message, set_env, invoke_tool,
and the key-value store from a hook."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hook_support import valid_events
from pydantic import BaseModel
from sqlalchemy import text
from support import (
    NoteArgs,
    StartWorker,
    add_script,
    agent_definitions,
    idle_after,
    json_texts,
    run_histories,
    start_thread,
    store_of,
    wait_until,
)

from weft.activities.crypto import new_key, parse_keys
from weft.activities.thread_intents import IntentUnavailable
from weft.activities.tool_invoker import ToolInvocationUnavailable, ToolInvoker
from weft.contract.activities import ToolResult
from weft.contract.definitions import DefinitionSnapshot, ToolSpec
from weft.contract.messages import MessagePage
from weft.contract.thread import QUERY_MESSAGES, UPDATE_SUBMIT_TURN
from weft.definitions import (
    Definitions,
    define_agent,
    define_hook,
    define_model,
    define_prompt,
    define_tool,
)
from weft.transport.codec import EncryptionCodec
from weft.transport.connection import connect
from weft.workers.config import WeftConfig
from weft.workers.dev_server import DevServer
from weft.workers.scripted_model import ScriptedModelServer

SECRET = "sk-surface-5e1b7c93d2"
CITY = "Trondheim-text-env"


class Nothing(BaseModel):
    """A tool without arguments."""


class Level(BaseModel):
    """Arguments of the recursive tool."""

    level: int


# ---- tools ------------------------------------------------------------------------------


def inject_note(state: Any, args: NoteArgs) -> dict[str, Any]:
    """Injects a user message, and shows that a tool message is refused."""
    message_id = state.inject_message(args.text, metadata={"by": "inject_note"})
    try:
        state.inject_message("a fake result", role="tool")
        refused = None
    except ValueError as err:
        refused = str(err)
    return {"id": message_id, "toolRole": refused}


def stop_then_inject(state: Any, args: Nothing) -> str:
    """Terminates the thread, then injects: the injection comes too late."""
    state.terminate("enough")
    return str(state.inject_message("after the end"))


async def delete_weather(state: Any, args: Nothing) -> dict[str, Any]:
    """Deletes the earlier weather call (and so its result), after trying what is refused."""
    messages = await state.get_messages()
    caller = next(
        m for m in messages if m.tool_calls and m.tool_calls[0].function.name == "weather"
    )
    result = next(m for m in messages if m.role == "tool" and m.name == "weather")
    own = next(
        m
        for m in messages
        if m.tool_calls and any(c.id == state.tool_call_id for c in m.tool_calls)
    )
    refusals = []
    for target in (result.id, own.id):
        try:
            await state.delete_message(target)
        except ValueError as err:
            refusals.append(str(err))
    return {
        "deleted": await state.delete_message(caller.id),
        "again": await state.delete_message(caller.id),
        "unknown": await state.delete_message("msg_nope"),
        "gone": await state.get_message(result.id) is None,
        "refusals": refusals,
        "ids": [caller.id, result.id],
    }


async def set_secret(state: Any, args: Nothing) -> dict[str, Any]:
    """Sets a secret and a text value, and tries names and types that are refused."""
    await state.set_env("API_TOKEN", SECRET, type="secret")
    await state.set_env("CITY", CITY)
    errors = []
    for name, kind in (("bad name", "text"), ("OK", "password")):
        try:
            await state.set_env(name, "x", type=kind)
        except ValueError as err:
            errors.append(str(err))
    return {
        "seen": state.env("API_TOKEN") == SECRET,
        "type": state.env_type("API_TOKEN"),
        "city": state.env("CITY"),
        "errors": errors,
    }


def use_secret(state: Any, args: Nothing) -> dict[str, Any]:
    """A later tool call reads the values from the thread's env."""
    return {
        "authorised": state.env("API_TOKEN") == SECRET,
        "type": state.env_type("API_TOKEN"),
        "city": state.env("CITY"),
    }


async def orchestrate(state: Any, args: Nothing) -> dict[str, Any]:
    """Invokes tools the policy allows, denies and asks for, and ones that cannot run."""
    calls = {
        "allowed": ("weather", {"city": "Oslo"}),
        "denied": ("explode", {"text": "boom"}),
        "asks": ("note", {"text": "remember"}),
        "unknown": ("nope", {}),
        "badArgs": ("weather", {"town": 3}),
        "runtime": ("ask_human", {"question": "?"}),
        "nested": ("inject_note", {"text": "from an invoked tool"}),
        "recursive": ("recurse", {"level": 1}),
    }
    results = {}
    for label, (name, tool_args) in calls.items():
        result = await state.invoke_tool(name, tool_args)
        results[label] = result.model_dump(exclude_none=True, exclude={"stack"})
    return results


async def recurse(state: Any, args: Level) -> dict[str, Any]:
    """Invokes itself one level deeper, until invoke_tool refuses."""
    inner = await state.invoke_tool("recurse", {"level": args.level + 1})
    return {"level": args.level, "inner": inner.model_dump(exclude_none=True)}


async def read_hook_value(state: Any, args: Nothing) -> Any:
    """Leaves a value for the hook and reads the one the hook keeps."""
    await state.set_value("from_tool", "the tool wrote this")
    return await state.get_value("windows")


# ---- hooks ------------------------------------------------------------------------------


async def count_windows(state: Any, data: list[dict[str, Any]]) -> None:
    """A model.call hook: counts model calls in the key-value store, notes what the tool
    left there, and records what ThreadState refuses to a hook outside tool.call."""
    count = await state.get_value("windows") or 0
    await state.set_value("windows", count + 1)
    seen = await state.get_value("from_tool")
    if seen is not None:
        await state.set_value("hook_saw", seen)
    if count == 0:
        errors = []
        for attempt in (
            lambda: state.inject_message("from a hook"),
            lambda: state.set_env("FROM_HOOK", "x"),
            lambda: state.delete_message("msg_any"),
            lambda: state.invoke_tool("weather", {"city": "Oslo"}),
        ):
            try:
                result = attempt()
                if hasattr(result, "__await__"):
                    await result
            except (IntentUnavailable, ToolInvocationUnavailable) as err:
                errors.append(f"{type(err).__name__}: {err}")
        await state.set_value("hook_errors", errors)


TOOLS = [
    define_tool(name="inject_note", description="Inject", args=NoteArgs, execute=inject_note),
    define_tool(
        name="stop_then_inject", description="Stop", args=Nothing, execute=stop_then_inject
    ),
    define_tool(name="delete_weather", description="Delete", args=Nothing, execute=delete_weather),
    define_tool(name="orchestrate", description="Invoke", args=Nothing, execute=orchestrate),
    define_tool(name="recurse", description="Recurse", args=Level, execute=recurse),
    define_tool(name="read_hook_value", description="Read", args=Nothing, execute=read_hook_value),
    define_tool(name="set_secret", description="Set", args=Nothing, execute=set_secret),
    define_tool(name="use_secret", description="Use", args=Nothing, execute=use_secret),
]
TOOL_NAMES = ["weather", "note", "explode", "ask_human", *(t.name for t in TOOLS)]


def surface_definitions(script: str, **agent_fields: Any) -> Definitions:
    """The test agent with every tool of this module."""
    return agent_definitions(script, tools=TOOL_NAMES, **agent_fields).add(
        *TOOLS, define_hook(id="count_windows", hook="filter_messages", execute=count_windows)
    )


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def tool_results(store: Any, thread_id: str, name: str) -> list[dict[str, Any]]:
    return [
        json.loads(m.content)
        for m in store.messages.list(thread_id)
        if m.role == "tool" and m.name == name
    ]


def sent(scripted_server: Any, script: str) -> list[dict[str, Any]]:
    return [r for r in scripted_server.requests if r["model"] == script]


# ---- inject_message ---------------------------------------------------------------------


async def test_inject_message_adds_a_message_without_a_turn(
    start_worker, temporal_client, scripted_server
):
    """An injected message lands after the step's tool results, the model reads it at its
    next call, and no turn starts because of it."""
    script = add_script(
        scripted_server,
        {
            "turns": [
                # The injected message is the last user message the model sees next.
                {"match": "remember the blue door", "replies": [{"text": "Noted."}]},
                {
                    "match": "*",
                    "replies": [
                        {
                            "tool_calls": [
                                call("inject_note", text="remember the blue door"),
                                call("weather", city="Oslo"),
                            ]
                        }
                    ],
                },
            ]
        },
    )
    worker = await start_worker(surface_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    state = await wait_until(handle, idle_after(1))
    store = worker.store
    [result] = tool_results(store, handle.id, "inject_note")
    assert "role must be user, assistant or system, not 'tool'" in result["result"]["toolRole"]
    assert "must answer a tool call" in result["result"]["toolRole"]
    messages = store.messages.list(handle.id)
    assert [(m.role, m.name) for m in messages] == [
        ("user", None),
        ("assistant", None),
        ("tool", "inject_note"),
        ("tool", "weather"),
        ("user", None),
        ("assistant", None),
    ]
    injected = messages[4]
    assert injected.id == result["result"]["id"]
    assert (injected.content, injected.metadata) == (
        "remember the blue door",
        {"by": "inject_note"},
    )
    assert [m.position for m in messages] == sorted(m.position for m in messages)
    # The model's next call in the same turn read it; nothing else ran.
    requests = sent(scripted_server, script)
    assert len(requests) == 2 and state.counters.turns == 1
    assert requests[1]["messages"][-1] == {"role": "user", "content": "remember the blue door"}
    events = valid_events(store, handle.id)
    [placed] = [e for e in events if e["payload"].get("change") == "message.injected"]
    assert placed["payload"]["messageId"] == injected.id
    assert placed["turnId"] == injected.turn_id


async def test_inject_message_after_terminate_is_refused_with_a_warning(
    start_worker, temporal_client, scripted_server
):
    """A message injected after terminate (in the same tool) is not written; a warning says why."""
    script = add_script(scripted_server, {"replies": [{"tool_calls": [call("stop_then_inject")]}]})
    worker = await start_worker(surface_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "stop"}]
    )
    await handle.result()
    store = worker.store
    [result] = tool_results(store, handle.id, "stop_then_inject")
    assert store.messages.get(handle.id, result["result"]) is None
    warnings = [e.payload for e in store.events.read(handle.id) if e.type == "runtime.warning"]
    assert any(
        w["code"] == "after_terminate" and "inject_message intent ignored" in w["message"]
        for w in warnings
    ), warnings


# ---- delete_message ---------------------------------------------------------------------


async def test_delete_message_removes_the_call_and_its_results(
    start_worker, temporal_client, scripted_server
):
    """Deleting an assistant message deletes its tool results with it, in the store and the
    workflow's index; a lone result and the running call's message are refused."""
    script = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "forget",
                    "replies": [{"tool_calls": [call("delete_weather")]}, {"text": "Forgotten."}],
                },
                {
                    "match": "*",
                    "replies": [{"tool_calls": [call("weather", city="Oslo")]}, {"text": "Sunny."}],
                },
            ]
        },
    )
    worker = await start_worker(surface_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "weather?"}]
    )
    await wait_until(handle, idle_after(1))
    await handle.execute_update(UPDATE_SUBMIT_TURN, {"role": "user", "content": "forget it"})
    await wait_until(handle, idle_after(2))
    store = worker.store
    [outcome] = tool_results(store, handle.id, "delete_weather")
    done = outcome["result"]
    assert (done["deleted"], done["again"], done["unknown"], done["gone"]) == (
        True,
        False,
        False,
        True,
    )
    alone, running = done["refusals"]
    assert "delete the assistant message" in alone and done["ids"][0] in alone
    assert "is running now" in running
    caller_id, result_id = done["ids"]
    stored = {m.id for m in store.messages.list(handle.id)}
    assert caller_id not in stored and result_id not in stored
    page = await handle.query(QUERY_MESSAGES, {"limit": 100}, result_type=MessagePage)
    assert {caller_id, result_id}.isdisjoint(m.id for m in page.messages)
    assert len(page.messages) == len(stored)
    last = sent(scripted_server, script)[-1]
    assert "Oslo" not in json.dumps(last["messages"])
    assert [m["role"] for m in last["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
    ]
    events = valid_events(store, handle.id)
    [deleted] = [e for e in events if e["payload"].get("change") == "message.deleted"]
    assert deleted["type"] == "artifact.changed"
    assert deleted["payload"]["messageIds"] == [caller_id, result_id]


# ---- set_env ----------------------------------------------------------------------------


def secret_definitions(script: str) -> Definitions:
    """An agent whose prompt shows the env values API_TOKEN and CITY."""
    return Definitions().add(
        define_model(name="scripted", provider="scripted", model=script),
        define_prompt(
            name="env_prompt",
            toolDescription="uses env",
            model="scripted",
            prompt=[
                {"type": "text", "content": "Token: "},
                {"type": "env", "property": "API_TOKEN"},
                {"type": "text", "content": " City: "},
                {"type": "env", "property": "CITY"},
            ],
            tools=["set_secret", "use_secret"],
        ),
        define_agent(name="env_agent", sideA={"prompt": "env_prompt"}),
        *(t for t in TOOLS if t.name in ("set_secret", "use_secret")),
    )


async def test_set_env_secret_is_sealed_and_never_in_history(
    start_worker: StartWorker,
    weft_config: WeftConfig,
    dev_server: DevServer,
    scripted_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:
    """A secret set by a tool is seen at once and by later calls, never by the model, is
    sealed in the store and absent from every run's history (it is carried encrypted)."""
    keys = f"k1:{new_key()}"
    weft_config.codec.keys = keys
    keyring = parse_keys([keys], source="test")
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [call("set_secret")]},
                {"tool_calls": [call("use_secret")]},
                {"text": "Done."},
            ]
        },
    )
    worker = await start_worker(secret_definitions(script))
    client = await connect(dev_server.address, keyring=keyring)
    handle = await start_thread(
        client,
        worker.task_queue,
        agent="env_agent",
        messages=[{"role": "user", "content": "set it"}],
        options={"continueAsNewEvents": 20},
    )
    await wait_until(handle, idle_after(1))
    store = store_of(worker)
    [first] = tool_results(store, handle.id, "set_secret")
    assert first["result"]["seen"] is True and first["result"]["type"] == "secret"
    assert first["result"]["city"] == CITY
    name_error, type_error = first["result"]["errors"]
    assert "env name 'bad name' is not valid" in name_error
    assert "type must be text or secret, not 'password'" in type_error
    [later] = tool_results(store, handle.id, "use_secret")
    assert later["result"] == {"authorised": True, "type": "secret", "city": CITY}
    # The model sees the text value once it is set, and the secret never.
    requests = sent(scripted_server, script)
    assert SECRET not in json.dumps(requests)
    assert "[env CITY is not set]" in requests[0]["messages"][0]["content"]
    assert f"[env API_TOKEN is secret] City: {CITY}" in requests[1]["messages"][0]["content"]
    # The event names the variable, never its value.
    events = valid_events(store, handle.id)
    set_events = [e["payload"]["envSet"] for e in events if "envSet" in e["payload"]]
    assert set_events == [{"name": "API_TOKEN", "type": "secret"}, {"name": "CITY", "type": "text"}]
    assert SECRET not in json.dumps(events)
    # Sealed in the store: the raw column holds an envelope, no database file the secret.
    with store.engine.connect() as connection:
        column = connection.scalar(
            text("SELECT env FROM threads WHERE thread_id = :id"), {"id": handle.id}
        )
    assert "$weftEncrypted" in str(column) and SECRET not in str(column)
    for file in tmp_path.glob("weft.db*"):
        assert SECRET.encode() not in file.read_bytes(), file
    # The thread continued as new, carrying the value in its encrypted start input.
    latest = client.get_workflow_handle(handle.id)
    await wait_until(latest, lambda s: s.counters.runs >= 2)
    histories = await run_histories(client, handle.id, handle.result_run_id or "")
    assert len(histories) >= 2
    for history in histories:
        assert not any(SECRET in t for t in json_texts(json.loads(history.to_json())))
    started = histories[1].events[0].workflow_execution_started_event_attributes
    [opened] = await EncryptionCodec(keyring).decode(list(started.input.payloads))
    carried = json.loads(opened.data)
    assert carried["env"]["API_TOKEN"] == {"value": SECRET, "type": "secret"}


# ---- invoke_tool ------------------------------------------------------------------------


POLICY = {
    "mode": "auto",
    "rules": [
        {"tool": "explode", "decision": "deny", "reason": "too loud"},
        {"tool": "note", "decision": "ask"},
    ],
}


async def test_invoke_tool_runs_function_tools_through_the_policy(
    start_worker, temporal_client, scripted_server
):
    """invoke_tool runs an allowed tool now; a deny, an ask, an unknown or runtime tool and
    bad arguments come back as error results; intents of invoked tools join the caller's."""
    script = add_script(
        scripted_server,
        {
            "turns": [
                {"match": "from an invoked tool", "replies": [{"text": "Orchestrated."}]},
                {"match": "*", "replies": [{"tool_calls": [call("orchestrate")]}]},
            ]
        },
    )
    worker = await start_worker(surface_definitions(script, permissions=POLICY))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    await wait_until(handle, idle_after(1))
    store = worker.store
    [outcome] = tool_results(store, handle.id, "orchestrate")
    got = outcome["result"]
    assert got["allowed"] == {
        "status": "success",
        "result": {"city": "Oslo", "forecast": "sunny", "celsius": 21},
    }
    assert got["denied"]["error_code"] == "permission_denied"
    assert "explode by agent rule 0: too loud" in got["denied"]["error"]
    assert got["asks"]["error_code"] == "permission_required"
    assert (
        "needs a human's approval" in got["asks"]["error"] and "queue_tool" in got["asks"]["error"]
    )
    assert got["unknown"]["error_code"] == "unknown_tool"
    assert "function tools here: " in got["unknown"]["error"]
    assert "weather" in got["unknown"]["error"] and "ask_human" not in got["unknown"]["error"]
    assert got["badArgs"]["error_code"] == "invalid_arguments"
    assert "city" in got["badArgs"]["error"]
    assert got["runtime"]["error_code"] == "tool_not_invokable"
    assert got["nested"]["status"] == "success"
    # The invoked tool's intent joined the caller's: its message is in the transcript.
    injected = [m for m in store.messages.list(handle.id) if m.content == "from an invoked tool"]
    assert len(injected) == 1 and injected[0].id == got["nested"]["result"]["id"]
    # Four levels deep, then refused.
    chain, levels = got["recursive"], []
    while chain["status"] == "success":
        levels.append(chain["result"]["level"])
        chain = chain["result"]["inner"]
    assert levels == [1, 2, 3, 4]
    assert chain["error_code"] == "invoke_depth_exceeded"
    # Each invocation is recorded, naming its caller.
    events = valid_events(store, handle.id)
    invoked = [e for e in events if e["type"].startswith("tool.") and "invokedBy" in e["payload"]]
    caller_call = next(m for m in store.messages.list(handle.id) if m.name == "orchestrate")
    top = [e for e in invoked if e["payload"]["invokedBy"]["tool"] == "orchestrate"]
    assert len([e for e in top if e["type"] == "tool.started"]) == 8
    assert all(e["payload"]["invokedBy"]["toolCallId"] == caller_call.tool_call_id for e in top)
    [denied] = [e for e in top if e["type"] == "tool.failed" and e["payload"]["name"] == "explode"]
    assert denied["payload"]["errorCode"] == "permission_denied"
    verdicts = [e["payload"] for e in events if e["type"] == "permission.evaluated"]
    assert any(v["toolName"] == "explode" and v["decision"] == "deny" for v in verdicts)


def test_invoke_tool_refuses_agent_and_prompt_tools_by_name():
    """Subagent, handoff and prompt tools are the workflow's: the refusal says which."""
    definitions = agent_definitions("unused")
    snapshot = definitions.snapshot("helper")
    tools = {
        **snapshot.tools,
        "researcher": ToolSpec(name="researcher", description="", parameters={}, kind="subagent"),
        "summarise": ToolSpec(name="summarise", description="", parameters={}, kind="prompt"),
    }
    invoker = ToolInvoker(
        definitions=definitions,
        snapshot=DefinitionSnapshot.model_validate({**snapshot.model_dump(), "tools": tools}),
        prompt=snapshot.prompts["helper_prompt"],
        running_call_id="call_1",
        tool="orchestrate",
    )
    subagent, prompt = invoker.resolve("researcher"), invoker.resolve("summarise")
    assert isinstance(subagent, ToolResult) and isinstance(prompt, ToolResult)
    assert subagent.error_code == prompt.error_code == "tool_not_invokable"
    assert "'researcher' is a subagent tool" in (subagent.error or "")
    assert "'summarise' is a prompt tool" in (prompt.error or "")
    assert "function tools here: explode, note, weather" in (prompt.error or "")
    assert invoker.resolve("weather") is definitions.tools["weather"]


# ---- the key-value store from a hook ----------------------------------------------------


async def test_a_hook_reaches_get_value_and_set_value(
    start_worker, temporal_client, scripted_server
):
    """A model.call hook reads and writes the thread's key-value store (a tool sees its
    writes and it sees the tool's); intents and invoke_tool are refused there, clearly."""
    script = add_script(
        scripted_server,
        {"replies": [{"tool_calls": [call("read_hook_value")]}, {"text": "Read."}]},
    )
    worker = await start_worker(surface_definitions(script, hooks=["count_windows"]))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    await wait_until(handle, idle_after(1))
    store = worker.store
    [outcome] = tool_results(store, handle.id, "read_hook_value")
    assert outcome["result"] == 1  # the hook ran once before the first model call
    assert store.values.get(handle.id, "windows") == 2
    assert store.values.get(handle.id, "hook_saw") == "the tool wrote this"
    errors = store.values.get(handle.id, "hook_errors")
    assert [e.split(":")[0] for e in errors] == [
        "IntentUnavailable",
        "IntentUnavailable",
        "IntentUnavailable",
        "ToolInvocationUnavailable",
    ]
    assert all("not available to hooks in model.call" in e for e in errors[:3])
    assert "invoke_tool" in errors[3] and "model.call" in errors[3]
