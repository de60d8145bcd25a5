"""The per-thread key-value store: Runtime spec §14 semantics and weft's caps."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest
from store_factories import new_thread_id

from weft.store import (
    MAX_KEY_CHARS,
    MAX_KEYS_PER_THREAD,
    MAX_VALUE_BYTES,
    Store,
    StoreLimitError,
)
from weft.store.tables import kv

JSON_VALUES: list[Any] = [
    {"nested": {"list": [1, 2.5, "three", True, False, None]}, "empty": {}},
    [1, [2, [3]], {"a": None}],
    "text with \u2603 and \x00",
    0,
    -12.75,
    True,
    False,
    [],
]


def test_values_persist_across_reopen(store_url: str) -> None:
    """§14.1: a written value survives closing the store and opening it again."""
    thread = new_thread_id()
    with Store.open(store_url) as store:
        store.values.set(thread, "k", {"a": 1})
    with Store.open(store_url) as store:
        assert store.values.get(thread, "k") == {"a": 1}


def test_write_is_visible_to_another_store(store_url: str) -> None:
    """§14.2: a value set through one store is read by another open on the same database."""
    thread = new_thread_id()
    with Store.open(store_url) as writer, Store.open(store_url) as reader:
        writer.values.set(thread, "k", "v1")
        assert reader.values.get(thread, "k") == "v1"
        writer.values.set(thread, "k", "v2")
        assert reader.values.get(thread, "k") == "v2"


def test_threads_are_isolated(store: Store) -> None:
    """§14.3: the same key in two threads holds two values, and neither sees the other's."""
    parent, child = new_thread_id(), new_thread_id()
    store.values.set(parent, "shared", "parent")
    assert store.values.get(child, "shared") is None
    store.values.set(child, "shared", "child")
    store.values.set(child, "shared", None)
    assert store.values.get(parent, "shared") == "parent"


@pytest.mark.parametrize("value", JSON_VALUES, ids=repr)
def test_json_values_round_trip(store: Store, value: Any) -> None:
    """§14.4: objects, arrays, strings, numbers and booleans read back equal."""
    thread = new_thread_id()
    store.values.set(thread, "k", value)
    got = store.values.get(thread, "k")
    assert got == value and type(got) is type(value)


def test_tuples_read_back_as_arrays(store: Store) -> None:
    """§14.4: a tuple is stored as a JSON array."""
    thread = new_thread_id()
    store.values.set(thread, "k", (1, "a"))
    assert store.values.get(thread, "k") == [1, "a"]


@pytest.mark.parametrize(
    ("value", "error"),
    [({1, 2}, TypeError), (object(), TypeError), (math.nan, ValueError), ([math.inf], ValueError)],
    ids=["set", "object", "nan", "inf"],
)
def test_non_json_values_are_rejected(store: Store, value: Any, error: type[Exception]) -> None:
    """§14.4: a non-JSON value raises an error naming the key and stores nothing."""
    thread = new_thread_id()
    with pytest.raises(error, match="'bad-key'"):
        store.values.set(thread, "bad-key", value)
    assert store.values.get(thread, "bad-key") is None


def test_missing_values_are_none(store: Store) -> None:
    """§14.5: an unset key, or a thread never written, reads None."""
    thread = new_thread_id()
    assert store.values.get(thread, "never") is None
    store.values.set(thread, "other", 1)
    assert store.values.get(thread, "never") is None


def test_none_deletes_the_key(store: Store) -> None:
    """§14.6: setting None deletes the key; deleting a missing key is harmless."""
    thread = new_thread_id()
    store.values.set(thread, "k", 1)
    store.values.set(thread, "k", None)
    assert store.values.get(thread, "k") is None
    store.values.set(thread, "k", None)
    store.values.set(thread, "k", 2)
    assert store.values.get(thread, "k") == 2


def test_key_length_cap(store: Store) -> None:
    """A key of 256 characters is fine; one more raises the max_key_chars limit."""
    thread = new_thread_id()
    store.values.set(thread, "k" * MAX_KEY_CHARS, 1)
    assert store.values.get(thread, "k" * MAX_KEY_CHARS) == 1
    with pytest.raises(StoreLimitError, match="max_key_chars") as caught:
        store.values.set(thread, "k" * (MAX_KEY_CHARS + 1), 1)
    assert caught.value.limit == "max_key_chars"
    assert store.values.get(thread, "k" * (MAX_KEY_CHARS + 1)) is None


def test_value_size_cap(store: Store) -> None:
    """A value of exactly 1 MiB as JSON is fine; one byte more raises max_value_bytes."""
    thread = new_thread_id()
    fits = "x" * (MAX_VALUE_BYTES - 2)  # the two quotes make it exactly the cap
    store.values.set(thread, "k", fits)
    assert store.values.get(thread, "k") == fits
    with pytest.raises(StoreLimitError, match="max_value_bytes") as caught:
        store.values.set(thread, "k", fits + "x")
    assert caught.value.limit == "max_value_bytes"
    assert store.values.get(thread, "k") == fits


def test_key_count_cap(store: Store) -> None:
    """A thread at 10,000 keys rejects a new key but still updates and deletes existing ones."""
    thread = new_thread_id()
    now = datetime.now(UTC)
    rows = [
        {"thread_id": thread, "key": f"k{i}", "value": "0", "updated_at": now}
        for i in range(MAX_KEYS_PER_THREAD)
    ]
    with store.engine.begin() as connection:  # seeded directly: 10,000 set_value calls are slow
        connection.execute(kv.insert(), rows)
    with pytest.raises(StoreLimitError, match="max_keys_per_thread") as caught:
        store.values.set(thread, "one-more", 1)
    assert caught.value.limit == "max_keys_per_thread"
    store.values.set(thread, "k0", "updated")
    assert store.values.get(thread, "k0") == "updated"
    store.values.set(thread, "k1", None)
    store.values.set(thread, "one-more", 1)
    assert store.values.get(thread, "one-more") == 1
    store.values.set(new_thread_id(), "elsewhere", 1)  # the cap is per thread
