"""A fork is all or nothing in the store, and copies each message as it was at its point
(docs/time-travel.md), on a real dev server."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from fork_support import jot_definitions, source_script, turn_ends, turn_id_of, two_turns
from support import idle_after, wait_until
from temporalio.client import Client

from weft.client import forks as forks_module
from weft.client.forks import ForkRefused, Forks
from weft.client.threads import Threads
from weft.contract.events import Event
from weft.store import Store
from weft.store.history import ThreadLinks


def _nothing_of(store: Store, thread_id: str) -> None:
    """Assert the store holds no row of `thread_id`."""
    assert store.threads.get(thread_id) is None
    assert store.messages.list(thread_id) == []
    assert store.values.get(thread_id, "stage") is None
    assert store.files.stat_file(thread_id, "/notes/a.txt") is None
    assert ThreadLinks(store.database).get(thread_id) == (None, None)
    assert store.budgets.get(thread_id, now=datetime.now(UTC)) is None


async def _occupy(client: Client) -> str:
    """A workflow id Temporal holds (no worker polls its queue) and the store does not."""
    taken = f"taken-{uuid.uuid4().hex[:12]}"
    await client.start_workflow("NoSuchWorkflow", id=taken, task_queue=f"nobody-{taken}")
    return taken


def _edit(store: Store, thread_id: str, name: str) -> Event:
    return Event(
        type="runtime.warning",
        event_id=f"{thread_id}:{name}",
        timestamp=datetime.now(UTC).isoformat(),
        thread_id=thread_id,
    )


async def test_a_failed_start_leaves_no_rows_and_a_retry_succeeds(
    start_worker, temporal_client, scripted_server, monkeypatch
):
    """A fork whose workflow cannot start is refused naming the id and leaves nothing in the
    store; rows left by a fork that stopped before its start are cleared by a retry with the
    same id, which then starts a working fork."""
    worker = await start_worker(jot_definitions(source_script(scripted_server)))
    store = worker.store
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=store)
    source = await two_turns(threads, store)
    first = turn_ends(store, source)[0]
    forks = Forks(temporal_client, store, task_queue=worker.task_queue)
    taken = await _occupy(temporal_client)

    with pytest.raises(ForkRefused, match=f"a workflow {taken!r} already runs in Temporal"):
        await forks.fork(source, at=turn_id_of(first), fork_id=taken)
    _nothing_of(store, taken)

    # A process that stopped between the commit and the start leaves the rows behind.
    def stopped(store_: Store, thread_id: str) -> None:
        """Removes nothing, as a process that died would."""

    monkeypatch.setattr(forks_module, "discard_fork", stopped)
    with pytest.raises(ForkRefused):
        await forks.fork(source, at=turn_id_of(first), fork_id=taken)
    assert store.threads.get(taken) is not None
    monkeypatch.undo()
    await temporal_client.get_workflow_handle(taken).terminate("free the id")

    fork = await forks.fork(source, at=turn_id_of(first), fork_id=taken)

    kept = [m for m in store.messages.list(source) if m.turn_id == first.turn_id]
    assert [m.id for m in store.messages.list(taken)] == [m.id for m in kept]
    assert fork.messages == len(kept)
    assert store.values.get(taken, "stage") == "one"
    await threads.send(taken, "hello fork")
    await wait_until(temporal_client.get_workflow_handle(taken), idle_after(2))
    assert store.messages.list(taken)[-1].content == "same model answers"


async def test_a_copy_step_that_raises_writes_nothing(
    start_worker, temporal_client, scripted_server, monkeypatch
):
    """A step of the copy that raises (the link, written last) rolls back the transcript,
    values, files, row and ledger written before it in the same fork."""
    worker = await start_worker(jot_definitions(source_script(scripted_server)))
    store = worker.store
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=store)
    source = await two_turns(threads, store)
    first = turn_ends(store, source)[0]

    def broken(*args: Any) -> None:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(ThreadLinks, "set_forked_from", broken)
    with pytest.raises(RuntimeError, match="the disk is full"):
        await Forks(temporal_client, store, task_queue=worker.task_queue).fork(
            source, at=turn_id_of(first), fork_id="fork-that-fails"
        )
    _nothing_of(store, "fork-that-fails")


async def test_an_existing_thread_id_is_refused(start_worker, temporal_client, scripted_server):
    """A fork id the store already holds (the source's own) is refused, and the source's
    row and transcript are unchanged."""
    worker = await start_worker(jot_definitions(source_script(scripted_server)))
    store = worker.store
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=store)
    source = await two_turns(threads, store)
    before = (store.threads.get(source), store.messages.list(source))

    with pytest.raises(ForkRefused, match=f"thread {source!r} already exists"):
        await Forks(temporal_client, store, task_queue=worker.task_queue).fork(
            source, at=turn_id_of(turn_ends(store, source)[0]), fork_id=source
        )
    assert (store.threads.get(source), store.messages.list(source)) == before


async def test_messages_are_copied_as_they_were_at_the_point(
    start_worker, temporal_client, scripted_server
):
    """A message updated and one deleted (with its tool result) after the fork point are
    copied as they were at the point; an edit made before a later point shows in a fork
    taken there."""
    worker = await start_worker(jot_definitions(source_script(scripted_server)))
    store = worker.store
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=store)
    source = await two_turns(threads, store)
    first = turn_ends(store, source)[0]
    original = [m for m in store.messages.list(source) if m.turn_id == first.turn_id]
    (answer,) = [m for m in original if m.role == "assistant" and not m.tool_calls]
    (call,) = [m for m in original if m.tool_calls]

    store.events.update_message(
        source, answer.id, {"content": "rewritten"}, _edit(store, source, "e1")
    )
    store.events.delete_message(source, call.id, _edit(store, source, "e2"))
    forks = Forks(temporal_client, store, task_queue=worker.task_queue)

    at_first = await forks.fork(source, at=turn_id_of(first))
    copied = store.messages.list(at_first.thread_id)
    assert [m.model_copy(update={"thread_id": source}) for m in copied] == original

    await threads.send(source, "three")
    await wait_until(temporal_client.get_workflow_handle(source), idle_after(3))
    third = turn_ends(store, source)[2]
    later = await forks.fork(source, at=turn_id_of(third))
    contents = {m.id: m.content for m in store.messages.list(later.thread_id)}
    assert contents[answer.id] == "rewritten"
    assert call.id not in contents
