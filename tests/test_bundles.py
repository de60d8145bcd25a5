"""Thread bundles: export → import round trips between SQLite and PostgreSQL,
with equal read models, no secret in the bundle, and refusals of bad bundles."""

from __future__ import annotations

import base64
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from bundle_support import AGENT_SECRET, SECRET, closed_thread
from support import StartWorker, event_schema_validator, json_texts, store_of
from temporalio.client import Client

import weft
from weft.activities.crypto import new_key, parse_keys
from weft.client.bundle_history import REDACTED
from weft.client.bundles import BundleError, export_thread, import_bundle
from weft.client.context import context_snapshot
from weft.client.inventory import execution_environment, tool_inventory
from weft.client.resume import thread_read_from_store
from weft.store import Store
from weft.store.bundle_rows import ThreadExists, thread_records
from weft.transport.connection import connect
from weft.workers.scripted_model import ScriptedModelServer


def _events(store: Store, thread_id: str) -> list[dict[str, Any]]:
    """The thread's events on the wire, without the bundles' own evidence facts."""
    found = store.events.read(thread_id, limit=100_000)
    return [e.to_wire() for e in found if e.type != "evidence.changed"]


def _assert_no_secret(path: Path) -> None:
    """No spelling of a secret in the file's bytes, any decompressed part, or the base64
    strings inside them (history payloads)."""
    spellings = [s.encode() for s in (SECRET, json.dumps(SECRET)[1:-1], AGENT_SECRET)]
    raw = path.read_bytes()
    assert not any(s in raw for s in spellings)
    with zipfile.ZipFile(path) as bundle:
        for name in bundle.namelist():
            data = bundle.read(name)
            assert not any(s in data for s in spellings), name
            lines = data.splitlines() if name.endswith(".jsonl") else [data]
            for line in lines if name.endswith((".json", ".jsonl")) else []:
                texts = json_texts(json.loads(line))
                assert not any(s.decode() in t for t in texts for s in spellings), name


@pytest.mark.parametrize("source", ["sqlite", "postgres"])
async def test_round_trip_keeps_read_models_and_no_secret(
    source,
    start_worker,
    temporal_client,
    scripted_server,
    weft_config,
    postgres_databases,
    tmp_path,
):
    """A closed thread exported from one backend and imported into the other reads back the
    same thread_read, messages, events, files and KV; the bundle holds no secret."""
    if source == "postgres":
        weft_config.store.url = postgres_databases()
        target_url = f"sqlite:///{tmp_path / 'imported.db'}"
    else:
        target_url = postgres_databases()
    worker, thread_id = await closed_thread(start_worker, temporal_client, scripted_server)
    source_store: Store = store_of(worker)
    path = tmp_path / "thread.weftbundle"
    ref = await export_thread(
        temporal_client, source_store, thread_id, path, namespace=temporal_client.namespace
    )
    _assert_no_secret(path)
    assert ref.manifest.histories and ref.manifest.snapshot_ids
    assert {e.name: e.type for e in ref.manifest.env} == {"API_TOKEN": "secret", "CITY": "text"}

    with Store.open(target_url) as target:
        imported = await import_bundle(target, path)
        assert imported.sha256 == ref.sha256
        assert thread_read_from_store(target, thread_id) == thread_read_from_store(
            source_store, thread_id
        )
        assert [m.model_dump() for m in target.messages.list(thread_id)] == [
            m.model_dump() for m in source_store.messages.list(thread_id)
        ]
        assert _events(target, thread_id) == _events(source_store, thread_id)
        assert target.values.get(thread_id, "notes") == ["bundled"]
        assert target.files.read_file(thread_id, "/notes/report.txt") == b"bytes of the report"
        # The change history of keys and paths, so forks of the imported thread work too.
        for part in ("kv_history", "file_history"):
            kept = list(thread_records(target, part, thread_id))
            assert kept and kept == list(thread_records(source_store, part, thread_id))
        for read_model in (tool_inventory, execution_environment, context_snapshot):
            stored = await read_model(temporal_client, target, thread_id)
            assert stored is not None
            assert stored == await read_model(temporal_client, source_store, thread_id)
        row = target.threads.get(thread_id)
        assert row is not None and row.status == "cancelled"
        assert row.env == {
            "API_TOKEN": {"value": None, "type": "secret"},
            "CITY": {"value": None, "type": "text"},
        }
        # The histories are kept in the importing store, referenced by the import's fact.
        facts = target.events.read(thread_id, types=["evidence.changed"])
        assert [f.status for f in facts] == ["imported"]
        for entry in facts[0].payload["histories"]:
            history = json.loads(target.files.get_blob(entry["blobDigest"]) or b"{}")
            assert history["events"][0]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"
    exported = source_store.events.read(thread_id, types=["evidence.changed"])
    assert [f.payload["ref"]["sha256"] for f in exported] == [ref.sha256]
    validator = event_schema_validator()
    for fact in (*exported, *facts):
        assert list(validator.iter_errors(fact.to_wire())) == []


