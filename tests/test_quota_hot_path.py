"""Tenant quotas cost a model call nothing when its tenant has none (issue #40).

A model call reads its tree's budget ledger once anyway (in the step's snapshot, or in the
write that stores what the step brings); the tenant's quota is joined into that statement
(`store/tenant_quotas.py` `ledger_and_quota`), and the charge updates the quota row that
read found, by its key, or nothing at all. Counted with the engine's cursor events on a
real worker (the scripted model, the session's dev server, a SQLite store): a call with
no quota runs no statement for it; with a quota, the one joined read and one update by
the tenant's key. The joined read itself is checked on SQLite and PostgreSQL.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Engine, event
from support import (
    StartWorker,
    add_script,
    agent_definitions,
    idle_after,
    start_thread,
    store_of,
    wait_until,
)
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from weft.activities.model_request import ModelRequests
from weft.contract.activities import ModelCallInput
from weft.contract.budget import BUDGET_EXHAUSTED, Budget
from weft.contract.events import Event
from weft.contract.messages import Message
from weft.store import Store, ThreadRow
from weft.store.tenant_quotas import ledger_and_quota
from weft.workers.scripted_model import ScriptedModelServer

SCRIPT = {"turns": [{"replies": [{"text": "hi there"}]} for _ in range(3)]}
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
# The statement that reads a call's ledger, its tenant's quota joined (tenant_quotas.py).
JOINED_READ = "AS anchor LEFT OUTER JOIN budgets"


@contextmanager
def statements_of(engine: Engine) -> Iterator[list[str]]:
    """Every statement the engine runs while inside, whitespace folded."""
    seen: list[str] = []

    def count(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        seen.append(" ".join(statement.split()))

    event.listen(engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", count)


async def _second_turn(
    start_worker: StartWorker,
    temporal_client: Client,
    scripted_server: ScriptedModelServer,
    *,
    before: Callable[[Store], Any] = lambda store: None,
) -> tuple[Store, str, list[str]]:
    """A thread's second turn (one model call, no tools) on a fresh worker: its store, the
    thread and the statements the turn ran (the first turn warms the worker's caches)."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    store = store_of(worker)
    before(store)
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hello"}]
    )
    await wait_until(handle, idle_after(1), timeout=30)
    with statements_of(store.engine) as seen:
        await handle.signal("queue_message", {"role": "user", "content": "again"})
        state = await wait_until(handle, idle_after(2), timeout=30)
    assert state.counters.steps == 2, state
    return store, handle.id, seen


def _mentioning(statements: list[str], table: str) -> list[str]:
    return [s for s in statements if table in s]


async def test_a_model_call_without_a_quota_runs_no_statement_for_it(
    start_worker, temporal_client, scripted_server
):
    """No tenant has a quota: the turn's model call reads its ledger once, with the quota
    joined in, and runs no other statement that names `tenant_quotas` (no read of its own,
    no charge that updates nothing)."""
    store, thread_id, seen = await _second_turn(start_worker, temporal_client, scripted_server)
    quota_statements = _mentioning(seen, "tenant_quotas")
    joined = [s for s in quota_statements if JOINED_READ in s]
    assert joined and len(joined) == len(quota_statements), quota_statements
    assert len(joined) == 1, joined  # one model call, one ledger read
    # The ledger is read nowhere else: the quota rides on the read the call makes anyway.
    ledger_reads = [s for s in seen if s.startswith("SELECT budgets.")]
    assert ledger_reads == joined, ledger_reads
    # The charge reached the ledger (so the call was charged), and no quota row came of it.
    ledger = store.budgets.get(thread_id, now=datetime.now(UTC))
    assert ledger is not None and ledger.spent.model_calls == 2
    assert store.tenant_quotas.get("default") is None


async def test_a_model_call_with_a_quota_reads_it_joined_and_charges_it_by_key(
    start_worker, temporal_client, scripted_server
):
    """The tenant has a quota: the same one joined read, and one update of its row by the
    tenant's key (no lookup of the tenant through the threads table), counting what the
    ledger counts."""

    def set_quota(store: Store) -> None:
        store.tenant_quotas.set(
            "default", max_active_threads=None, max_tokens=10_000_000, max_cost_usd=None
        )

    store, thread_id, seen = await _second_turn(
        start_worker, temporal_client, scripted_server, before=set_quota
    )
    quota_statements = _mentioning(seen, "tenant_quotas")
    reads = [s for s in quota_statements if s.startswith("SELECT")]
    updates = [s for s in quota_statements if s.startswith("UPDATE tenant_quotas")]
    assert len(reads) == 1 and JOINED_READ in reads[0], reads
    assert len(updates) == 1 and "threads" not in updates[0], updates
    assert len(quota_statements) == 2, quota_statements
    quota = store.tenant_quotas.get("default")
    ledger = store.budgets.get(thread_id, now=datetime.now(UTC))
    assert quota is not None and ledger is not None
    assert quota.tokens == ledger.spent.tokens > 0


