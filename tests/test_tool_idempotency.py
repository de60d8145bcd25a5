"""Side-effecting tools, exactly once: every call has a stable idempotency key on its
ThreadState, the same across retries and workers and different for every other call."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncIterator, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pydantic import BaseModel
from support import add_script, agent_definitions, content_of, idle_after, start_thread, wait_until
from worker_process import crash_drill, until_event, worker_config

from weft.activities.tool_state import idempotency_key
from weft.definitions import (
    define_effect,
    define_hook,
    define_model,
    define_prompt,
    define_tool,
)

# ---- a loopback ledger that deduplicates by Idempotency-Key -------------------------------


class Ledger:
    """An external API as Stripe's: a charge with a key it has seen returns the first
    charge again. `/gate` holds a request until the test releases it."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.requests: list[str] = []  # the key of every /charges request, in order
        self.charges: dict[str, dict[str, Any]] = {}  # key -> the one charge it made
        self.held = 0  # /gate requests that arrived
        self.released = threading.Event()
        self.url = ""

    def charge(self, key: str, body: dict[str, Any]) -> dict[str, Any]:
        with self.changed:
            self.requests.append(key)
            if key not in self.charges:
                self.charges[key] = {"chargeId": f"ch_{len(self.charges) + 1}", **body}
            self.changed.notify_all()
            return self.charges[key]

    def hold(self) -> None:
        with self.changed:
            self.held += 1
            self.changed.notify_all()
        self.released.wait(120)

    async def until(self, fact: Callable[[Ledger], bool], *, timeout: float = 90) -> None:
        """Wait until `fact` holds of the ledger, or fail saying what it saw."""

        def wait() -> bool:
            with self.changed:
                return self.changed.wait_for(lambda: fact(self), timeout)

        if not await asyncio.to_thread(wait):
            raise AssertionError(f"ledger: requests {self.requests}, held {self.held}")


def _handler(ledger: Ledger) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def setup(self) -> None:
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"] or 0)) or "{}")
            if self.path == "/gate":
                ledger.hold()
                self._reply(200, {})
                return
            key = self.headers.get("Idempotency-Key")
            if self.path != "/charges" or not key:
                self._reply(400, {"error": "POST /charges with an Idempotency-Key"})
                return
            self._reply(200, ledger.charge(key, body))

        def _reply(self, status: int, data: dict[str, Any]) -> None:
            payload = json.dumps(data).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the killed worker's request: nobody is left to read the reply

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
async def ledger() -> AsyncIterator[Ledger]:
    """A ledger serving on loopback for the test."""
    book = Ledger()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(book))
    server.daemon_threads = True
    book.url = f"http://127.0.0.1:{server.server_address[1]}"
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        yield book
    finally:
        book.released.set()
        server.shutdown()
        server.server_close()
        serving.join(10)


# ---- a worker killed between the effect and the tool's result ----------------------------


async def test_a_charge_survives_a_worker_kill_exactly_once(
    tmp_path, dev_server, temporal_client, ledger
):
    """A worker SIGKILLed after the tool charged: the retry on a fresh worker charges again
    with the same key, the ledger records one charge, and the thread ends with it."""
    config_file = worker_config(tmp_path, dev_server.address)
    async with crash_drill(config_file) as (task_queue, first, second, store):
        handle = await start_thread(
            temporal_client,
            task_queue,
            agent="ledger_agent",
            options={"heartbeatTimeoutSeconds": 2},
            env={"LEDGER_URL": ledger.url},
            messages=[{"role": "user", "content": "charge once please"}],
        )
        await ledger.until(lambda book: book.held == 1)  # charged, held before its result
        await until_event(store, handle.id, "tool.started")  # the attempt is on record
        await first.kill()
        await second.start()
        await ledger.until(lambda book: book.held == 2)  # the retry charged, and is held
        ledger.released.set()
        await wait_until(handle, idle_after(1), timeout=90)
        messages = store.messages.list(handle.id)
        events = store.events.read(handle.id, limit=10_000, types=["tool.started"])
        await handle.signal("terminate", {})
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    tool, answer = messages[2], messages[3]
    # The tool ran twice with one key; the ledger made one charge.
    [key] = set(ledger.requests)
    assert len(ledger.requests) == 2
    assert list(ledger.charges) == [key]
    assert [e.payload["attempt"] for e in events] == [1, 2]
    assert tool.tool_status == "success"
    assert json.loads(content_of(tool))["result"] == ledger.charges[key]
    assert ledger.charges[key]["chargeId"] == "ch_1"
    assert answer.content == "Charged once."
    # The key names the call by its result message, which the workflow fixed once.
    assert key == idempotency_key(handle.id, f"tool:{tool.id}")


# ---- every other call has another key ------------------------------------------------------


class Keyed(BaseModel):
    label: str
    invoke: bool = False
    queue: bool = False
    effect: bool = False


class NoArgs(BaseModel):
    pass


