"""Deleting a thread leaves nothing of it: a unique marker put in its messages, files, values,
tool outputs and a spilled blob is found in no byte of the SQLite file (after VACUUM) or
any PostgreSQL table, and Temporal no longer lists or describes the thread; a file it
shared with a surviving thread still reads back. Then: every thread column of the schema
is covered, a deletion interrupted anywhere finishes on retry, children go with
`--children`, tenants delete only their own threads over HTTP, and `weft tenant delete`.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from alembic import command
from api_support import api_stack
from pydantic import BaseModel
from sqlalchemy import Column, MetaData, String, Table, create_engine, insert, inspect, select, text
from support import add_script, agent_definitions, idle_after, start_thread, wait_until
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from weft.activities import thread_deletion
from weft.activities.thread_deletion import ThreadNotFound, delete_thread
from weft.cli.main import run as weft_cli
from weft.client.schedules import ScheduleNotFound, Schedules
from weft.client.threads import Threads
from weft.definitions import define_tool
from weft.store import Store
from weft.store import deletion as store_deletion
from weft.store.deletion import KEPT, thread_columns, uncovered
from weft.store.migrate import alembic_config, upgrade
from weft.store.tables import blobs, idempotency_keys, metadata, subagents, threads

SHARED = "/notes/shared.txt"


class StashArgs(BaseModel):
    """Arguments of the stash tool."""

    marker: str


async def stash(state: Any, args: StashArgs) -> dict[str, Any]:
    """Puts the marker in a value and a file, writes a file without it, and returns it."""
    await state.set_value("secret", {"marker": args.marker})
    await state.write_file("/notes/marked.txt", f"the marker is {args.marker}\n")
    await state.write_file(SHARED, f"shared bytes {args.marker[::-1]}\n")
    return {"echo": f"stashed {args.marker}"}


def _definitions(script: str) -> Any:
    return agent_definitions(script, tools=["stash"]).add(
        define_tool(name="stash", description="Stash", args=StashArgs, execute=stash)
    )


def _script(marker: str) -> dict[str, Any]:
    return {
        "turns": [
            {
                "match": "stash",
                "replies": [
                    {"tool_calls": [{"name": "stash", "arguments": {"marker": marker}}]},
                    {"text": f"stashed it: {marker}"},
                ],
            },
            {"match": "*", "replies": [{"text": "read it"}]},
        ]
    }


# -- scans for the marker ---------------------------------------------------------------


def _sqlite_bytes_hold(db: Path, marker: str) -> bool:
    """Whether the marker is in any byte of the database: the file after VACUUM, with the
    WAL checkpointed into it (and truncated)."""
    connection = sqlite3.connect(db, timeout=30)
    try:
        connection.execute("VACUUM")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()
    needle = marker.encode()
    return any(
        needle in path.read_bytes()
        for path in (db, db.with_name(db.name + "-wal"))
        if path.exists()
    )


def _sqlite_raw_holds(db: Path, marker: str) -> bool:
    """Whether the marker is in the file or its WAL as they are (no VACUUM)."""
    needle = marker.encode()
    return any(
        needle in path.read_bytes()
        for path in (db, db.with_name(db.name + "-wal"))
        if path.exists()
    )


def _postgres_tables_holding(store: Store, marker: str) -> list[str]:
    """The tables with a row whose text holds the marker (bytea shows as hex)."""
    found = []
    with store.engine.connect() as connection:
        names = connection.scalars(
            text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        ).all()
        for name in names:
            hit = connection.scalar(
                text(
                    f'SELECT count(*) FROM "{name}" AS r WHERE r::text LIKE :a OR r::text LIKE :b'
                ),
                {"a": f"%{marker}%", "b": f"%{marker.encode().hex()}%"},
            )
            if hit:
                found.append(name)
    return sorted(found)


async def _temporal_forgot(client: Client, thread_id: str) -> None:
    listed = [w async for w in client.list_workflows(f"WorkflowId = '{thread_id}'")]
    assert listed == []
    with pytest.raises(RPCError) as raised:
        await client.get_workflow_handle(thread_id).describe()
    assert raised.value.status == RPCStatusCode.NOT_FOUND


# -- the proof --------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_deleted_thread_leaves_no_byte(
    backend, start_worker, temporal_client, scripted_server, weft_config, request
):
    """The marker is everywhere before, nowhere after; the shared file survives."""
    if backend == "postgres":
        weft_config.store.url = request.getfixturevalue("postgres_databases")()
    marker = f"MRK{uuid.uuid4().hex}"
    script = add_script(scripted_server, _script(marker))
    worker = await start_worker(_definitions(script))
    store = worker.store
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=store)
    # The first message is in the workflow's start input and its visibility summary.
    doomed = await threads.start("helper", messages=[f"stash {marker}"])
    await wait_until(doomed, idle_after(1), timeout=30)
    # Over 64 KiB: queued as a blob (spilled), stored whole.
    await threads.send(doomed.id, f"read {marker} " + "x" * (70 * 1024))
    await wait_until(doomed, idle_after(2), timeout=30)
    survivor = await start_thread(temporal_client, worker.task_queue)
    copied = store.files.copy_files(doomed.id, survivor.id, [SHARED], copy_id="share")
    spilled = next(m for m in store.messages.list(doomed.id) if "contentRef" in m.metadata)
    spilled_digest = spilled.metadata["contentRef"].removeprefix("blob:")
    assert store.files.get_blob(spilled_digest) is not None
    marked_digest = next(
        f.digest for f in store.files.readdir(doomed.id, "/notes") if f.name == "marked.txt"
    )
    # The scans see the marker before the deletion: in messages, events, values, files.
    if backend == "postgres":
        assert {"blobs", "events", "kv", "messages"} <= set(_postgres_tables_holding(store, marker))
    else:
        assert _sqlite_raw_holds(Path(weft_config.store_url().removeprefix("sqlite:///")), marker)

    if backend == "postgres":
        # A crash after the store's part, before Temporal's: the retry below finishes.
        await thread_deletion.close_thread(temporal_client, doomed.id, grace=30)
        rows = store.deletion.delete_thread(doomed.id)
        assert rows.rows["messages"] >= 4 and rows.rows["kv"] == 1 and rows.blobs == 2
        assert [w async for w in temporal_client.list_workflows(f"WorkflowId = '{doomed.id}'")]

    report = await threads.delete(doomed.id)

    assert report.thread_ids == [doomed.id]
    (deleted,) = report.threads
    assert deleted.executions == 1
    if backend == "sqlite":
        assert deleted.rows["messages"] >= 4 and deleted.rows["kv"] == 1
        assert deleted.blobs == 2  # the marked file and the spilled message; not the shared one
    else:
        assert deleted.rows == {} and deleted.blobs == 0  # the crashed run deleted them
    assert store.files.get_blob(spilled_digest) is None
    assert store.files.get_blob(marked_digest) is None
    assert (
        store.files.read_file(survivor.id, copied[0]) == f"shared bytes {marker[::-1]}\n".encode()
    )
    if backend == "postgres":
        assert _postgres_tables_holding(store, marker) == []
    else:
        db = Path(weft_config.store_url().removeprefix("sqlite:///"))
        assert not _sqlite_bytes_hold(db, marker)
    await _temporal_forgot(temporal_client, doomed.id)
    # Recorded: who deleted which thread (the scans above found no content in it).
    (entry,) = store.audit.list(thread_id=doomed.id)
    assert (entry.subject, entry.method, entry.status) == ("python", "DELETE", 200)
    # A deleted thread is gone for every caller.
    with pytest.raises(ThreadNotFound, match=doomed.id):
        await threads.delete(doomed.id)
    assert (await survivor.describe()).status is not None


# -- every thread column is covered -----------------------------------------------------


def test_every_thread_column_is_deleted_or_kept_with_a_reason() -> None:
    """A new table with a thread column fails here until deletion covers it."""
    assert uncovered() == []
    assert ("messages", "thread_id") in thread_columns() and all(KEPT.values())
    planted = MetaData()
    for table in metadata.tables.values():
        table.to_metadata(planted)
    Table("notes", planted, Column("thread_id", String(10)), Column("owner_thread_id", String(10)))
    assert uncovered(planted) == ["notes.owner_thread_id", "notes.thread_id"]


# -- a deletion interrupted anywhere finishes on retry ----------------------------------


def _seed(
    store: Store, thread_id: str, *, parent: str | None = None, tenant: str = "default"
) -> None:
    """A thread's rows as its activities write them: row, message, value, file, key."""
    now = datetime.now(UTC)
    with store.database.write() as connection:
        connection.execute(
            insert(threads).values(
                thread_id=thread_id,
                agent="helper",
                status="idle",
                parent_thread_id=parent,
                created_at=now,
                updated_at=now,
                env={},
                usage={},
                tenant=tenant,
            )
        )
        connection.execute(
            insert(idempotency_keys).values(
                key=f"k-{thread_id}",
                scope=f"POST /threads/{thread_id}/messages",
                fingerprint="f",
                claim_id="c",
                state="done",
                created_at=now,
                updated_at=now,
            )
        )
        if parent is not None:
            connection.execute(
                insert(subagents).values(
                    parent_thread_id=parent,
                    reference=thread_id,
                    name="child",
                    agent="helper",
                    status="running",
                    data={},
                    created_at=now,
                    updated_at=now,
                )
            )
    store.values.set(thread_id, "k", "v")
    store.files.write_file(thread_id, "/own.txt", f"own {thread_id}")


