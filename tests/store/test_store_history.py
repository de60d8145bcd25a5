"""The history of a thread's key-value data and files: their state as of an event."""

from __future__ import annotations

from store_factories import new_thread_id

from weft.activities.clock import now_iso
from weft.activities.store import Store
from weft.activities.store.history import files_as_of, values_as_of
from weft.contract.events import Event




def _mark(store: Store, thread_id: str, name: str) -> int:
    """Append a marker event and return its sequence."""
    event = Event(
        type="runtime.warning",
        event_id=f"{thread_id}:{name}",
        timestamp=now_iso(),
        thread_id=thread_id,
        payload={"marker": name},
    )
    (stored,) = store.events.append([event])
    assert stored.sequence is not None
    return stored.sequence


def test_values_as_of_an_event(store: Store) -> None:
    """A key's value as of event P is its last write before P; later sets and deletes do not show."""
    thread = new_thread_id()
    store.values.set(thread, "a", 1)
    first = _mark(store, thread, "one")
    store.values.set(thread, "a", 2)
    store.values.set(thread, "b", {"x": True})
    second = _mark(store, thread, "two")
    store.values.set(thread, "a", None)
    store.values.set(thread, "b", "later")
    third = _mark(store, thread, "three")

    assert values_as_of(store.database, thread, first) == {"a": "1"}
    assert values_as_of(store.database, thread, second) == {"a": "2", "b": '{"x":true}'}
    assert values_as_of(store.database, thread, third) == {"b": '"later"'}
    assert store.values.get(thread, "b") == "later"  # the current value is unchanged


def test_files_as_of_an_event(store: Store) -> None:
    """Files, their parents and removals are read back as they were at each event."""
    thread = new_thread_id()
    store.files.write_file(thread, "/notes/a.txt", "v1")
    first = _mark(store, thread, "one")
    store.files.write_file(thread, "/notes/a.txt", "v2")
    store.files.mkdir(thread, "/empty")
    second = _mark(store, thread, "two")
    store.files.unlink(thread, "/notes/a.txt")
    store.files.rmdir(thread, "/empty")
    third = _mark(store, thread, "three")

    def view(at: int) -> dict[str, str | None]:
        rows = files_as_of(store.database, thread, at)
        return {
            r["path"]: (
                None if r["blob_digest"] is None else store.files.get_blob(r["blob_digest"])
            )
            for r in rows
        }  # type: ignore[misc]

    assert view(first) == {"/notes": None, "/notes/a.txt": b"v1"}
    assert view(second) == {"/notes": None, "/notes/a.txt": b"v2", "/empty": None}
    assert view(third) == {"/notes": None}
