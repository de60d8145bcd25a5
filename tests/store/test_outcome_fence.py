"""The write fences of store/outcome_fence.py: one outcome per tool call, and a
late completion writes nothing for a closed thread, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from store_factories import event, message, new_thread_id, running_thread

from weft.contract.budget import Budget
from weft.contract.events import Event
from weft.contract.messages import Message
from weft.store import Store
from weft.store.budgets import Charge


def _result(thread: str, *, status: str, event_id: str, type_: str) -> tuple[Message, Event]:
    """A tool result message for call `c1` (always the id `m5`) and its outcome event."""
    stored = message(thread, 5, id="m5", role="tool", tool_call_id="c1", tool_status=status)
    outcome = event(thread, event_id, type_, tool_call_id="c1", payload={"status": status})
    return stored, outcome


def _outcomes(store: Store, thread: str) -> list[tuple[str, str | None]]:
    return [
        (e.type, e.event_id)
        for e in store.events.read(thread, types=["tool.result", "tool.failed"])
    ]


def test_a_late_result_after_the_recorded_abort_writes_nothing(store: Store) -> None:
    """The workflow recorded the call aborted: the activity's late result stores neither its
    message nor its `tool.result`, while its other events still go in."""
    thread = new_thread_id()
    aborted, failed = _result(thread, status="error", event_id="wf-failed", type_="tool.failed")
    store.events.record([aborted], [failed])
    late, result = _result(thread, status="success", event_id="c1:done", type_="tool.result")
    other = event(thread, "hook-1", "hook.completed")
    store.events.record([late], [result, other])
    assert _outcomes(store, thread) == [("tool.failed", "wf-failed")]
    stored = store.messages.get(thread, "m5")
    assert stored is not None and stored.tool_status == "error"
    assert [e.event_id for e in store.events.read(thread)] == ["wf-failed", "hook-1"]


def test_a_result_stored_first_keeps_the_later_abort_out(store: Store) -> None:
    """The tool's result reached the store first: the workflow's abort record for the same
    call stores no `tool.failed`, so the log states one outcome."""
    thread = new_thread_id()
    done, result = _result(thread, status="success", event_id="c1:done", type_="tool.result")
    store.events.record([done], [result])
    aborted, failed = _result(thread, status="error", event_id="wf-failed", type_="tool.failed")
    store.events.record([aborted], [failed, event(thread, "closed", "thread.updated")])
    assert _outcomes(store, thread) == [("tool.result", "c1:done")]
    assert [e.event_id for e in store.events.read(thread)] == ["c1:done", "closed"]


def test_a_retried_record_of_the_same_result_is_idempotent(store: Store) -> None:
    """The same attempt's record written twice stores its outcome once."""
    thread = new_thread_id()
    done, result = _result(thread, status="success", event_id="c1:done", type_="tool.result")
    store.events.record([done], [result])
    assert store.events.record([done], [result]) == []
    assert _outcomes(store, thread) == [("tool.result", "c1:done")]


def test_nothing_is_written_for_a_closed_thread_unless_asked(store: Store) -> None:
    """`unless_closed` writes nothing once the thread's row says it closed; the workflow's
    own writes (without it) still go in."""
    thread = new_thread_id()
    store.threads.upsert(running_thread(thread))
    done, result = _result(thread, status="success", event_id="c1:done", type_="tool.result")
    store.threads.upsert(running_thread(thread, status="cancelled"))
    assert store.events.record([done], [result], unless_closed=True) == []
    assert store.messages.get(thread, "m5") is None and store.events.read(thread) == []
    assert len(store.events.record([], [event(thread, "snap", "snapshot.updated")])) == 1


def test_a_running_thread_takes_the_fenced_write(store: Store) -> None:
    """`unless_closed` writes as usual while the thread runs (or has no row yet)."""
    thread = new_thread_id()
    done, result = _result(thread, status="success", event_id="c1:done", type_="tool.result")
    assert len(store.events.record([done], [result], unless_closed=True)) == 1
    store.threads.upsert(running_thread(thread))
    assert len(store.events.record([], [event(thread, "e2")], unless_closed=True)) == 1


def test_a_model_reply_after_the_close_is_charged_not_written(store: Store) -> None:
    """A model call whose thread closed meanwhile: its reply message and `model.completed`
    are not written, its `cost.recorded` is, and the ledger counts the spend."""
    thread = new_thread_id()
    store.budgets.open(thread, Budget(max_tokens=1000), now=datetime(2026, 1, 1, tzinfo=UTC))
    store.threads.upsert(running_thread(thread, status="cancelled"))
    reply = message(thread, 7, id="m7", role="assistant", content="too late")
    completed = event(thread, "a1:completed", "model.completed")
    cost = event(thread, "a1:cost", "cost.recorded", payload={"rootThreadId": thread})

    def make(suffix: str, type_: str, payload: dict[str, Any]) -> Event:
        return event(thread, f"a1:{suffix}", type_, payload=payload)

    stored, ledger = store.budgets.record_charged(
        [reply],
        [completed, cost],
        Charge(thread, cost.event_id, 40, 0.02),
        now=datetime(2026, 1, 1, tzinfo=UTC),
        make_event=make,
        unless_closed=True,
    )
    assert [e.event_id for e in stored] == ["a1:cost"]
    assert ledger is not None and ledger.spent.tokens == 40
    assert store.messages.get(thread, "m7") is None
    assert [e.type for e in store.events.read(thread)] == ["cost.recorded"]