def _thread(store: Store, thread_id: str, tenant: str) -> None:
    store.threads.upsert(
        ThreadRow(
            thread_id=thread_id, agent="helper", status="running", created_at=NOW, tenant=tenant
        )
    )


def _requested(thread_id: str) -> Event:
    return Event(
        type="model.requested",
        event_id=f"{thread_id}:s1.m.a1:requested",
        timestamp="2026-01-01T12:00:00.000Z",
        thread_id=thread_id,
        payload={"model": "m"},
    )


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_joined_read_finds_the_ledger_and_the_quota_apart(
    backend: str, tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    """On both backends: the ledger and the tenant's quota in one row whichever exists,
    the quota of the root's tenant; and a spent quota refuses a call in the write with
    `quota.blocked` (scope tenant) in place of `model.requested`, the ledger untouched."""
    url = (
        f"sqlite:///{tmp_path / 'store.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_databases")()
    )
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    root, child, stray = (f"thread-{uuid.uuid4().hex[:12]}" for _ in range(3))
    with Store.open(url) as store:
        _thread(store, root, tenant)
        _thread(store, child, tenant)

        def read(root_id: str | None, thread_id: str) -> Any:
            with store.engine.connect() as connection:
                return ledger_and_quota(connection, root_id, thread_id)

        found = read(root, child)
        assert found.ledger is None and found.quota is None  # neither exists yet
        store.budgets.open(root, Budget(max_tokens=500), now=NOW)
        found = read(root, child)
        assert found.ledger is not None and found.ledger.root_thread_id == root
        assert found.quota is None
        store.tenant_quotas.set(tenant, max_active_threads=None, max_tokens=5, max_cost_usd=None)
        found = read(root, child)
        assert found.ledger is not None and found.ledger.tokens == 0
        assert found.quota is not None and found.quota.tenant == tenant
        assert (found.quota.max_tokens, found.quota.tokens) == (5, 0)
        # Without a ledger (histories from before budgets): the thread's own tenant.
        assert read(None, child).ledger is None
        assert read(None, child).quota == found.quota
        assert read(stray, stray).quota is None  # no thread row: no tenant known

        with store.engine.begin() as connection:
            connection.exec_driver_sql(
                "UPDATE tenant_quotas SET tokens = 7 WHERE tenant = "
                + ("?" if backend == "sqlite" else "%s"),
                (tenant,),
            )
        checked = store.budgets.record_checked(
            root,
            [],
            [],
            _requested(child),
            now=NOW,
            make_event=lambda suffix, kind, data: Event(
                type=kind,
                event_id=f"{child}:s1.m.a1:{suffix}",
                timestamp="2026-01-01T12:00:00.000Z",
                thread_id=child,
                payload=data,
            ),
        )
        assert checked.tenant_spent and checked.refused_by is None
        stored = store.events.read(child)
        assert [e.type for e in stored] == ["quota.blocked"]
        assert stored[0].payload == {
            "rootThreadId": root,
            "tenant": tenant,
            "limit": "tokens",
            "spent": 7,
            "limitValue": 5,
            "scope": "tenant",
        }
        ledger = store.budgets.get(root, now=NOW)
        assert ledger is not None and ledger.blocked is None


def test_a_call_from_before_budgets_is_refused_by_its_own_threads_tenant(
    tmp_path: Any,
) -> None:
    """A history from before budgets calls with no budget root: no ledger, so the quota of
    the thread's own tenant is read alone; spent, the step's message is kept and
    `quota.blocked` stored in place of `model.requested`, the call refused as
    `budget_exhausted`."""
    thread_id = f"thread-{uuid.uuid4().hex[:12]}"
    with Store.open(f"sqlite:///{tmp_path / 'store.db'}") as store:
        _thread(store, thread_id, "acme")
        store.tenant_quotas.set("acme", max_active_threads=None, max_tokens=1, max_cost_usd=None)
        with store.engine.begin() as connection:
            connection.exec_driver_sql("UPDATE tenant_quotas SET tokens = 3")
        call = ModelCallInput(
            thread_id=thread_id,
            snapshot_id="snap",
            side="a",
            model="m",
            turn_id="t1",
            step_id="t1.s1",
            step=1,
            assistant_message_id="m2",
            assistant_position=2,
            budget_root=None,
        )
        kept = Message(
            id="m1", thread_id=thread_id, position=1, role="user", content="kept", created_at=1
        )
        requests = ModelRequests(store)
        with pytest.raises(ApplicationError) as refused:
            ActivityEnvironment().run(
                requests._record_checked, call, [kept], [_requested(thread_id)], True
            )
        assert refused.value.type == BUDGET_EXHAUSTED and refused.value.non_retryable
        assert "'acme' is at its quota maxTokens (tokens spent: 3 of 1)" in str(refused.value)
        stored = store.events.read(thread_id)
        assert [e.type for e in stored] == ["quota.blocked"]
        assert stored[0].payload is not None and stored[0].payload["rootThreadId"] == thread_id
        assert [m.content for m in store.messages.list(thread_id)] == ["kept"]