def test_store_deletion_is_all_or_nothing_and_repeatable(tmp_path, monkeypatch):
    """A crash inside the transaction deletes nothing; the retry deletes everything; a
    second run deletes nothing more."""
    with Store.open(f"sqlite:///{tmp_path / 'weft.db'}") as store:
        _seed(store, "t-crash")

        def crash(*_: Any) -> int:
            raise OSError("crashed half-way")

        monkeypatch.setattr(store_deletion, "_delete_idempotency", crash)
        with pytest.raises(OSError):
            store.deletion.delete_thread("t-crash")
        assert store.deletion.known("t-crash")
        assert store.files.read_file("t-crash", "/own.txt") == b"own t-crash"
        monkeypatch.undo()

        first = store.deletion.delete_thread("t-crash")
        assert first.rows["threads"] == 1 and first.idempotency_keys == 1 and first.blobs == 1
        assert not store.deletion.known("t-crash")
        assert store.deletion.delete_thread("t-crash").total == 0
        with store.database.read() as connection:
            assert connection.scalar(select(blobs.c.digest)) is None


async def test_children_go_with_their_parent_only_when_asked(temporal_client, weft_config):
    with Store.open(weft_config.store_url()) as store:
        _seed(store, "p1")
        _seed(store, "c1", parent="p1")
        _seed(store, "g1", parent="c1")
        _seed(store, "p2")
        _seed(store, "c2", parent="p2")

        alone = await delete_thread(temporal_client, store, "p2")
        assert alone.thread_ids == ["p2"] and store.deletion.known("c2")

        tree = await delete_thread(temporal_client, store, "p1", children=True)
        assert tree.thread_ids == ["g1", "c1", "p1"]
        assert not any(store.deletion.known(t) for t in ("p1", "c1", "g1"))
        with pytest.raises(ThreadNotFound, match="no thread 'p1'"):
            await delete_thread(temporal_client, store, "p1")
        with pytest.raises(ValueError, match="thread id"):
            await delete_thread(temporal_client, store, "bad\nid")


