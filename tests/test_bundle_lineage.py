"""Bundles carry a thread's budget ledger, fork links and message history: an export from
one backend imports into the other with them, and a bundle without those parts (an older
weft's) still imports."""

from __future__ import annotations

import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from bundle_support import closed_thread
from support import store_of

from weft.client.bundles import export_thread, import_bundle
from weft.client.lineage import with_lineage
from weft.client.resume import thread_read_from_store
from weft.contract.events import Event
from weft.store import Store
from weft.store.bundle_rows import thread_records
from weft.store.history import ThreadLinks

LINK = {"threadId": "helper-source0001", "atSequence": 7, "atTurnId": "turn-1", "rewind": True}
NEW_PARTS = ("budgets.jsonl", "thread_links.jsonl", "message_history.jsonl")


def _linked_and_edited(store: Store, thread_id: str) -> object:
    """Give the thread a fork origin, a successor and one edited message; the message's
    content before the edit."""
    links = ThreadLinks(store.database)
    with store.database.write() as connection:
        links.set_forked_from(connection, thread_id, LINK)
    links.set_successor(thread_id, "helper-successor01")
    first = store.messages.list(thread_id)[0]
    edit = Event(
        type="runtime.warning",
        event_id=f"{thread_id}:edit",
        timestamp=datetime.now(UTC).isoformat(),
        thread_id=thread_id,
    )
    store.events.update_message(thread_id, first.id, {"content": "edited later"}, edit)
    return first.content


def _without(path: Path, names: tuple[str, ...], into: Path) -> Path:
    """A copy of the bundle at `path` without the parts `names`, as an older weft wrote it."""
    with zipfile.ZipFile(path) as old, zipfile.ZipFile(into, "w") as new:
        for member in old.namelist():
            data = old.read(member)
            if member == "manifest.json":
                manifest = json.loads(data)
                manifest["parts"] = [p for p in manifest["parts"] if p["name"] not in names]
                data = json.dumps(manifest).encode()
            if member not in names:
                new.writestr(member, data)
    return into


@pytest.mark.parametrize("source", ["sqlite", "postgres"])
async def test_ledger_links_and_message_history_round_trip(
    source,
    start_worker,
    temporal_client,
    scripted_server,
    weft_config,
    postgres_databases,
    tmp_path,
):
    """The imported thread (same id, and another) has the source's ledger, its forkedFrom
    and successor in the read model, and the message's earlier version under its own id."""
    if source == "postgres":
        weft_config.store.url = postgres_databases()
        target_url = f"sqlite:///{tmp_path / 'imported.db'}"
    else:
        target_url = postgres_databases()
    worker, thread_id = await closed_thread(start_worker, temporal_client, scripted_server)
    store: Store = store_of(worker)
    original = _linked_and_edited(store, thread_id)
    path = tmp_path / "thread.weftbundle"
    ref = await export_thread(temporal_client, store, thread_id, path, namespace="default")
    assert {p.name for p in ref.manifest.parts} >= set(NEW_PARTS)
    now = datetime.now(UTC)

    with Store.open(target_url) as target:
        await import_bundle(target, path)
        await import_bundle(target, path, as_id="copy-of-thread")
        ledger = store.budgets.get(thread_id, now=now)
        assert ledger is not None and ledger.spent.model_calls >= 1
        for imported in (thread_id, "copy-of-thread"):
            copied = target.budgets.get(imported, now=now)
            assert copied == ledger.model_copy(update={"root_thread_id": imported})
            read = thread_read_from_store(target, imported)
            assert read is not None
            lineage = with_lineage(target, read)
            assert lineage.forked_from is not None
            assert lineage.forked_from.model_dump(by_alias=True) == LINK
            assert lineage.successor_thread_id == "helper-successor01"
            (kept,) = thread_records(target, "message_history", imported)
            assert kept["message"]["thread_id"] == imported
            assert kept["message"]["content"] == original != "edited later"
        assert list(thread_records(target, "budgets", thread_id)) == list(
            thread_records(store, "budgets", thread_id)
        )

        older = _without(path, NEW_PARTS, tmp_path / "older.weftbundle")
        await import_bundle(target, older, as_id="from-an-older-weft")
        assert target.budgets.get("from-an-older-weft", now=now) is None
        assert ThreadLinks(target.database).get("from-an-older-weft") == (None, None)
        assert target.messages.list("from-an-older-weft") == [
            m.model_copy(update={"thread_id": "from-an-older-weft"})
            for m in target.messages.list(thread_id)
        ]
