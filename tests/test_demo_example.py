"""`weft demo`'s travel conversation runs on the demo's definitions and scripts, its stdio
MCP server (workers/demo/definitions/mcp_servers/travel_notes.py) included, and asks a
human before it writes the trip notes."""

from __future__ import annotations

import io
import re
from pathlib import Path

import yaml
from support import idle_after, start_thread, wait_until

from weft.cli.demo import FOLLOW_UP, QUESTION, run_demo
from weft.client.actions import respond_checked, response
from weft.definitions import load_directory
from weft.workers.config import ProviderConfig

DEMO = Path(__file__).resolve().parents[1] / "workers" / "demo"


async def test_the_travel_assistant_notes_the_packing_list_over_mcp_once_approved(
    start_worker, temporal_client, scripted_server
):
    """The weather, then the packing question: saving the list with the travel_notes
    server's add_note waits for a person's approval, then runs and its result is stored."""
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
    waiting = await wait_until(handle, lambda s: bool(s.pending_actions))
    [action] = waiting.pending_actions
    assert (action["kind"], action["toolName"]) == ("tool_permission", "notes_add_note")
    assert waiting.status == "waiting_permission"
    await respond_checked(temporal_client, handle.id, response(action["actionId"], "approve"))
    await wait_until(handle, idle_after(2))

    [resolved] = worker.store.events.read(handle.id, limit=1000, types=["tool.catalog.resolved"])
    listed = resolved.payload["servers"]["travel_notes"]
    assert (listed["status"], listed["tools"]) == ("ready", ["notes_add_note", "notes_list_notes"])
    [permission] = worker.store.events.read(handle.id, limit=1000, types=["permission.resolved"])
    assert (permission.payload["decision"], permission.payload["decidedBy"]) == ("allow", "human")
    messages = worker.store.messages.list(handle.id)
    results = {m.name: m.content for m in messages if m.role == "tool"}
    assert "Saved note 1: Paris: umbrella, light jacket, passport, charger" in str(
        results["notes_add_note"]
    )
    assert messages[-1].content == "I saved that list in your trip notes."


async def test_the_demo_says_how_to_answer_and_approves_when_no_one_does(weft_config):
    """`weft demo` prints how to approve from the CLI and from /inbox, then approves by
    itself after its wait, so it always ends."""
    weft_config.definitions = str(DEMO / "definitions")
    weft_config.providers = {
        "scripted": ProviderConfig(kind="scripted", scripts=str(DEMO / "scripts"))
    }
    out = io.StringIO()
    assert await run_demo(weft_config, out, timeout=90, approve_after=1) == 0
    text = out.getvalue()
    thread = re.search(r"^thread (\S+): waiting_input", text, re.MULTILINE)
    assert thread is not None, text
    ask = re.search(r"waiting on a human \(tool_permission (\S+)\)", text)
    assert ask is not None, text
    assert " inbox\n" in text, text
    assert f"thread respond {thread.group(1)} {ask.group(1)} approve" in text, text
    assert "/inbox" in text and "no answer in 1 s: the demo approved it" in text, text
    assert "I saved that list in your trip notes." in text, text
