"""`weft demo`'s travel conversation runs on the demo's definitions and scripts, its stdio
MCP server (workers/demo/definitions/mcp_servers/travel_notes.py) included."""

from __future__ import annotations

from pathlib import Path

import yaml
from support import idle_after, start_thread, wait_until

from weft.activities.definitions import load_directory
from weft.cli.demo import FOLLOW_UP, QUESTION

DEMO = Path(__file__).resolve().parents[1] / "workers" / "demo"


async def test_the_travel_assistant_notes_the_packing_list_over_mcp(
    start_worker, temporal_client, scripted_server
):
    """The weather, then the packing question: the list is saved with the travel_notes
    server's add_note, started from the definitions folder, and its result stored."""
    for file in ("travel.yaml", "packing.yaml"):
        for name, script in yaml.safe_load((DEMO / "scripts" / file).read_text()).items():
            scripted_server.set_script(name, script)
    worker = await start_worker(load_directory(DEMO / "definitions"))
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        agent="travel_assistant",
        messages=[{"role": "user", "content": QUESTION}],
    )
    await wait_until(handle, idle_after(1))
    await handle.signal("queue_message", {"role": "user", "content": FOLLOW_UP})
    await wait_until(handle, idle_after(2))

    [resolved] = worker.store.events.read(handle.id, limit=1000, types=["tool.catalog.resolved"])
    listed = resolved.payload["servers"]["travel_notes"]
    assert (listed["status"], listed["tools"]) == ("ready", ["notes_add_note", "notes_list_notes"])
    messages = worker.store.messages.list(handle.id)
    results = {m.name: m.content for m in messages if m.role == "tool"}
    assert "Saved note 1: Paris: umbrella, light jacket, passport, charger" in str(
        results["notes_add_note"]
    )
    assert messages[-1].content == "I saved that list in your trip notes."
