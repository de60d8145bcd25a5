"""The history of a thread's key-value data and files: their state as of an event."""

from __future__ import annotations

from datetime import UTC, datetime

from store_factories import new_thread_id

from weft.activities.clock import now_iso
from weft.contract.events import Event
from weft.store import Store
from weft.store.history import files_as_of, seed_state, values_as_of
from weft.store.migrate import upgrade
from weft.store.tables import files, kv


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

    def view(at: int) -> dict[str, bytes | None]:
        rows = files_as_of(store.database, thread, at)
        return {
            r["path"]: r["blob_digest"] and store.files.get_blob(r["blob_digest"]) for r in rows
        }

    assert view(first) == {"/notes": None, "/notes/a.txt": b"v1"}
    assert view(second) == {"/notes": None, "/notes/a.txt": b"v2", "/empty": None}
    assert view(third) == {"/notes": None}


def test_seeded_state_reads_back_and_has_history(store: Store) -> None:
    """A fork's seeded values and files are its current state and its history from the start."""
    source = new_thread_id()
    store.values.set(source, "k", {"v": 1})
    store.files.write_file(source, "/d/f.txt", "text")
    point = _mark(store, source, "point")
    fork = new_thread_id()
    seed_state(
        store.database,
        fork,
        values_as_of(store.database, source, point),
        files_as_of(store.database, source, point),
    )
    assert store.values.get(fork, "k") == {"v": 1}
    assert store.files.read_file(fork, "/d/f.txt") == b"text"
    assert [e.name for e in store.files.readdir(fork, "/d")] == ["f.txt"]
    first = _mark(store, fork, "first")
    assert values_as_of(store.database, fork, first) == {"k": '{"v":1}'}
    assert [r["path"] for r in files_as_of(store.database, fork, first)] == ["/d", "/d/f.txt"]


def test_migration_seeds_existing_values_and_files(store_url: str) -> None:
    """Upgrading to 0009 keeps what a thread already holds as written after its last event:
    a point after it sees the data, an earlier one does not."""
    thread = new_thread_id()
    with Store.open(store_url, migrate=False) as store:
        upgrade(store.engine, "0008")
        _mark(store, thread, "one")
        last = _mark(store, thread, "two")
        now = datetime.now(UTC)
        with store.engine.begin() as connection:
            connection.execute(
                kv.insert().values(thread_id=thread, key="k", value="1", updated_at=now)
            )
            connection.execute(
                files.insert().values(
                    thread_id=thread, path="/d", kind="dir", size=0, created_at=now, updated_at=now
                )
            )
        upgrade(store.engine)
        assert values_as_of(store.database, thread, last) == {}
        assert values_as_of(store.database, thread, last + 1) == {"k": "1"}
        assert [r["path"] for r in files_as_of(store.database, thread, last + 1)] == ["/d"]
        assert files_as_of(store.database, thread, last) == []
