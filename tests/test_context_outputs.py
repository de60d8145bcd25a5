"""A 5 MB tool output reaches the model as a preview, and the model pages through it."""

from __future__ import annotations

import json

from support import assert_preview_of, read
from test_context_compaction import FILLER, WINDOW, ask, chat_script, chat_thread

READ = {"ref": "{{preview.ref}}", "offset": "{{preview.offset}}"}
READ_ON = {"ref": "{{preview.ref}}", "offset": "{{page.next_offset}}"}


async def test_a_five_megabyte_output_is_previewed_and_paged(
    start_worker, temporal_client, scripted_server
):
    dump_turn = {
        "match": "dump it",
        "replies": [
            {"tool_calls": [{"name": "dump", "arguments": {"megabytes": 5}}]},
            {"tool_calls": [{"name": "read_output", "arguments": READ}]},
            {"tool_calls": [{"name": "read_output", "arguments": READ_ON}]},
            {"text": "I read two pages."},
        ],
    }
    chat = await chat_thread(
        start_worker, temporal_client, scripted_server, chat_script(extra_turns=[dump_turn])
    )
    script, worker, started, handle = chat.script, chat.worker, chat.started, chat.handle
    state = await ask(handle, "dump it", 0)
    assert state.last_outcome == "I read two pages.", state.incidents
    for turn in range(10):
        state = await ask(handle, f"turn {turn}: {FILLER}", state.counters.turns)
    assert state.counters.turns == 11 and state.stop_reason != "step_error"

    requests = [r for r in scripted_server.requests if r["model"] == script]
    assert all(r["status"] == 200 and r["request_tokens"] <= WINDOW for r in requests)
    # The model saw the dump as a preview, with the reader offered.
    after_dump = requests[1]
    tool_message = after_dump["messages"][-1]
    assert tool_message["role"] == "tool"
    assert len(tool_message["content"]) < 8_000
    assert "call read_output with" in tool_message["content"]
    assert "read_output" in [t["function"]["name"] for t in after_dump["tools"]]

    stored = worker.store.messages.list(started.id)
    (dumped,) = [m for m in stored if m.name == "dump"]
    assert len(dumped.content or "") > 5_000_000  # the store keeps it whole, as the envelope
    envelope = json.loads(dumped.content or "")
    assert envelope["status"] == "success"
    # The model reads the dump's text (docs/tool-results.md): the preview is its head, and
    # read_output pages that same text from where the preview stopped.
    content = envelope["result"]
    assert_preview_of(tool_message["content"], content)
    shown = int(tool_message["content"].rsplit('"offset": ', 1)[1].split("}", 1)[0])
    pages = [json.loads(m.content or "") for m in stored if m.name == "read_output"]
    assert [p["status"] for p in pages] == ["success", "success"]
    first, second = (p["result"] for p in pages)
    assert first["offset"] == shown and first["totalChars"] == len(content)
    assert first["text"] == content[first["offset"] : first["offset"] + first["returnedChars"]]
    assert second["offset"] == first["nextOffset"]
    assert second["text"] == content[second["offset"] : second["offset"] + second["returnedChars"]]
    assert "of the dump\nline " in first["text"]
    # The model received the first page, as its JSON text, in the request that asked for the
    # second.
    seen = json.loads(requests[2]["messages"][-1]["content"])
    assert seen == first
    assert (await read(handle)).warnings == 0
