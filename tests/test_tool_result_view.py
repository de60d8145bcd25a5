"""What the model reads of a tool result, checked on the wire (OpenAI and Anthropic): the
result as text, an error as its code and message; the store and events keep the envelope."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel
from support import (
    CityArgs,
    add_script,
    agent_definitions,
    event_schema_validator,
    idle_after,
    start_thread,
    wait_until,
)

from weft.contract.activities import ToolResult
from weft.definitions import Definitions, define_model, define_tool
from weft.workers.config import ProviderConfig

REPORT = "/reports/paris.txt"
SAID = 'It is "sunny"\nin Paris'
CALLS = [
    ("count", {}),
    ("say", {}),
    ("weather", {"city": "Paris"}),
    ("check_city", {"city": ""}),
    ("explode", {"text": "boom"}),
    ("write_report", {"city": "Paris"}),
]
# What the model must read for each call above, on either protocol.
SEEN = {
    "count": "3",
    "say": SAID,
    "weather": '{"city":"Paris","forecast":"sunny","celsius":21}',
    "check_city": 'Error (invalid_args): city must not be empty\n{"field":"city"}',
    "explode": "Error (tool_exception): RuntimeError: tool exploded on 'boom'",
    "write_report": '{"written":1}\n\n[attachments: /reports/paris.txt]',
}
# ... and what the store keeps: the envelope (the stack of `explode` is checked apart).
STORED = {
    "count": {"status": "success", "result": 3},
    "say": {"status": "success", "result": SAID},
    "weather": {
        "status": "success",
        "result": {"city": "Paris", "forecast": "sunny", "celsius": 21},
    },
    "check_city": {
        "status": "error",
        "error": "city must not be empty",
        "error_code": "invalid_args",
        "error_data": {"field": "city"},
    },
    "write_report": {"status": "success", "result": {"written": 1}, "attachments": [REPORT]},
}


class NoArgs(BaseModel):
    """No arguments."""


def count(state: Any, args: NoArgs) -> int:
    """A tool that returns a bare number."""
    return 3


def say(state: Any, args: NoArgs) -> str:
    """A tool that returns a string with quotes and a newline."""
    return SAID


def check_city(state: Any, args: CityArgs) -> ToolResult:
    """A tool that reports its own error, with a code and data."""
    return ToolResult(
        status="error",
        error="city must not be empty",
        error_code="invalid_args",
        error_data={"field": "city"},
    )


async def write_report(state: Any, args: CityArgs) -> ToolResult:
    """A tool that writes a file of the thread and attaches it to its result."""
    await state.write_file(REPORT, f"{args.city}: sunny\n")
    return ToolResult(status="success", result={"written": 1}, attachments=[REPORT])


def view_definitions(script: str, protocol: str, **agent_fields: Any) -> Definitions:
    """The test agent with the tools above, on the scripted model over `protocol`."""
    names = [name for name, _ in CALLS]
    definitions = agent_definitions(script, tools=[*names, "ask_human"], **agent_fields)
    definitions.add(
        define_tool(name="count", description="Three", args=NoArgs, execute=count),
        define_tool(name="say", description="Says", args=NoArgs, execute=say),
        define_tool(name="check_city", description="Checks", args=CityArgs, execute=check_city),
        define_tool(name="write_report", description="Writes", args=CityArgs, execute=write_report),
    )
    provider = "anthropic" if protocol == "anthropic" else "scripted"
    definitions.models["scripted"] = define_model(name="scripted", provider=provider, model=script)
    return definitions


def tool_texts(request: dict[str, Any]) -> dict[str, str]:
    """The tool results a recorded request carries, by tool name, as the model read them."""
    messages = request["messages"]
    if request["protocol"] == "anthropic":
        blocks = [b for m in messages if isinstance(m["content"], list) for b in m["content"]]
        names = {b["id"]: b["name"] for b in blocks if b.get("type") == "tool_use"}
        results = [b for b in blocks if b.get("type") == "tool_result"]
        return {names[b["tool_use_id"]]: b["content"] for b in results}
    names = {c["id"]: c["function"]["name"] for m in messages for c in m.get("tool_calls") or []}
    return {names[m["tool_call_id"]]: m["content"] for m in messages if m["role"] == "tool"}


def sent(scripted_server: Any, script: str) -> list[dict[str, Any]]:
    return [r for r in scripted_server.requests if r["model"] == script]


@pytest.fixture(params=["openai", "anthropic"])
def protocol(request: Any, weft_config: Any, scripted_server: Any) -> str:
    """Each test runs once per wire protocol of the scripted server."""
    weft_config.providers["anthropic"] = ProviderConfig(
        kind="anthropic", base_url=scripted_server.anthropic_base_url, api_key="test-key"
    )
    name: str = request.param
    return name


async def test_the_model_reads_results_as_text_and_errors_as_code_and_message(
    protocol, start_worker, temporal_client, scripted_server
):
    """A number, a string, an object, errors and attachments reach the model as text; the
    store keeps each envelope and the events are as before."""
    calls = [{"name": name, "arguments": args} for name, args in CALLS]
    script = add_script(
        scripted_server, {"replies": [{"tool_calls": calls}, {"text": "Paris is sunny."}]}
    )
    worker = await start_worker(view_definitions(script, protocol))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "Paris?"}]
    )
    state = await wait_until(handle, idle_after(1))
    assert state.last_outcome == "Paris is sunny.", state.incidents

    first, second = sent(scripted_server, script)
    assert first["protocol"] == second["protocol"] == protocol
    assert tool_texts(second) == SEEN
    assert '"status"' not in json.dumps(second["messages"])

    tools = [m for m in worker.store.messages.list(handle.id) if m.role == "tool"]
    stored = {m.name: json.loads(m.content or "") for m in tools}
    exploded = stored.pop("explode")
    assert stored == STORED
    assert exploded["error_code"] == "tool_exception" and "Traceback" in exploded["stack"]
    assert worker.store.files.read_file(handle.id, REPORT) == b"Paris: sunny\n"

    validator = event_schema_validator()
    events = [e.to_wire() for e in worker.store.events.read(handle.id, limit=1_000)]
    for event in events:
        validator.validate(event)
    done = {e["payload"]["name"]: e for e in events if e["type"] in ("tool.result", "tool.failed")}
    assert {name: e["type"] for name, e in done.items()} == {
        name: "tool.failed" if name in ("check_city", "explode") else "tool.result" for name in SEEN
    }
    assert done["check_city"]["payload"]["errorCode"] == "invalid_args"
    assert done["check_city"]["payload"]["error"] == "city must not be empty"
    assert {e["payload"]["status"] for e in done.values()} == {"success", "error"}
    await handle.signal("terminate", {})


ASK_AND_DENY = {
    "replies": [
        {"tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
        {"tool_calls": [{"name": "ask_human", "arguments": {"question": "Which city?"}}]},
        {"text": "Understood."},
    ]
}


async def test_a_permission_denial_and_a_declined_question_read_as_errors(
    protocol, start_worker, temporal_client, scripted_server
):
    """A tool a rule denies and an ask_human a person declines reach the model as
    `Error (code): message`; the store keeps each envelope."""
    script = add_script(scripted_server, ASK_AND_DENY)
    policy = {
        "mode": "auto",
        "rules": [{"tool": "weather", "decision": "deny", "reason": "not today"}],
    }
    worker = await start_worker(view_definitions(script, protocol, permissions=policy))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "Paris?"}]
    )
    state = await wait_until(handle, lambda s: bool(s.pending_actions))
    action = state.pending_actions[0]
    await handle.signal(
        "respond_action", {"actionId": action["actionId"], "decision": "deny", "reason": "private"}
    )
    state = await wait_until(handle, idle_after(1))
    assert state.last_outcome == "Understood.", state.incidents

    last = sent(scripted_server, script)[-1]
    assert tool_texts(last) == {
        "weather": "Error (permission_denied): permission denied for weather by agent rule 0: "
        "not today",
        "ask_human": "Error (declined): the human declined to answer: private",
    }
    stored = {
        m.name: json.loads(m.content or "")
        for m in worker.store.messages.list(handle.id)
        if m.role == "tool"
    }
    assert stored == {
        "weather": {
            "status": "error",
            "error": "permission denied for weather by agent rule 0: not today",
            "error_code": "permission_denied",
        },
        "ask_human": {
            "status": "error",
            "error": "the human declined to answer: private",
            "error_code": "declined",
        },
    }
    await handle.signal("terminate", {})
