"""A queued message over the spill threshold travels as a blob: history holds a preview,
the store and the model get the whole text."""

from __future__ import annotations

from typing import Any

import pytest
from support import (
    add_script,
    agent_definitions,
    assert_preview_of,
    idle_after,
    start_thread,
    wait_until,
)
from temporalio.client import Client

from weft.activities.spill import SPILL_THRESHOLD_BYTES
from weft.client.threads import Threads
from weft.contract.thread import SIGNAL_QUEUE_MESSAGE
from weft.store import Store

THREE_MB = 3 * 1024 * 1024
HISTORY_PAYLOAD_LIMIT = 100_000


def big_text(size: int) -> str:
    """Distinct numbered lines with non-ASCII text, at least `size` bytes of UTF-8."""
    lines: list[str] = []
    total, n = 0, 0
    while total < size:
        line = f"line {n} \u2603 snow and \u00e9t\u00e9\n"
        lines.append(line)
        total += len(line.encode())
        n += 1
    return "".join(lines)


def user_contents(requests: list[dict[str, Any]], script: str) -> list[str]:
    """The user message contents of the last request the model `script` received."""
    last = [r for r in requests if r.get("model") == script][-1]
    return [m["content"] for m in last["messages"] if m["role"] == "user"]


async def largest_history_event(client: Client, thread_id: str) -> int:
    """The size in bytes of the thread's largest history event (bounds every payload)."""
    history = await client.get_workflow_handle(thread_id).fetch_history()
    return max(event.ByteSize() for event in history.events)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_three_megabyte_message_reaches_the_model(
    backend, start_worker, temporal_client, scripted_server, weft_config, request
):
    """Threads.send of 3 MB: the store gets it whole, the model a preview, history stays small."""
    if backend == "postgres":
        weft_config.store.url = request.getfixturevalue("postgres_databases")()
    script = add_script(scripted_server, {"replies": [{"text": "read it all"}]})
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(temporal_client, worker.task_queue)
    content = big_text(THREE_MB)
    with Store.open(weft_config.store_url(), migrate=False) as client_store:
        threads = Threads(temporal_client, task_queue=worker.task_queue, store=client_store)
        await threads.send(handle.id, content)
    state = await wait_until(handle, idle_after(1), timeout=60)

    assert state.last_outcome == "read it all"
    # The store holds it whole; the model gets a preview within its budget (read_output).
    assert_preview_of(user_contents(scripted_server.requests, script)[-1], content)
    stored = next(m for m in worker.store.messages.list(handle.id) if m.role == "user")
    assert stored.content == content
    assert stored.metadata["contentBytes"] == len(content.encode())
    (spilled,) = worker.store.events.read(handle.id, types=["output.spilled"])
    assert spilled.payload["messageId"] == stored.id
    assert spilled.payload["bytes"] == len(content.encode())
    assert spilled.payload["contentRef"] == stored.metadata["contentRef"]
    largest = await largest_history_event(temporal_client, handle.id)
    assert largest < HISTORY_PAYLOAD_LIMIT, f"a history event is {largest} bytes"


async def test_large_start_message_is_spilled(start_worker, temporal_client, scripted_server):
    """Threads.start with a 1 MB first message: the start input holds a preview only."""
    script = add_script(scripted_server, {"replies": [{"text": "started"}]})
    worker = await start_worker(agent_definitions(script))
    content = big_text(1024 * 1024)
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=worker.store)
    handle = await threads.start("helper", messages=[content])
    await wait_until(handle, idle_after(1), timeout=60)
    assert_preview_of(user_contents(scripted_server.requests, script)[-1], content)
    largest = await largest_history_event(temporal_client, handle.id)
    assert largest < HISTORY_PAYLOAD_LIMIT, f"a history event is {largest} bytes"


async def test_small_message_is_sent_as_is(start_worker, temporal_client, scripted_server):
    """Content under the threshold is signalled whole, with no contentRef."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(temporal_client, worker.task_queue)
    content = "x" * (SPILL_THRESHOLD_BYTES - 1)
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=worker.store)
    await threads.submit_turn(handle.id, content)
    await wait_until(handle, idle_after(1))
    stored = next(m for m in worker.store.messages.list(handle.id) if m.role == "user")
    assert stored.content == content and "contentRef" not in stored.metadata
    assert worker.store.events.read(handle.id, types=["output.spilled"]) == []


async def test_oversized_message_without_store_is_refused(temporal_client):
    """Without a store, content over the queued-message cap fails before any signal."""
    threads = Threads(temporal_client, task_queue="unused")
    with pytest.raises(ValueError, match="Give Threads a store"):
        await threads.send("no-such-thread", "x" * THREE_MB)


async def test_missing_blob_becomes_a_warning(start_worker, temporal_client, scripted_server):
    """A contentRef to a blob the store lacks: the model sees why, a warning is recorded,
    and the thread goes on to the next turn."""
    script = add_script(
        scripted_server,
        {
            "turns": [
                {"match": "again", "replies": [{"text": "fine now"}]},
                {"match": "*", "replies": [{"text": "could not read"}]},
            ]
        },
    )
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(temporal_client, worker.task_queue)
    ref = "blob:" + "0" * 64
    await handle.signal(
        SIGNAL_QUEUE_MESSAGE,
        {"role": "user", "content": "the preview", "metadata": {"contentRef": ref}},
    )
    await wait_until(handle, idle_after(1))
    seen = user_contents(scripted_server.requests, script)[-1]
    assert ref in seen and "is not in the store" in seen and seen.endswith("the preview")
    (warning,) = worker.store.events.read(handle.id, types=["runtime.warning"])
    assert warning.payload["code"] == "content_ref_unavailable" and warning.payload["ref"] == ref
    await Threads(temporal_client, task_queue=worker.task_queue).send(handle.id, "again")
    state = await wait_until(handle, idle_after(2))
    assert state.last_outcome == "fine now"


async def test_spilled_message_kept_whole_when_the_model_fails(
    start_worker, temporal_client, scripted_server, weft_config
):
    """When every model attempt fails, the drained message is kept whole in the store (it
    goes back to the outbox, and whichever write stores it restores the content)."""
    script = add_script(scripted_server, {"replies": [{"error": {"status": 400, "body": "no"}}]})
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(temporal_client, worker.task_queue)
    content = big_text(200 * 1024)
    with Store.open(weft_config.store_url(), migrate=False) as client_store:
        threads = Threads(temporal_client, task_queue=worker.task_queue, store=client_store)
        await threads.send(handle.id, content)
    await wait_until(
        handle, lambda s: s.stop_reason == "step_error" and s.status == "waiting_input", timeout=60
    )
    stored = next(m for m in worker.store.messages.list(handle.id) if m.role == "user")
    assert stored.content == content
