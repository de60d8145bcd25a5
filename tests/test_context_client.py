"""`weft thread compact/context` and `Threads.context` when no worker answers: the store speaks.

These need a Temporal server at most, never a worker: a thread only in the store, and a
running workflow on a task queue nobody polls, stand in for closed and unanswered threads.
The end-to-end path through a live workflow is tested with the compaction workflow itself.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from weft.cli.main import _parser, run
from weft.client import context as context_client
from weft.client.context import CLOSED, UNANSWERED_QUERY, context_from_store
from weft.client.threads import Threads
from weft.contract.context import ContextBoundary
from weft.store import Store, ThreadRow
from weft.workers.dev_server import DevServer


def _boundary(thread_id: str, n: int, *, first_kept: int) -> ContextBoundary:
    return ContextBoundary(
        boundary_id=f"b{n}",
        thread_id=thread_id,
        kind="summary",
        reason="requested",
        first_kept_position=first_kept,
        summarised_from_position=0,
        summarised_messages=first_kept,
        pinned_message_ids=["m1"] if n == 2 else [],
        summary=f"summary {n}",
        model="scripted",
        tokens_before=9000,
        tokens_after=2000,
        previous_boundary_id=f"b{n - 1}" if n > 1 else None,
        created_at=f"2025-01-0{n}T00:00:00Z",
    )


def _closed_thread(store: Store, *, boundaries: int) -> str:
    """A thread as a closed one leaves it in the store: its row and its boundaries."""
    thread_id = f"ctx-{uuid.uuid4().hex[:12]}"
    store.threads.upsert(
        ThreadRow(thread_id=thread_id, agent="a", status="cancelled", created_at=datetime.now(UTC))
    )
    for n in range(1, boundaries + 1):
        store.boundaries.add(_boundary(thread_id, n, first_kept=10 * n))
    return thread_id


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A migrated SQLite store of this test."""
    with Store.open(f"sqlite:///{tmp_path / 'weft.db'}") as opened:
        yield opened


def test_cli_parses_compact_and_context() -> None:
    """`thread compact ID [--reason]` and `thread context ID` reach their handlers."""
    parser = _parser()
    compact = parser.parse_args(["thread", "compact", "t1", "--reason", "too long"])
    assert (compact.thread_id, compact.reason) == ("t1", "too long")
    assert compact.handler.__name__ == "_thread_compact"
    assert parser.parse_args(["thread", "compact", "t1"]).reason is None
    context = parser.parse_args(["thread", "context", "t1"])
    assert context.thread_id == "t1" and context.handler.__name__ == "_thread_context"
    with pytest.raises(SystemExit):
        parser.parse_args(["thread", "context"])


def test_store_snapshot_lists_boundaries_and_names_what_it_cannot_know(store: Store) -> None:
    """Newest boundary in force, every summary oldest first, no live state pretended."""
    thread_id = _closed_thread(store, boundaries=2)
    snapshot = context_from_store(store, thread_id)
    assert snapshot is not None
    assert snapshot["kind"] == "context_boundary_snapshot" and snapshot["threadId"] == thread_id
    assert snapshot["boundary"]["boundaryId"] == "b2"
    assert [s["boundaryId"] for s in snapshot["compactionSummaries"]] == ["b1", "b2"]
    assert snapshot["selectedRefs"] == [
        f"weft://threads/{thread_id}/messages/m1",
        f"weft://threads/{thread_id}/positions/20-",
    ]
    assert snapshot["contextState"] == {}
    assert snapshot["missingFacts"] == [CLOSED]


def test_store_snapshot_of_a_thread_that_never_compacted_and_of_an_unknown_one(
    store: Store,
) -> None:
    """A known thread without boundaries sends everything; an unknown thread is None."""
    thread_id = _closed_thread(store, boundaries=0)
    snapshot = context_from_store(store, thread_id)
    assert snapshot is not None and snapshot["boundary"] is None
    assert snapshot["selectedRefs"] == [f"weft://threads/{thread_id}/positions/0-"]
    assert context_from_store(store, "ctx-nobody") is None


