"""Events: per-thread sequences, idempotency by event_id, reads and concurrent writers."""

from __future__ import annotations

import threading

from store_factories import event, new_thread_id

from weft.store import Store


def test_sequences_start_at_one_and_increase(store: Store) -> None:
    """Each stored event gets the thread's next sequence, returned and read back."""
    thread = new_thread_id()
    assert store.events.last_sequence(thread) == 0
    stored = store.events.append([event(thread, "e1"), event(thread, "e2")])
    stored += store.events.append([event(thread, "e3")])
    assert [e.sequence for e in stored] == [1, 2, 3]
    assert store.events.read(thread) == stored
    assert store.events.last_sequence(thread) == 3


def test_append_is_idempotent_by_event_id(store: Store) -> None:
    """A retried event is skipped, within a batch and across batches."""
    thread = new_thread_id()
    store.events.append([event(thread, "e1"), event(thread, "e1")])
    again = store.events.append([event(thread, "e1"), event(thread, "e2")])
    assert [(e.event_id, e.sequence) for e in again] == [("e2", 2)]
    assert store.events.append([event(thread, "e2")]) == []
    assert [e.event_id for e in store.events.read(thread)] == ["e1", "e2"]


def test_threads_have_independent_sequences(store: Store) -> None:
    """Two threads each count from 1, even in one batch and with the same event ids."""
    first, second = new_thread_id(), new_thread_id()
    stored = store.events.append([event(first, "e1"), event(second, "e1"), event(first, "e2")])
    assert sorted((e.thread_id == first, e.sequence) for e in stored) == [
        (False, 1),
        (True, 1),
        (True, 2),
    ]
    assert store.events.last_sequence(first) == 2 and store.events.last_sequence(second) == 1


def test_read_events_after_limit_and_types(store: Store) -> None:
    """Reads filter by sequence, type and limit, ascending."""
    thread = new_thread_id()
    types = ["a", "b", "a", "b", "a"]
    store.events.append([event(thread, f"e{i}", t) for i, t in enumerate(types)])
    assert [e.sequence for e in store.events.read(thread, after=2)] == [3, 4, 5]
    assert [e.sequence for e in store.events.read(thread, limit=2)] == [1, 2]
    assert [e.sequence for e in store.events.read(thread, types=["a"], after=1)] == [3, 5]
    assert store.events.read(thread, types=[]) == []


def test_event_envelope_round_trips(store: Store) -> None:
    """Optional ids, payload, refs and extra fields survive storage."""
    thread = new_thread_id()
    original = event(
        thread,
        "e1",
        "tool.completed",
        turn_id="t1",
        tool_call_id="c1",
        payload={"result": [1, "two", None]},
        refs={"messageId": "m1"},
        customField="kept",
    )
    [stored] = store.events.append([original])
    assert stored == original.model_copy(update={"sequence": 1})
    assert store.events.read(thread) == [stored]


def test_concurrent_writers_get_gapless_sequences(store: Store) -> None:
    """Four writers appending 50 events each to one thread end with sequences 1..200."""
    thread = new_thread_id()
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def write(writer: int) -> None:
        try:
            start.wait()
            for i in range(50):
                store.events.append([event(thread, f"w{writer}-{i}")])
        except BaseException as error:  # collected to fail the test in the main thread
            errors.append(error)

    workers = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    stored = store.events.read(thread, limit=1000)
    assert [e.sequence for e in stored] == list(range(1, 201))
    assert len({e.event_id for e in stored}) == 200


def test_concurrent_retries_of_one_batch_store_it_once(store: Store) -> None:
    """A zombie attempt writing the same batch at the same time stores each event once."""
    thread = new_thread_id()
    batch = [event(thread, f"e{i}") for i in range(20)]
    start = threading.Barrier(4)
    results: list[int] = []

    def write() -> None:
        start.wait()
        results.append(len(store.events.append(batch)))

    workers = [threading.Thread(target=write) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert sorted(results) == [0, 0, 0, 20]
    assert [e.sequence for e in store.events.read(thread)] == list(range(1, 21))
