"""A model step's own write (its new messages and the workflow's outbox) is made beside the
request (activities/model_call.py `beside`): the request does not wait for it, but no fact
of the reply is written before it commits, and a write that fails fails the attempt with
nothing of the reply stored."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from support import (
    add_script,
    content_of,
    idle_after,
    start_thread,
    stored_events,
    until,
    wait_until,
)

from weft.contract.messages import Message
from weft.definitions import Definitions, define_agent, define_model, define_prompt
from weft.store import Store
from weft.store.transcripts import message_json
from weft.workers.agent_worker import AgentWorker

QUESTION = "is the write beside the request?"


def _definitions(script: str) -> Definitions:
    return Definitions().add(
        define_model(name="scripted", provider="scripted", model=script),
        define_prompt(name="p", toolDescription="d", model="scripted", prompt="Be brief."),
        define_agent(name="helper", sideA={"prompt": "p"}),
    )


@contextmanager
def step_writes(
    store: Store, around: Callable[[Callable[[], Any], list[Message]], Any]
) -> Iterator[None]:
    """Run the step writes that store the question (`budgets.record_checked`, or
    `events.record` for a thread without a ledger) through `around`, with the messages
    the activity was given."""
    budgets, events = store.budgets, store.events
    record_checked, record = budgets.record_checked, events.record

    def has_question(messages: Any) -> bool:
        return any(isinstance(m, Message) and m.content == QUESTION for m in messages)

    def checked(root: Any, messages: Any, *args: Any, **kwargs: Any) -> Any:
        call = lambda: record_checked(root, messages, *args, **kwargs)  # noqa: E731
        return around(call, list(messages)) if has_question(messages) else call()

    def plain(messages: Any, *args: Any, **kwargs: Any) -> Any:
        call = lambda: record(messages, *args, **kwargs)  # noqa: E731
        return around(call, list(messages)) if has_question(messages) else call()

    budgets.record_checked = checked  # type: ignore[method-assign,assignment]
    events.record = plain  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        budgets.record_checked = record_checked  # type: ignore[method-assign]
        events.record = record  # type: ignore[method-assign]


def _asked(scripted_server: Any) -> bool:
    return any(QUESTION in str(r) for r in scripted_server.requests)


async def test_the_request_goes_out_while_the_step_write_commits(
    start_worker: Any, temporal_client: Any, scripted_server: Any
) -> None:
    """Held in the step's write, the question has already reached the model, and nothing
    of the reply is stored; released, the reply follows the step's facts in order."""
    script = add_script(scripted_server, {"replies": [{"text": "yes, beside", "chunk_size": 4}]})
    worker: AgentWorker = await start_worker(_definitions(script))
    store = worker.store
    assert store is not None
    entered, release = threading.Event(), threading.Event()
    given: list[Message] = []

    def held(write: Callable[[], Any], messages: list[Message]) -> Any:
        given.extend(messages)
        entered.set()
        release.wait(60)
        return write()

    with step_writes(store, held):
        try:
            handle = await start_thread(
                temporal_client,
                worker.task_queue,
                messages=[{"role": "user", "content": QUESTION}],
            )
            await until(entered.is_set, "the step's write began")
            await until(lambda: _asked(scripted_server), "the request reached the model", 20)
            # The write is still held: no fact of the call or its reply is stored yet.
            assert stored_events(worker, handle.id, "model.requested", "model.delta") == []
            assert not any(content_of(m) == QUESTION for m in store.messages.list(handle.id))
        finally:
            release.set()
        await wait_until(handle, idle_after(1))
    kinds = [
        e.type
        for e in stored_events(worker, handle.id)
        if e.type in ("model.requested", "context.resolved", "model.delta", "model.completed")
    ]
    assert kinds[:2] == ["model.requested", "context.resolved"], kinds
    assert kinds[-1] == "model.completed" and "model.delta" in kinds, kinds
    messages = store.messages.list(handle.id)
    assert [content_of(m) for m in messages][-2:] == [QUESTION, "yes, beside"]
    # The window held the question as the transcript cache reads it once stored, so the
    # next step's window extends the kept one.
    texts = store.transcripts.texts_since(handle.id, 0)
    assert [message_json(m) for m in given] == [t for t in texts if QUESTION in t]


async def test_a_failed_step_write_fails_the_attempt_with_nothing_of_the_reply(
    start_worker: Any, temporal_client: Any, scripted_server: Any
) -> None:
    """The step's write fails once after the request went out: attempt 1 stores nothing
    (no start events, no delta, no reply, no cost), and attempt 2 answers."""
    script = add_script(scripted_server, {"replies": [{"text": "second time lucky"}]})
    worker: AgentWorker = await start_worker(_definitions(script))
    store = worker.store
    assert store is not None
    failures = [RuntimeError("the store is away")]

    def failing_once(write: Callable[[], Any], messages: list[Message]) -> Any:
        if failures:
            # Once the request is out (bounded), so the failure meets a call under way.
            pause = threading.Event()
            for _ in range(200):
                if _asked(scripted_server):
                    break
                pause.wait(0.05)
            raise failures.pop()
        return write()

    with step_writes(store, failing_once):
        handle = await start_thread(
            temporal_client, worker.task_queue, messages=[{"role": "user", "content": QUESTION}]
        )
        await wait_until(handle, idle_after(1), timeout=60)
    assert not failures, "the step's write was never made"
    of_call = ("model.requested", "model.delta", "model.completed", "cost.recorded")
    attempts = {e.attempt_id for e in stored_events(worker, handle.id, *of_call)}
    assert attempts and all(str(a).endswith(".a2") for a in attempts), attempts
    replies = [m for m in store.messages.list(handle.id) if m.role == "assistant"]
    assert [content_of(m) for m in replies] == ["second time lucky"]
