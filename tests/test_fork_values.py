"""A fork taken before the turn whose tool set a value never holds that value
(docs/time-travel.md)."""

from __future__ import annotations

from fork_support import jot_call, jot_definitions, turn_ends, turn_id_of
from support import add_script, idle_after, wait_until

from weft.client.forks import Forks
from weft.client.threads import Threads


async def test_a_fork_before_a_queued_tool_does_not_see_its_value(
    start_worker, temporal_client, scripted_server
):
    """A tool queued to an idle thread sets a value in a turn of its own; a fork at the turn
    before holds the earlier value only."""
    turn = jot_call("one", "/a.txt", "v1")
    # The queued call's stored message takes a reply index; the model answers after it.
    turn["replies"] += [{"text": "unused"}, {"text": "saw the queued jot"}]
    worker = await start_worker(jot_definitions(add_script(scripted_server, {"turns": [turn]})))
    store = worker.store
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=store)
    handle = await threads.start("helper", messages=["one"])
    await wait_until(handle, idle_after(1))
    (first,) = turn_ends(store, handle.id)

    await handle.signal(
        "queue_tool", {"name": "jot", "args": {"stage": "two", "path": "/b.txt", "text": "v2"}}
    )
    await wait_until(handle, idle_after(2))
    assert store.values.get(handle.id, "stage") == "two"

    fork = await Forks(temporal_client, store, task_queue=worker.task_queue).fork(
        handle.id, at=turn_id_of(first)
    )
    assert store.values.get(fork.thread_id, "stage") == "one"
    assert store.files.stat_file(fork.thread_id, "/b.txt") is None
