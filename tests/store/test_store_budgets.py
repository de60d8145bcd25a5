"""`store.budgets`: ledgers opened once, charged exactly once per attempt, checked, raised."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from store_factories import event, new_thread_id

from weft.contract.budget import Budget
from weft.contract.events import Event
from weft.store import Store
from weft.store.budget_rows import SET_BUDGET_REASON
from weft.store.budgets import Charge

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _maker(thread_id: str, attempt: str) -> Any:
    def make(suffix: str, type_: str, payload: dict[str, Any]) -> Event:
        return event(thread_id, f"{attempt}:{suffix}", type_, payload=payload)

    return make


def _charge(store: Store, root: str, thread_id: str, attempt: str, tokens: int) -> list[Event]:
    cost = event(thread_id, f"{attempt}:cost", "cost.recorded", payload={"rootThreadId": root})
    stored, _ = store.budgets.record_charged(
        [],
        [cost],
        Charge(root, cost.event_id, tokens, 0.01),
        now=T0,
        make_event=_maker(thread_id, attempt),
    )
    return stored


def test_a_ledger_opens_once_and_keeps_its_start(store: Store) -> None:
    """Opening again (a retried thread.init) keeps the first limits and start time."""
    root = new_thread_id()
    first = store.budgets.open(root, Budget(max_model_calls=3), now=T0)
    again = store.budgets.open(root, Budget(max_model_calls=9), now=T0 + timedelta(hours=1))
    assert first.limits.max_model_calls == again.limits.max_model_calls == 3
    later = store.budgets.get(root, now=T0 + timedelta(seconds=90))
    assert later is not None and later.spent.wall_seconds == 90.0


def test_a_charge_counts_once_and_announces_low_once(store: Store) -> None:
    """Storing the same cost.recorded twice charges once; crossing 80 % emits quota.low once."""
    root = new_thread_id()
    store.budgets.open(root, Budget(max_tokens=100, max_model_calls=10), now=T0)
    stored = _charge(store, root, root, "s1.a1", 85)
    assert [e.type for e in stored] == ["cost.recorded", "quota.low", "limit.changed"]
    assert stored[1].payload == {
        "rootThreadId": root,
        "limit": "tokens",
        "spent": 85.0,
        "limitValue": 100,
    }
    assert _charge(store, root, root, "s1.a1", 85) == []  # a retried write
    assert [e.type for e in _charge(store, root, root, "s2.a1", 5)] == ["cost.recorded"]
    state = store.budgets.get(root, now=T0)
    assert state is not None
    assert (state.spent.tokens, state.spent.model_calls) == (90, 2)
    assert abs(state.spent.cost_usd - 0.02) < 1e-9


def test_a_spent_ledger_refuses_the_call_until_raised(store: Store) -> None:
    """A spent limit stores quota.blocked instead of model.requested; set_budget unblocks."""
    root = new_thread_id()
    store.budgets.open(root, Budget(max_model_calls=1), now=T0)
    _charge(store, root, root, "s1.a1", 10)
    requested = event(root, "s2.a1:requested", "model.requested")
    checked = store.budgets.record_checked(
        root, [], [], requested, now=T0, make_event=_maker(root, "s2.a1")
    )
    assert checked.refused_by == "modelCalls"
    assert checked.state is not None and checked.state.blocked == "modelCalls"
    types = [e.type for e in store.events.read(root)]
    assert "quota.blocked" in types and "model.requested" not in types
    raised = event(
        root,
        "set-1",
        "limit.changed",
        payload={"rootThreadId": root, "reason": SET_BUDGET_REASON, "limits": {"maxModelCalls": 5}},
    )
    store.events.append([raised])
    state = store.budgets.get(root, now=T0)
    assert state is not None and state.blocked is None and state.limits.max_model_calls == 5
    checked = store.budgets.record_checked(
        root,
        [],
        [],
        event(root, "s3.a1:requested", "model.requested"),
        now=T0,
        make_event=_maker(root, "s3.a1"),
    )
    assert checked.refused_by is None
    assert store.events.read(root)[-1].type == "model.requested"


def test_wall_time_refuses_after_the_limit(store: Store) -> None:
    """Wall time counts from the ledger's start and is checked at the model call."""
    root = new_thread_id()
    store.budgets.open(root, Budget(max_wall_seconds=60), now=T0)
    checked = store.budgets.record_checked(
        root,
        [],
        [],
        event(root, "s1.a1:requested", "model.requested"),
        now=T0 + timedelta(seconds=61),
        make_event=_maker(root, "s1.a1"),
    )
    assert checked.refused_by == "wallSeconds"


def test_no_ledger_means_no_check_and_no_charge(store: Store) -> None:
    """A tree without a ledger is never refused and charging it is a no-op."""
    root = new_thread_id()
    checked = store.budgets.record_checked(
        root,
        [],
        [],
        event(root, "s1.a1:requested", "model.requested"),
        now=T0,
        make_event=_maker(root, "s1.a1"),
    )
    assert checked == type(checked)(None, None)
    assert [e.type for e in _charge(store, root, root, "s1.a1", 5)] == ["cost.recorded"]
    assert store.budgets.get(root, now=T0) is None


def test_concurrent_charges_from_a_tree_add_up_exactly(store: Store) -> None:
    """Threads of one tree charging at once, each attempt twice: every attempt counts once."""
    root = new_thread_id()
    store.budgets.open(root, Budget(max_tokens=10**9), now=T0)
    threads = [root, *(new_thread_id() for _ in range(3))]
    jobs = [(t, f"s{i}.a1") for t in threads for i in range(15)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda job: _charge(store, root, job[0], job[1], 7), jobs * 2))
    newly = [e for stored in results for e in stored if e.type == "cost.recorded"]
    assert len(newly) == len(jobs)
    state = store.budgets.get(root, now=T0)
    assert state is not None
    assert (state.spent.model_calls, state.spent.tokens) == (len(jobs), 7 * len(jobs))
