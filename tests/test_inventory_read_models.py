"""The tool inventory and execution environment of a real thread: live by query
and, once terminated, from what the close stored, through the Python API and HTTP, with
function, prompt, agent (subagent) and MCP tools, ask/deny permissions, an optional tool
switched off, and a secret env value that never appears."""

from __future__ import annotations

import json

from api_support import api_stack
from inventory_support import SECRET, check_environment, check_inventory, definitions
from support import add_script, event_schema_validator

import weft
from weft.client.threads import Threads


async def test_live_and_closed_through_the_python_api_and_http(
    start_worker, temporal_client, scripted_server, weft_config
):
    """A live thread answers both read models by query; after terminate they come from the
    store, the same tools and env names, through `Thread`, `Threads` and HTTP."""
    script = add_script(scripted_server, {"replies": [{"text": "hello"}]})
    worker = await start_worker(definitions(script))
    thread = await weft.Thread.start(
        temporal_client,
        "helper",
        env={"API_TOKEN": SECRET},
        task_queue=worker.task_queue,
        store=worker.store,
    )
    await thread.ask("hi")  # the first model call lists the MCP server
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=worker.store)
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        for source in ("live", "store"):
            tools, env = await thread.tools(), await thread.environment()
            assert tools is not None and env is not None
            check_inventory(tools.model_dump(mode="json", by_alias=True), source)
            check_environment(env.model_dump(mode="json", by_alias=True), source)
            same = await threads.tool_inventory(thread.id)
            assert same is not None and same.inventory_ref == tools.inventory_ref
            over_http = await stack.http.get(f"/threads/{thread.id}/tools")
            assert over_http.status_code == 200, over_http.text
            check_inventory(over_http.json(), source)
            env_http = await stack.http.get(f"/threads/{thread.id}/environment")
            assert env_http.status_code == 200, env_http.text
            check_environment(env_http.json(), source)
            if source == "live":
                assert env.thread_status == "waiting_input"
                await thread.terminate("done")
                await thread.result()
        assert env is not None and env.thread_status == "cancelled"
        stored = worker.store.events.read(thread.id, limit=10_000, types=["snapshot.updated"])
        assert [e.payload["kind"] for e in stored[-3:]] == [
            "tool_inventory",
            "execution_environment",
            "thread_read",
        ]
        assert SECRET not in json.dumps([e.payload for e in stored])
        validator = event_schema_validator()
        for event in stored:
            validator.validate(event.to_wire())
        missing = await stack.http.get("/threads/no-such-thread/tools")
        assert missing.status_code == 404, missing.text
