"""Scoped-variable bootstrap (Runtime §7.5) end to end: a real parent thread, the `weft serve`
gateway under uvicorn, and the deferred child that boots when the values are stored."""

from __future__ import annotations

import json

import httpx
from subagent_support import SCOPED_SECRET, NoArgs, check_token, family, start_boss
from support import add_script, idle_after, json_texts, wait_until

from weft.activities.crypto import new_key
from weft.api.gateway import GatewayServer, create_app
from weft.definitions import define_tool

TOKEN = "gateway-test-token"


async def test_missing_scoped_variables_boot_the_child_after_post(
    start_worker, temporal_client, scripted_server, weft_config
):
    """A subagent missing scoped variables starts once they are POSTed to the gateway."""
    parent = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "go",
                    "replies": [
                        {
                            "tool_calls": [
                                {
                                    "name": "subagent_create",
                                    "arguments": {
                                        "agent": "researcher",
                                        "name": "r",
                                        "message": "use the token",
                                    },
                                }
                            ]
                        },
                        {"text": "waiting for variables"},
                    ],
                },
                {"match": "started after", "replies": [{"text": "it started"}]},
                {"match": "completed:", "replies": [{"text": "it reported"}]},
            ]
        },
    )
    child = add_script(
        scripted_server,
        {
            "replies": [
                {"delay_ms": 500, "tool_calls": [{"name": "check_token", "arguments": {}}]},
                {"tool_calls": [{"name": "report", "arguments": {"summary": "token ok"}}]},
            ]
        },
    )
    definitions = family(
        parent,
        child,
        subagent={"resumable": True, "scopedEnv": ["API_TOKEN"]},
        extra=[
            define_tool(name="check_token", description="Check", args=NoArgs, execute=check_token)
        ],
    )
    definitions.prompts["researcher_prompt"].tools.append("check_token")
    weft_config.codec.keys = f"k1:{new_key()}"
    worker = await start_worker(definitions)
    handle = await start_boss(temporal_client, worker)
    await wait_until(handle, idle_after(1))
    [deferred] = [
        json.loads(m.content) for m in worker.store.messages.list(handle.id) if m.role == "tool"
    ]
    assert deferred["error_code"] == "scoped_variables_required"
    assert deferred["error_data"]["missing"] == ["API_TOKEN"]
    path = deferred["error_data"]["path"]

    app = create_app(worker.store, temporal_client, TOKEN)
    async with (
        GatewayServer(app, port=0) as gateway,
        httpx.AsyncClient(
            base_url=gateway.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        ) as http,
    ):
        shown = (await http.get(path)).json()
        assert shown["missing"] == ["API_TOKEN"] and shown["status"] == "pending"
        assert shown["parentThreadId"] == handle.id and shown["subagent"] == "researcher"
        missing = await http.post(path, json={"values": {}})
        assert missing.status_code in (400, 422) and "API_TOKEN" in missing.text
        accepted = await http.post(path, json={"values": {"API_TOKEN": SCOPED_SECRET}})
        assert accepted.status_code == 202, accepted.text

    state = await wait_until(handle, idle_after(3), timeout=60)
    [entry] = state.children
    assert entry["name"] == "r" and entry["lastResult"] == "token ok"
    checked = [
        json.loads(m.content)
        for m in worker.store.messages.list(entry["reference"])
        if m.role == "tool" and m.name == "check_token"
    ]
    assert checked == [{"status": "success", "result": {"matches": True, "type": "secret"}}]
    # The secret went browser → gateway → store (sealed) → child env: never through Temporal.
    for thread_id in (handle.id, entry["reference"]):
        history = await temporal_client.get_workflow_handle(thread_id).fetch_history()
        assert not [t for t in json_texts(json.loads(history.to_json())) if SCOPED_SECRET in t]
    assert all(
        SCOPED_SECRET not in (m.content or "")
        for m in worker.store.messages.list(entry["reference"])
    )
    # Nor does it reach any model request (prompts show secrets as "[env … is secret]").
    assert not [r for r in scripted_server.requests if SCOPED_SECRET in str(r)]