# -- over HTTP, and a tenant ------------------------------------------------------------


async def test_http_delete_is_scoped_to_the_tenant(
    start_worker, temporal_client, weft_config, scripted_server
):
    script = add_script(scripted_server, {"replies": [{"text": "hi"}]})
    worker = await start_worker(agent_definitions(script))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        keys = stack.store.api_keys
        acme = keys.create("acme", ["threads:read", "threads:write"]).secret
        globex = keys.create("globex", ["threads:read", "threads:write"]).secret
        reader = keys.create("acme", ["threads:read"]).secret

        def client(key: str) -> httpx.AsyncClient:
            return httpx.AsyncClient(
                timeout=60, base_url=stack.url, headers={"Authorization": f"Bearer {key}"}
            )

        async with (
            client(acme) as http_acme,
            client(globex) as http_globex,
            client(reader) as http_reader,
        ):
            started = await http_acme.post(
                "/threads", json={"agent": "helper"}, headers={"Idempotency-Key": "start-1"}
            )
            assert started.status_code == 201, started.text
            thread_id = started.json()["threadId"]
            sent = await http_acme.post(
                f"/threads/{thread_id}/messages",
                json={"content": "hello"},
                headers={"Idempotency-Key": "msg-1"},
            )
            assert sent.status_code == 202, sent.text

            other = await http_globex.delete(f"/threads/{thread_id}")
            assert other.status_code == 404 and other.json()["error"] == f"no thread {thread_id!r}"
            refused = await http_reader.delete(f"/threads/{thread_id}")
            assert refused.status_code == 403 and "threads:write" in refused.json()["error"]

            deleted = await http_acme.delete(f"/threads/{thread_id}")
            assert deleted.status_code == 200, deleted.text
            (record,) = deleted.json()["deleted"]
            assert record["threadId"] == thread_id and record["idempotencyKeys"] == 2
            with stack.store.database.read() as connection:
                assert connection.scalar(select(idempotency_keys.c.key)) is None
            again = await http_acme.delete(f"/threads/{thread_id}")
            assert again.status_code == 404

        # The server's token (admin) deletes any tenant's thread.
        _seed(stack.store, "globex-1", tenant="globex")
        assert (await stack.http.delete("/threads/globex-1")).status_code == 200
        assert not stack.store.deletion.known("globex-1")
        # Recorded as the token's, on globex's thread: the tenant read before it went.
        (by_token,) = stack.store.audit.list(thread_id="globex-1")
        assert (by_token.subject, by_token.tenant, by_token.status) == ("token", "globex", 200)
        audited = stack.store.audit.list(thread_id=thread_id)
        assert [(e.method, e.status) for e in audited if e.method == "DELETE"] == [
            ("DELETE", 404),
            ("DELETE", 403),
            ("DELETE", 200),
            ("DELETE", 404),
        ]


