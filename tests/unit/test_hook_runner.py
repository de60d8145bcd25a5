"""Unit tests of HookRunner on a real SQLite store: order, events, failures and refusals."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from weft.activities.clock import now_iso
from weft.activities.hooks import HookRunner
from weft.activities.tool_state import IntentUnavailable, ThreadState
from weft.contract.events import Event
from weft.contract.hooks import HookSpec
from weft.definitions import FunctionHook, HookBlocked, define_hook
from weft.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.open(f"sqlite:///{tmp_path / 'hooks.db'}")


def runner(
    store: Store,
    hooks: list[FunctionHook],
    in_scope: list[str],
    *,
    prefix: str = "a1",
    extra: list[HookSpec] | None = None,
) -> HookRunner:
    """A runner over `hooks` (and snapshot-only `extra` specs), writing its events to
    thread t1 under ids `prefix:…`."""

    async def state() -> ThreadState:
        return ThreadState(
            store=store,
            thread_id="t1",
            agent_id="helper",
            user_id=None,
            session_id=None,
            turn_id=None,
            tool_call_id=None,
            env={},
            abort=asyncio.Event(),
            event_prefix=f"{prefix}:hooks",
            intents_from="model.call",
        )

    async def sink(events: list[Event]) -> None:
        await asyncio.to_thread(store.events.append, events)

    def make_event(suffix: str, kind: str, payload: dict[str, Any]) -> Event:
        return Event(
            type=kind,
            event_id=f"{prefix}:{suffix}",
            timestamp=now_iso(),
            thread_id="t1",
            payload=payload,
        )

    return HookRunner(
        {h.id: h for h in hooks},
        {
            **{h.id: HookSpec(id=h.id, hook=h.hook) for h in hooks},
            **{spec.id: spec for spec in extra or []},
        },
        in_scope,
        state=state,
        sink=sink,
        make_event=make_event,
    )


def add(suffix: str) -> FunctionHook:
    return define_hook(
        id=f"add_{suffix}", hook="after_system_message", execute=lambda s, d: d["content"] + suffix
    )


async def test_hooks_run_in_list_order_each_on_what_the_last_left(store: Store) -> None:
    """In-scope hooks of a point chain in the order listed; others never run."""
    hooks = [add("1"), add("2"), add("3")]
    run = runner(store, hooks, ["add_2", "add_1"])

    outcome = await run.run("after_system_message", {"prompt": "p", "content": "x"}, check=_text)
    await run.flush()
    assert outcome.data["content"] == "x21"
    events = store.events.read("t1")
    assert [(e.type, e.payload["hookId"]) for e in events] == [
        ("hook.started", "add_2"),
        ("hook.completed", "add_2"),
        ("hook.started", "add_1"),
        ("hook.completed", "add_1"),
    ]


async def test_a_rerun_of_the_same_attempt_writes_no_event_twice(store: Store) -> None:
    """Event ids come from the attempt, the point's run count and the hook id."""
    for _ in range(2):
        run = runner(store, [add("1")], ["add_1"])
        await run.run("after_system_message", {"prompt": "p", "content": "x"}, check=_text)
        await run.flush()
    assert len(store.events.read("t1")) == 2
    retry = runner(store, [add("1")], ["add_1"], prefix="a2")
    await retry.run("after_system_message", {"prompt": "p", "content": "x"}, check=_text)
    await retry.flush()
    assert len(store.events.read("t1")) == 4  # a retried attempt writes its own


async def test_failures_keep_the_data_and_are_recorded(store: Store) -> None:
    """A raising hook, an unusable return and a refusal where none is allowed: hook.failed,
    and the data goes on unchanged; a hook missing on this worker fails the same way."""

    def mutate_then_raise(state: Any, data: dict[str, Any]) -> None:
        data["content"] = "mutated"
        raise RuntimeError("boom")

    hooks = [
        define_hook(id="raises", hook="after_system_message", execute=mutate_then_raise),
        define_hook(id="bad_return", hook="after_system_message", execute=lambda s, d: 42),
        define_hook(
            id="refuses",
            hook="after_system_message",
            execute=lambda s, d: (_ for _ in ()).throw(HookBlocked("no")),
        ),
    ]
    ghost = HookSpec(id="ghost", hook="after_system_message")  # in the snapshot only
    run = runner(store, hooks, ["raises", "bad_return", "refuses", "ghost"], extra=[ghost])
    outcome = await run.run("after_system_message", {"prompt": "p", "content": "x"}, check=_text)
    await run.flush()
    assert outcome.data == {"prompt": "p", "content": "x"} and outcome.blocked is None
    failed = [e.payload for e in store.events.read("t1", types=["hook.failed"])]
    assert [f["hookId"] for f in failed] == ["raises", "bad_return", "refuses", "ghost"]
    assert failed[0]["error"].startswith("RuntimeError: boom")
    assert "must return the system prompt as a string" in failed[1]["error"]
    assert "only before_* hooks may refuse" in failed[2]["error"]
    assert "not on this worker" in failed[3]["error"]


async def test_a_before_hook_refusal_stops_the_chain(store: Store) -> None:
    """HookBlocked from a before_* hook is a HookBlock; later hooks of the point do not run."""

    def refuse(state: Any, data: Any) -> None:
        raise HookBlocked("not this one")

    hooks = [
        define_hook(id="refuse", hook="before_create_message", execute=refuse),
        define_hook(id="later", hook="before_create_message", execute=lambda s, d: d),
    ]
    run = runner(store, hooks, ["refuse", "later"])
    outcome = await run.run("before_create_message", {"id": "m1", "content": "x"})
    assert outcome.blocked is not None
    assert (outcome.blocked.hook_id, outcome.blocked.reason) == ("refuse", "not this one")
    [done] = run.take_events()
    assert done.type == "hook.completed" and done.payload["outcome"] == "blocked"
    assert not [e for e in store.events.read("t1") if e.payload["hookId"] == "later"]


async def test_observing_hooks_cannot_change_data_and_intents_are_refused(store: Store) -> None:
    """An after_* observer's return is ignored; outside tool.call a hook asking the workflow
    for something (queue_message) fails clearly instead of being dropped."""

    def queue(state: ThreadState, data: Any) -> str:
        state.queue_message("more")
        return "ignored"

    hooks = [
        define_hook(id="observer", hook="after_create_message", execute=lambda s, d: {"x": 1}),
        define_hook(id="queues", hook="after_thread_created", execute=queue),
    ]
    run = runner(store, hooks, ["observer", "queues"])
    assert (await run.run("after_create_message", {"id": "m1"})).data == {"id": "m1"}
    await run.run("after_thread_created", {"threadId": "t1"})
    [failed] = [e for e in run.take_events() if e.type == "hook.failed"]
    assert failed.payload["error"].startswith("IntentUnavailable: queue_message is not available")
    assert IntentUnavailable.__name__ in failed.payload["error"]


def _text(value: Any) -> tuple[dict[str, Any], list[str]]:
    if not isinstance(value, str):
        raise TypeError("must return the system prompt as a string or None")
    return {"prompt": "p", "content": value}, []