async def keyed(state: Any, args: Keyed) -> dict[str, Any]:
    """Reports its key and call id; may invoke itself twice, queue itself, schedule an effect."""
    invoked = []
    if args.invoke:
        for _ in range(2):
            result = await state.invoke_tool("keyed", {"label": "invoked"})
            invoked.append(result.result)
    if args.queue:
        state.queue_tool("keyed", {"label": "queued"})
    if args.effect:
        state.schedule_effect("keyed_effect", {})
    return {"key": state.idempotency_key, "callId": state.tool_call_id, "invoked": invoked}


async def keyed_effect(state: Any, args: NoArgs) -> None:
    """An effect that notes its key."""
    await state.set_value("effect_key", state.idempotency_key)


async def note_hook_key(state: Any, data: list[dict[str, Any]]) -> None:
    """A model.call hook notes its key: none, as no tool call runs there."""
    await state.set_value("hook_key", {"key": state.idempotency_key})


async def _until_value(store: Any, thread_id: str, key: str) -> Any:
    """The thread's value under `key`, once it is stored (within 30 s)."""
    for _ in range(600):
        value = store.values.get(thread_id, key)
        if value is not None:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"no value {key!r} in thread {thread_id}")


async def test_every_call_has_its_own_key(start_worker, temporal_client, scripted_server):
    """Same tool, same arguments: two calls in a step, a model call id reused in a later turn,
    a queued call, invoked calls and an effect each get a different key; hooks in model.call
    get none."""
    same = {"name": "keyed", "arguments": {"label": "same"}}
    script = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "first",
                    "replies": [
                        {"tool_calls": [{**same, "id": "call_1"}, same]},
                        {"text": "one"},
                    ],
                },
                {
                    "match": "second",
                    "replies": [
                        {
                            "tool_calls": [
                                {
                                    "id": "call_1",
                                    "name": "keyed",
                                    "arguments": {
                                        "label": "same",
                                        "invoke": True,
                                        "queue": True,
                                        "effect": True,
                                    },
                                }
                            ]
                        },
                        {"text": "two"},
                        {"text": "the queued call ran"},
                    ],
                },
                {"match": "*", "replies": [{"text": "more"}]},
            ]
        },
    )
    definitions = agent_definitions(script, tools=["keyed"], hooks=["note_hook_key"]).add(
        define_tool(name="keyed", description="Reports its key", args=Keyed, execute=keyed),
        define_effect(name="keyed_effect", args=NoArgs, execute=keyed_effect),
        define_hook(id="note_hook_key", hook="filter_messages", execute=note_hook_key),
    )
    worker = await start_worker(definitions)
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "first"}]
    )
    await wait_until(handle, idle_after(1))
    await handle.signal("queue_message", {"role": "user", "content": "second"})
    store = worker.store
    effect_key = await _until_value(store, handle.id, "effect_key")  # runs after the turn
    await wait_until(handle, lambda s: s.status == "waiting_input" and not s.queue)
    results = [
        (m.id, json.loads(m.content)["result"])
        for m in store.messages.list(handle.id)
        if m.role == "tool"
    ]
    await handle.signal("terminate", {})
    call_ids = [r["callId"] for _, r in results]
    assert len(results) == 4, results  # turn 1: two calls; turn 2: one call and the queued one
    assert call_ids[0] == call_ids[2] == "call_1"  # the model reused its call id
    invoked = [r["key"] for r in results[2][1]["invoked"]]
    keys = [r["key"] for _, r in results] + invoked + [effect_key]
    assert all(isinstance(k, str) and k.startswith("weft-") for k in keys), keys
    assert len(set(keys)) == len(keys) == 7, keys
    for message_id, result in results:
        assert result["key"] == idempotency_key(handle.id, f"tool:{message_id}")
    assert store.values.get(handle.id, "hook_key") == {"key": None}


async def test_a_prompt_tools_inner_call_has_its_own_key(
    start_worker, temporal_client, scripted_server
):
    """A call inside a prompt tool gets a key of its own, though its model used the same call
    id, tool and arguments as the thread's own model."""
    same = {"id": "call_1", "name": "keyed", "arguments": {"label": "same"}}
    main = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [same, {"name": "advisor", "arguments": {"message": "check"}}]},
                {"text": "done"},
            ]
        },
    )
    advisor = add_script(
        scripted_server, {"replies": [{"tool_calls": [same]}, {"text": "advised"}]}
    )
    definitions = agent_definitions(main, tools=["keyed", "advisor"]).add(
        define_tool(name="keyed", description="Reports its key", args=Keyed, execute=keyed),
        define_model(name="advisor_model", provider="scripted", model=advisor),
        define_prompt(
            name="advisor",
            toolDescription="Asks the advisor, who reports keys.",
            model="advisor_model",
            prompt="You are the advisor.",
            tools=["keyed"],
        ),
    )
    worker = await start_worker(definitions)
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "advise"}]
    )
    await wait_until(handle, idle_after(1))
    await handle.signal("terminate", {})
    results = [
        (m.id, json.loads(m.content)["result"])
        for m in worker.store.messages.list(handle.id)
        if m.role == "tool" and m.name == "keyed"
    ]
    assert [r["callId"] for _, r in results] == ["call_1", "call_1"]
    assert results[0][1]["key"] != results[1][1]["key"]
    for message_id, result in results:
        assert result["key"] == idempotency_key(handle.id, f"tool:{message_id}")