async def test_history_payloads_carrying_env_are_redacted(
    start_worker, temporal_client, scripted_server, tmp_path
):
    """Without codec keys the start input sits in clear in history: the bundle keeps it with
    its env names and types only; a stored value holding the secret is redacted."""
    worker, thread_id = await closed_thread(start_worker, temporal_client, scripted_server)
    # A value that holds the secret (as a tool might store it) is redacted, JSON kept valid.
    store_of(worker).values.set(thread_id, "leak", {"token": SECRET, "note": f"was {SECRET}"})
    path = tmp_path / "thread.weftbundle"
    ref = await export_thread(
        temporal_client, store_of(worker), thread_id, path, namespace="default"
    )
    _assert_no_secret(path)
    with zipfile.ZipFile(path) as bundle:
        history = json.loads(bundle.read(ref.manifest.histories[0].part))
        kv = [json.loads(line) for line in bundle.read("kv.jsonl").splitlines()]
    leak = next(json.loads(r["value"]) for r in kv if r["key"] == "leak")
    assert leak == {"token": REDACTED, "note": f"was {REDACTED}"}
    started = history["events"][0]["workflowExecutionStartedEventAttributes"]
    payload = started["input"]["payloads"][0]
    start = json.loads(base64.b64decode(payload["data"]))
    assert start["env"] == {"API_TOKEN": {"type": "secret"}, "CITY": {"type": "text"}}
    assert start["messages"] == [{"role": "user", "content": "note it"}]


async def test_bad_bundles_are_refused(
    start_worker: StartWorker,
    temporal_client: Client,
    scripted_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:
    """A newer version, a corrupt or missing part and a taken id are each refused naming
    what is wrong; `as_id` imports the same bundle under another id (through `weft`'s public
    API)."""
    worker, thread_id = await closed_thread(start_worker, temporal_client, scripted_server)
    path = tmp_path / "thread.weftbundle"
    # Through the public API this time: `weft.Thread.export` and `weft.import_thread`.
    await weft.Thread(temporal_client, thread_id, store=store_of(worker)).export(path)

    def rewrite(name: str, change: Any) -> Path:
        copy = tmp_path / f"changed-{name.replace('/', '-')}.zip"
        with zipfile.ZipFile(path) as old, zipfile.ZipFile(copy, "w") as new:
            for member in old.namelist():
                data = old.read(member)
                if member != name:
                    new.writestr(member, data)
                elif change is not None:  # None: the part is left out
                    new.writestr(member, change(data))
        return copy

    def newer(data: bytes) -> bytes:
        return json.dumps({**json.loads(data), "version": 99}).encode()

    with Store.open(f"sqlite:///{tmp_path / 'target.db'}") as target:
        with pytest.raises(BundleError, match=r"version 99 .*newer.*\(version 1\)"):
            await import_bundle(target, rewrite("manifest.json", newer))
        with pytest.raises(BundleError, match=r"part events\.jsonl is corrupt"):
            await import_bundle(target, rewrite("events.jsonl", lambda d: d.replace(b"1", b"2")))
        with pytest.raises(BundleError, match=r"part kv\.jsonl is missing from the bundle"):
            await import_bundle(target, rewrite("kv.jsonl", None))
        await import_bundle(target, path)
        with pytest.raises(ThreadExists, match=f"thread {thread_id!r} already exists"):
            await import_bundle(target, path)
        ref = await weft.import_thread(target, path, as_id="copy-of-thread")
        assert ref.thread_id == "copy-of-thread"
        read = thread_read_from_store(target, "copy-of-thread")
        assert read is not None and read.thread_id == "copy-of-thread"
        inventory = await tool_inventory(temporal_client, target, "copy-of-thread")
        assert inventory is not None and inventory.thread_id == "copy-of-thread"
        assert target.values.get("copy-of-thread", "notes") == ["bundled"]


async def test_encrypted_history_payloads_stay_encrypted(
    start_worker, dev_server, scripted_server, weft_config, tmp_path
):
    """With codec keys, the payloads weft encrypted are exported as stored (ciphertext), and
    the bundle still holds no secret."""
    keys = f"k1:{new_key()}"
    weft_config.codec.keys = keys
    client = await connect(dev_server.address, keyring=parse_keys([keys], source="test"))
    worker, thread_id = await closed_thread(start_worker, client, scripted_server)
    path = tmp_path / "thread.weftbundle"
    ref = await export_thread(client, store_of(worker), thread_id, path, namespace="default")
    _assert_no_secret(path)
    with zipfile.ZipFile(path) as bundle:
        history = json.loads(bundle.read(ref.manifest.histories[0].part))
    started = history["events"][0]["workflowExecutionStartedEventAttributes"]
    encoding = started["input"]["payloads"][0]["metadata"]["encoding"]
    assert base64.b64decode(encoding) == b"binary/encrypted"
