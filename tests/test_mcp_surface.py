"""The user-facing surface of MCP tools on a real stack: `refresh_tools` from Python
(`Threads`, `weft.Thread`), HTTP and the CLI, and an elicitation action listed, refused
and answered over HTTP and from the CLI.

The threads here define no MCP server, so a refresh naming a server is refused by the
thread with a `runtime.warning` (`unknown_mcp_server`): that proves the signal arrived and
was validated. An elicitation is made by sending the `mcp_elicitation` signal the
`tool.call` activity sends, to a thread whose turn waits on an ask_human question (a turn
that cannot end by itself)."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from api_support import ApiStack, api_stack, idle, read_until, send_elicitation
from pydantic import ValidationError
from support import add_script, agent_definitions, wait_until, weft_cli

import weft
from weft.api.idempotency import REPLAYED_HEADER
from weft.contract.mcp import QUERY_MCP_ELICITATION
from weft.store import Store

ASK_THEN_REPLY = {
    "turns": [
        {
            "match": "book a trip",
            "replies": [
                {"tool_calls": [{"name": "ask_human", "arguments": {"question": "When?"}}]},
                {"text": "Booked."},
            ],
        },
        {"match": "*", "replies": [{"text": "hi"}]},
    ]
}
SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "nights": {"type": "integer"},
        "insured": {"type": "boolean"},
        "class": {"type": "string", "enum": ["economy", "business"]},
    },
    "required": ["city", "nights"],
}


def _unknown_server_warnings(read: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in read["incidents"] if i["code"] == "unknown_mcp_server"]


async def _start(stack: ApiStack, first: str) -> str:
    reply = await stack.http.post("/threads", json={"agent": "helper", "messages": [first]})
    assert reply.status_code == 201, reply.text
    thread_id: str = reply.json()["threadId"]
    return thread_id


def _cli_config(tmp_path: Path, weft_config: Any, task_queue: str) -> Path:
    path = tmp_path / "cli.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": task_queue}
    path.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )
    return path


async def test_refresh_tools_from_python_reaches_the_thread(
    start_worker, temporal_client, weft_config, scripted_server
):
    """`Threads.refresh_tools` and `weft.Thread.refresh_tools` reach the thread: an
    unknown server is one `unknown_mcp_server` warning naming it, a refresh of all servers
    of a thread with none is a no-op, and a bad list fails the caller before sending."""
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, ASK_THEN_REPLY), tools=["ask_human"])
    )
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        thread_id = await _start(stack, "hello")
        await read_until(stack, thread_id, idle(1))
        thread = weft.Thread(temporal_client, thread_id, task_queue=worker.task_queue)

        await thread.refresh_tools()  # all of none: nothing to list, nothing to warn
        await stack.ctx.threads.refresh_tools(thread_id, ["nope"])
        read = await read_until(stack, thread_id, lambda r: r["warnings"] >= 1)
        [warning] = _unknown_server_warnings(read)
        assert "'nope'" in warning["message"] and "(none)" in warning["message"]
        assert warning["signal"] == "refresh_tools" and read["warnings"] == 1

        await thread.refresh_tools(["also-nope", "nope"])
        read = await read_until(stack, thread_id, lambda r: r["warnings"] >= 2)
        assert "'also-nope', 'nope'" in _unknown_server_warnings(read)[-1]["message"]

        with pytest.raises(ValidationError, match="servers"):
            await stack.ctx.threads.refresh_tools(thread_id, [7])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="list of names"):
            await thread.refresh_tools("nope")
        assert (await thread.read()).warnings == 2  # the refused lists were never sent
        await stack.ctx.threads.terminate(thread_id)
        await stack.ctx.threads.result(thread_id)
        events = _events(stack.store, thread_id, "runtime.warning")
        assert [e.payload["code"] for e in events] == ["unknown_mcp_server"] * 2
        assert not _events(stack.store, thread_id, "tool.catalog.resolved")


async def test_refresh_tools_over_http(start_worker, temporal_client, weft_config, scripted_server):
    """`POST /threads/{id}/tools/refresh` answers 202 with the servers named (null for
    all), replays a retried key without signalling again, refuses a malformed body with a
    422 naming the field, and follows the 404/409 rules of the other control routes."""
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, ASK_THEN_REPLY), tools=["ask_human"])
    )
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        thread_id = await _start(stack, "hello")
        await read_until(stack, thread_id, idle(1))
        path = f"/threads/{thread_id}/tools/refresh"

        bare = await stack.http.post(path)
        assert bare.status_code == 202, bare.text
        assert bare.json() == {"threadId": thread_id, "refreshRequested": None}
        empty = await stack.http.post(path, json={})
        assert empty.status_code == 202 and empty.json()["refreshRequested"] is None

        key = {"Idempotency-Key": f"refresh-{uuid.uuid4()}"}
        named = await stack.http.post(path, json={"servers": ["nope"]}, headers=key)
        assert named.status_code == 202, named.text
        assert named.json() == {"threadId": thread_id, "refreshRequested": ["nope"]}
        replay = await stack.http.post(path, json={"servers": ["nope"]}, headers=key)
        assert replay.status_code == 202 and replay.headers[REPLAYED_HEADER] == "true"
        read = await read_until(stack, thread_id, lambda r: r["warnings"] >= 1)
        assert "'nope'" in _unknown_server_warnings(read)[0]["message"]

        for body, field in [
            ({"servers": "nope"}, "servers"),
            ({"servers": [1]}, "servers.0"),
            ({"servers": ["fs.read"]}, "servers.0"),
            ({"servers": ["x"] * 101}, "servers"),
            ({"server": ["nope"]}, "server"),
        ]:
            reply = await stack.http.post(path, json=body)
            assert reply.status_code == 422 and reply.json()["fields"] == [field], reply.text
        # Only the first keyed request signalled: one warning, none from the 422s.
        assert (await stack.ctx.threads.read(thread_id)).warnings == 1
        schema = (await stack.http.get("/openapi.json")).json()
        assert "/threads/{thread_id}/tools/refresh" in schema["paths"]

        missing = await stack.http.post(f"/threads/thread-{uuid.uuid4().hex}/tools/refresh")
        assert missing.status_code == 404, missing.text
        await stack.ctx.threads.terminate(thread_id)
        await stack.ctx.threads.result(thread_id)
        closed = await stack.http.post(path, json={"servers": ["nope"]})
        assert closed.status_code == 409 and "closed" in closed.json()["error"]


async def test_refresh_tools_from_the_cli(
    start_worker, temporal_client, weft_config, scripted_server, tmp_path
):
    """`weft thread refresh-tools ID --server NAME` sends the signal (the thread warns of
    the unknown servers), and an unknown or closed thread is one line and exit 1."""
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, ASK_THEN_REPLY), tools=["ask_human"])
    )
    config = _cli_config(tmp_path, weft_config, worker.task_queue)
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        thread_id = await _start(stack, "hello")
        await read_until(stack, thread_id, idle(1))
        code, out, err = await weft_cli(config, "thread", "refresh-tools", thread_id)
        assert (
            code == 0 and out.strip() == f"tool refresh requested for {thread_id} (all MCP servers)"
        )
        code, out, err = await weft_cli(
            config, "thread", "refresh-tools", thread_id, "--server", "nope", "--server", "zip"
        )
        assert code == 0, err
        assert out.strip() == f"tool refresh requested for {thread_id} (nope, zip)"
        read = await read_until(stack, thread_id, lambda r: r["warnings"] >= 1)
        assert "'nope', 'zip'" in _unknown_server_warnings(read)[0]["message"]
        assert read["warnings"] == 1

        await stack.ctx.threads.terminate(thread_id)
        await stack.ctx.threads.result(thread_id)
        for target, expected in [
            (thread_id, f"thread '{thread_id}' is closed (terminated)"),
            ("nope-thread", "thread 'nope-thread' not found"),
        ]:
            code, _, err = await weft_cli(config, "thread", "refresh-tools", target)
            assert code == 1 and "Traceback" not in err, err
            [line] = err.strip().splitlines()
            assert line == f"weft: {expected}", line


async def test_an_elicitation_is_listed_refused_and_answered(
    start_worker, temporal_client, weft_config, scripted_server, tmp_path
):
    """An elicitation action is listed by `GET /threads?awaiting=elicitation` and `weft
    inbox` (its fields, `*` when required); an answer that does not fit its schema is a 422
    naming the field; `weft thread respond --answer-json` answers it and a deny over HTTP
    declines another, which the waiting activity reads as accept (with content) and
    decline."""
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, ASK_THEN_REPLY), tools=["ask_human"])
    )
    config = _cli_config(tmp_path, weft_config, worker.task_queue)
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        thread_id = await _start(stack, "book a trip")
        read = await read_until(stack, thread_id, lambda r: bool(r["pendingActions"]))
        [question] = read["pendingActions"]
        action_id = await send_elicitation(
            stack, thread_id, question["turnId"], message="Where to?", schema=SCHEMA
        )
        read = await read_until(stack, thread_id, lambda r: len(r["pendingActions"]) == 2)
        [action] = [a for a in read["pendingActions"] if a["kind"] == "elicitation"]
        assert action["prompt"] == "Where to?" and action["decisions"] == ["answer", "deny"]
        assert action["args"] == {"server": "travel", "requestedSchema": SCHEMA}

        for _ in range(150):  # visibility is eventually consistent
            listed = (await stack.http.get("/threads", params={"awaiting": "elicitation"})).json()
            if any(t["threadId"] == thread_id for t in listed["threads"]):
                break
            await asyncio.sleep(0.2)
        [summary] = [t for t in listed["threads"] if t["threadId"] == thread_id]
        assert summary["awaitingAction"] == "elicitation"
        code, out, err = await weft_cli(config, "inbox", "--kind", "elicitation")
        assert code == 0, err
        [line] = [row for row in out.splitlines() if row.startswith(thread_id)]
        assert line.split("\t") == [
            thread_id,
            "helper",
            "elicitation",
            action_id,
            "MCP travel (in book_trip) asks: Where to? "
            "[city*: string, nights*: integer, insured: boolean, class: economy|business]",
        ]

        answer_path = f"/threads/{thread_id}/actions/{action_id}"
        for answer, fragment in [
            ({"city": "Oslo"}, "'nights' is required"),
            ({"city": "Oslo", "nights": "3"}, "'nights' must be of type integer"),
            ({"city": "Oslo", "nights": 3, "class": "first"}, "'class' must be one of"),
            ({"city": "Oslo", "nights": 3, "pets": 1}, "'pets' was not asked for"),
        ]:
            reply = await stack.http.post(
                answer_path, json={"decision": "answer", "answer": answer}
            )
            assert reply.status_code == 422 and reply.json()["fields"] == ["answer"], reply.text
            assert fragment in reply.json()["error"], reply.text
        wrong = await stack.http.post(answer_path, json={"decision": "approve"})
        assert wrong.status_code == 422 and wrong.json()["fields"] == ["decision"]

        typed = {"city": "Oslo", "nights": 3, "insured": False, "class": "business"}
        respond = ["thread", "respond", thread_id, action_id, "answer", "--answer-json"]
        code, out, err = await weft_cli(config, *respond, json.dumps(typed))
        assert code == 0 and out.strip() == f"answered {action_id} on {thread_id}", err
        code, _, err = await weft_cli(config, *respond, "{")
        assert code == 2 and err.startswith("weft: --answer-json: not JSON"), err

        declined = await send_elicitation(
            stack, thread_id, question["turnId"], message="Where to?", schema=SCHEMA
        )
        await read_until(
            stack, thread_id, lambda r: declined in {a["actionId"] for a in r["pendingActions"]}
        )
        reply = await stack.http.post(
            f"/threads/{thread_id}/actions/{declined}", json={"decision": "deny"}
        )
        assert reply.status_code == 200, reply.text

        handle = temporal_client.get_workflow_handle(thread_id)
        answers = [
            await handle.query(QUERY_MCP_ELICITATION, known) for known in (action_id, declined)
        ]
        assert answers[0] == {"actionId": action_id, "action": "accept", "content": typed}
        assert answers[1]["action"] == "decline" and answers[1]["content"] is None
        await wait_until(handle, lambda s: len(s.pending_actions) == 1)
        await stack.ctx.threads.terminate(thread_id)
        await stack.ctx.threads.result(thread_id)
        resolved = {
            e.action_id: e.payload
            for e in _events(stack.store, thread_id, "action.resolved")
            if e.payload["actionType"] == "elicitation"
        }
        assert resolved[action_id]["answer"] == typed
        assert resolved[action_id]["decision"] == "answer"
        assert resolved[declined]["decision"] == "deny" and "answer" not in resolved[declined]


def _events(store: Store, thread_id: str, kind: str) -> list[Any]:
    return store.events.read(thread_id, types=[kind])
