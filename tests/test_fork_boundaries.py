"""A fork starts from the context boundary in force at its point: the compaction boundaries
stored by then are copied, and its first model call sends the summary, not the whole
transcript (docs/time-travel.md)."""

from __future__ import annotations

from support import read
from test_context_compaction import ask, chat_requests, chat_script, chat_thread

from weft.client.forks import Forks
from weft.contract.context import QUERY_CONTEXT_BOUNDARY


async def test_a_fork_keeps_the_boundary_in_force(start_worker, temporal_client, scripted_server):
    """A fork after the compacting turn holds its boundary, reports it in force and sends
    its summary; a fork before the compaction holds none."""
    tool_turn = {
        "match": "please compact",
        "replies": [
            {"tool_calls": [{"name": "compact_now", "arguments": {"why": "done"}}]},
            {"text": "compacted"},
        ],
    }
    chat = await chat_thread(
        start_worker, temporal_client, scripted_server, chat_script(extra_turns=[tool_turn])
    )
    store, source = chat.worker.store, chat.started.id
    state = await read(chat.handle)
    for turn in range(2):
        state = await ask(chat.handle, f"turn {turn}", state.counters.turns)
    state = await ask(chat.handle, "please compact", state.counters.turns)
    state = await ask(chat.handle, "after the compaction", state.counters.turns)
    ends = store.events.read(source, types=["turn.completed"])
    (boundary,) = store.boundaries.list(source)
    forks = Forks(temporal_client, store, task_queue=chat.worker.task_queue)

    before = await forks.fork(source, at=ends[0].turn_id)
    assert store.boundaries.list(before.thread_id) == []

    fork = await forks.fork(source, at=ends[-2].turn_id)
    (copied,) = store.boundaries.list(fork.thread_id)
    assert copied == boundary.model_copy(update={"thread_id": fork.thread_id})
    handle = temporal_client.get_workflow_handle(fork.thread_id)
    snapshot = await handle.query(QUERY_CONTEXT_BOUNDARY)
    assert snapshot["boundary"]["boundaryId"] == boundary.boundary_id
    await ask(handle, "hello fork", (await read(handle)).counters.turns)
    last = chat_requests(scripted_server, chat.script)[-1]
    assert "Summary: the user sent numbered turns" in last["messages"][0]["content"]
    assert [m["content"] for m in last["messages"][1:]][-1] == "hello fork"
    assert "turn 0" not in [m.get("content") for m in last["messages"]]
