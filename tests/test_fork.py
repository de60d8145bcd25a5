"""Forks on a real dev server: a new thread from a source's transcript, key-value data and
files as of a point between turns (docs/time-travel.md)."""

from __future__ import annotations

import asyncio

import pytest
from fork_support import (
    eventually,
    jot_definitions,
    source_script,
    turn_ends,
    turn_id_of,
    two_turns,
)
from support import add_script, idle_after, sequence_of, wait_until

from weft._thread import Thread
from weft.client.forks import ForkRefused, Forks
from weft.client.threads import Threads


async def test_fork_at_a_turn_keeps_that_point(start_worker, temporal_client, scripted_server):
    """A fork at turn one holds turn one's transcript, key and file only, answers on the
    source's definitions, is searchable by WeftForkedFrom, and leaves the source as it was,
    also when forked while the source runs a turn."""
    worker = await start_worker(jot_definitions(source_script(scripted_server)))
    store = worker.store
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=store)
    source = await two_turns(threads, store)
    first_end = turn_ends(store, source)[0]
    source_events = store.events.last_sequence(source)

    fork = await Forks(temporal_client, store, task_queue=worker.task_queue).fork(
        source, at=turn_id_of(first_end)
    )

    assert fork.forked_from.at_sequence == first_end.sequence
    assert fork.forked_from.at_turn_id == first_end.turn_id
    kept = [m for m in store.messages.list(source) if m.turn_id == first_end.turn_id]
    copied = store.messages.list(fork.thread_id)
    assert [(m.id, m.position, m.role, m.content) for m in copied] == [
        (m.id, m.position, m.role, m.content) for m in kept
    ]
    assert [m.content for m in copied if m.role == "assistant"][-1] == "did one"
    assert store.values.get(fork.thread_id, "stage") == "one"
    assert store.files.read_file(fork.thread_id, "/notes/a.txt") == b"v1"
    assert store.files.stat_file(fork.thread_id, "/notes/b.txt") is None
    # The source is untouched: its own state, and not one event more.
    assert store.values.get(source, "stage") == "two"
    assert store.files.read_file(source, "/notes/b.txt") == b"v2"
    assert store.events.last_sequence(source) == source_events

    handle = temporal_client.get_workflow_handle(fork.thread_id)
    await threads.send(fork.thread_id, "hello fork")
    state = await wait_until(handle, idle_after(2))
    assert state.counters.turns == 2
    after = store.messages.list(fork.thread_id)
    assert after[len(copied)].content == "hello fork"
    assert after[len(copied)].position == copied[-1].position + 1
    assert after[-1].content == "same model answers"
    forked = [e for e in store.events.read(fork.thread_id) if "forkedFrom" in e.payload]
    assert forked[0].payload["forkedFrom"]["threadId"] == source

    async def listed() -> list[str]:
        query = f"WeftForkedFrom = '{source}'"
        return [w.id async for w in temporal_client.list_workflows(query)]

    assert await eventually(listed) == [fork.thread_id]

    # Forked while it runs a turn, the source goes on as before.
    second_end = turn_ends(store, source)[1]
    _, during = await asyncio.gather(
        threads.send(source, "three"),
        Forks(temporal_client, store, task_queue=worker.task_queue).fork(
            source, at=sequence_of(second_end)
        ),
    )
    await wait_until(temporal_client.get_workflow_handle(source), idle_after(3))
    assert store.messages.list(source)[-1].content == "same model answers"
    assert store.values.get(during.thread_id, "stage") == "two"
    assert not [e for e in store.events.read(source, limit=10_000) if "fork" in e.type]


async def test_fork_on_other_definitions(start_worker, temporal_client, scripted_server):
    """A fork given other definitions answers on their model while the source keeps its own."""
    worker = await start_worker(jot_definitions(source_script(scripted_server)))
    store = worker.store
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=store)
    source = await two_turns(threads, store)
    other = add_script(scripted_server, {"replies": [{"text": "the other model"}]})

    fork = await Forks(temporal_client, store, task_queue=worker.task_queue).fork(
        source, at=turn_id_of(turn_ends(store, source)[1]), definitions=jot_definitions(other)
    )
    await threads.send(fork.thread_id, "who speaks")
    await wait_until(temporal_client.get_workflow_handle(fork.thread_id), idle_after(3))
    assert store.messages.list(fork.thread_id)[-1].content == "the other model"
    assert store.values.get(fork.thread_id, "stage") == "two"


async def test_fork_inside_a_turn_is_refused(start_worker, temporal_client, scripted_server):
    """A point between a tool call and its result is refused, naming the turn ends around it;
    so are an unknown turn and an event past the end."""
    worker = await start_worker(jot_definitions(source_script(scripted_server)))
    store = worker.store
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=store)
    source = await two_turns(threads, store)
    first, second = turn_ends(store, source)
    (call,) = [
        e for e in store.events.read(source, types=["tool.started"]) if e.turn_id == second.turn_id
    ]
    forks = Forks(temporal_client, store, task_queue=worker.task_queue)

    with pytest.raises(ForkRefused) as refused:
        await forks.fork(source, at=call.sequence)
    message = str(refused.value)
    assert (
        f"event {call.sequence} of thread {source!r} is inside turn {second.turn_id!r}" in message
    )
    assert f"before: event {first.sequence} (end of turn {first.turn_id!r})" in message
    assert f"after: event {second.sequence} (end of turn {second.turn_id!r})" in message

    with pytest.raises(ForkRefused, match="has no turn 'nope'"):
        await forks.fork(source, at="nope")
    with pytest.raises(ForkRefused, match="there is no event 99999"):
        await forks.fork(source, at=99999)


async def test_python_thread_fork(start_worker, temporal_client, scripted_server):
    """`weft.Thread.fork` at an event sequence returns the fork's handle, whose read model
    names its source; `Threads.fork` without a store says it needs one."""
    worker = await start_worker(jot_definitions(source_script(scripted_server)))
    store = worker.store
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=store)
    source = await two_turns(threads, store)
    first = turn_ends(store, source)[0]

    thread = Thread(temporal_client, source, store=store, task_queue=worker.task_queue)
    fork = await thread.fork(at=str(first.sequence))
    read = await fork.read()
    assert read.forked_from is not None and read.forked_from.thread_id == source
    assert read.forked_from.at_turn_id == first.turn_id
    assert read.counters.turns == 1
    with pytest.raises(ValueError, match="Threads.fork needs a store"):
        await Threads(temporal_client).fork(source, at=sequence_of(first))