async def test_context_of_a_thread_temporal_does_not_know_comes_from_the_store(
    temporal_client: Client, store: Store
) -> None:
    """Closed (here: never in Temporal) means the stored boundaries; no store is an error."""
    thread_id = await asyncio.to_thread(_closed_thread, store, boundaries=1)
    snapshot = await Threads(temporal_client, store=store).context(thread_id)
    assert snapshot is not None and snapshot["boundary"]["boundaryId"] == "b1"
    assert snapshot["missingFacts"] == [CLOSED]
    assert await Threads(temporal_client, store=store).context("ctx-nobody") is None
    with pytest.raises(ValueError, match="no store"):
        await Threads(temporal_client).context(thread_id)


async def test_running_thread_without_a_worker(
    temporal_client: Client, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compact signals land in history as sent; an unanswered query falls back, saying why."""
    # Nobody polls the queue, so the query waits out its timeout: keep that short.
    monkeypatch.setattr(context_client, "QUERY_TIMEOUT", timedelta(seconds=2))
    threads = Threads(temporal_client, task_queue=f"nobody-{uuid.uuid4().hex[:8]}", store=store)
    handle = await threads.start("a", messages=["hi"])
    try:
        await threads.compact(handle.id, "too long")
        await threads.compact(handle.id)
        signals = [
            e.workflow_execution_signaled_event_attributes
            async for e in handle.fetch_history_events()
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
        ]
        assert [s.signal_name for s in signals] == ["compact", "compact"]
        assert [json.loads(p.data) for p in signals[0].input.payloads] == [{"reason": "too long"}]
        assert list(signals[1].input.payloads) == []
        await asyncio.to_thread(store.boundaries.add, _boundary(handle.id, 1, first_kept=4))
        snapshot = await threads.context(handle.id)
        assert snapshot is not None and snapshot["boundary"]["boundaryId"] == "b1"
        assert snapshot["missingFacts"] == [UNANSWERED_QUERY]
    finally:
        await handle.terminate()


def _config(tmp_path: Path, address: str, task_queue: str) -> str:
    path = tmp_path / "weft.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "temporal": {"address": address, "taskQueue": task_queue},
                "store": {"url": f"sqlite:///{tmp_path / 'weft.db'}"},
            }
        )
    )
    return str(path)


async def test_cli_context_prints_json_and_compact_confirms(
    dev_server: DevServer,
    temporal_client: Client,
    store: Store,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`weft thread context` prints the snapshot; unknown threads and compact say one line."""
    for name in ("WEFT_TEMPORAL_ADDRESS", "WEFT_STORE_URL", "WEFT_TASK_QUEUE"):
        monkeypatch.delenv(name, raising=False)
    task_queue = f"nobody-{uuid.uuid4().hex[:8]}"
    config = _config(tmp_path, dev_server.address, task_queue)
    thread_id = await asyncio.to_thread(_closed_thread, store, boundaries=1)

    async def weft(*args: str) -> tuple[int, Any, str]:
        # `run` owns an event loop, so it runs beside this test's.
        code = await asyncio.to_thread(run, ["--config", config, *args])
        out, err = capsys.readouterr()
        return code, out, err

    code, out, _ = await weft("thread", "context", thread_id)
    assert code == 0
    assert json.loads(out)["boundary"]["summary"] == "summary 1"
    code, _, err = await weft("thread", "context", "ctx-nobody")
    assert code == 1 and err == "weft: thread 'ctx-nobody' not found\n"

    handle = await Threads(temporal_client, task_queue=task_queue).start("a", messages=["hi"])
    try:
        code, out, _ = await weft("thread", "compact", handle.id, "--reason", "now")
        assert code == 0 and out.strip() == f"compaction requested for {handle.id}"
    finally:
        await handle.terminate()