async def test_cli_deletes_a_tenant(temporal_client, weft_config, tmp_path, capsys):
    # A tenant of this test's own: Temporal's visibility is shared with other tests, and a
    # tenant deletion deletes every thread it lists for the tenant.
    suffix = uuid.uuid4().hex[:8]
    acme = f"acme-{suffix}"
    config = tmp_path / "weft.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "temporal": {"address": weft_config.temporal.address},
                "store": {"url": weft_config.store_url()},
            }
        )
    )
    with Store.open(weft_config.store_url()) as store:
        _seed(store, "acme-1", tenant=acme)
        _seed(store, "acme-2", tenant=acme)
        _seed(store, "other-1", tenant="globex")
        store.api_keys.create(acme, ["threads:read"])
        store.tenant_quotas.set(acme, max_active_threads=5, max_tokens=None, max_cost_usd=None)
        store.retention.set_tenant(acme, "30d")
        store.retention.set_tenant("globex", "30d")
        # A schedule of acme's (it would start acme's threads after the deletion) and one of
        # globex's, which stays.
        schedules = Schedules(temporal_client, task_queue=weft_config.temporal.task_queue)
        ours, kept = f"acme-nightly-{suffix}", f"globex-nightly-{suffix}"
        await schedules.create(ours, message="x", agent="helper", every="1h", tenant=acme)
        await schedules.create(kept, message="x", agent="helper", every="1h", tenant="globex")

        assert (
            await asyncio.to_thread(weft_cli, ["--config", str(config), "tenant", "delete", acme])
            == 1
        )
        assert "pass --yes" in capsys.readouterr().err
        bad = ["--config", str(config), "tenant", "delete", "a b", "--yes"]
        assert await asyncio.to_thread(weft_cli, bad) == 1
        assert capsys.readouterr().err.startswith("weft: tenant 'a b': 1 to 64")
        code = await asyncio.to_thread(
            weft_cli, ["--config", str(config), "tenant", "delete", acme, "--yes"]
        )
        assert code == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert "deleted acme-1" in out and "deleted acme-2" in out and "1 API keys" in out
        # Each tenant's schedule is named in its own space (docs/tenants.md).
        assert f"deleted schedule {acme}:{ours}" in out and kept not in out
        with pytest.raises(ScheduleNotFound):
            await schedules.describe(f"{acme}:{ours}")
        assert (await schedules.describe(f"globex:{kept}")).tenant == "globex"
        await schedules.delete(f"globex:{kept}")
        assert store.deletion.tenant_threads(acme) == []
        assert store.deletion.tenant_threads("globex") == ["other-1"]
        assert store.api_keys.list(tenant=acme) == []
        assert store.tenant_quotas.get(acme) is None
        assert store.retention.tenants() == {"globex": "30d"}

        code = await asyncio.to_thread(
            weft_cli, ["--config", str(config), "thread", "delete", "other-1", "--yes", "--json"]
        )
        assert code == 0 and '"threadId": "other-1"' in capsys.readouterr().out
        code = await asyncio.to_thread(
            weft_cli, ["--config", str(config), "thread", "delete", "other-1", "--yes"]
        )
        assert code == 1 and "no thread 'other-1'" in capsys.readouterr().err
        # The tenant deletion and the one thread deletion that found its thread, each by
        # `cli:<os user>` and naming the tenant whose data it was.
        recorded = store.audit.list()
        assert [e.subject.split(":")[0] for e in recorded] == ["cli", "cli"]
        assert sorted((e.route, e.tenant) for e in recorded) == [
            ("/tenants/{tenant}", acme),
            ("/threads/{thread_id}", "globex"),
        ]


# -- migration 0016 ---------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_migration_indexes_blob_references_and_goes_back(backend, tmp_path, request):
    """0016 adds the blob-digest indexes that deletion's reference counts use; its
    downgrade drops them; a store from before it upgrades and deletes as any other."""
    url = (
        f"sqlite:///{tmp_path / 'old.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_databases")()
    )
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    config = alembic_config()
    try:
        upgrade(engine, "0015")

        def indexes() -> set[str]:
            found: set[str] = set()
            for table in ("files", "file_history"):
                found.update(str(i["name"]) for i in inspect(engine).get_indexes(table))
            return found & {"ix_files_blob_digest", "ix_file_history_blob_digest"}

        assert indexes() == set()
        with Store(engine) as store:
            store.files.write_file("old", "/a.txt", "old bytes")
        upgrade(engine)
        assert indexes() == {"ix_files_blob_digest", "ix_file_history_blob_digest"}
        with Store(engine) as store:
            assert store.deletion.delete_thread("old").blobs == 1
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0015")
        assert indexes() == set()
    finally:
        engine.dispose()
