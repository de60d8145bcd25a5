"""Time to first token: from `thread.ask` to the reply's first `model.delta`, against a
hand-written Temporal workflow that streams through an activity.

Run: `.venv/bin/python bench/bench_ttft.py [--rounds 20] [--chunk-delay-ms 4]`.

One process, one tuned dev server (tests/support.py local_stack), one scripted
OpenAI-compatible server whose reply streams in chunks (`--chunk-delay-ms` apart). Each
round runs three sides back to back:
- the model alone: weft's OpenAI adapter called in process, from the request to its first
  delta: the scripted model's own first-token time, subtracted from both others;
- the hand-written workflow (bench/ttft_floor.py): an `ask` update on an idle chat
  workflow runs one activity that streams the reply and hands its first delta to this
  process by callback (no store: delivery costs it nothing);
- weft: `Threads.ask` (what `weft.Thread.ask` calls) on an idle AgentThread, each ask a new
  session, on an in-process AgentWorker with a SQLite store. Its first token is taken at
  two points: the commit of the first `model.delta` (the store's commit hook: from then on
  any reader can see it), and its arrival on the Python stream (`Thread.events`, woken by
  the process's event feed: SQLite's `PRAGMA data_version` checked every 5 ms;
  PostgreSQL's feed is notified instead);
- weft over HTTP: `POST /threads/{id}/turns` to `weft serve`'s app (served in this
  process, as `weft serve` builds it) until the first `model.delta` on an SSE client of
  `GET /threads/{id}/events` (SQLite: the API's one feed, the same change signal), and
  that POST's own first commit, so each side's delivery after its commit is printed.

Per round, each side's first-token time less that round's model-alone time, and the ratio
weft / hand-written (the target: at most 1.2x, and under 40 ms absolute); the medians of
the rounds and of the paired ratios are printed. Where weft's time goes comes from the
Temporal history of the round (server timestamps, the same host's clock): the ask until
the server accepted the update, the workflow task until `model.call` was scheduled (with
any local activity it ran), the activity's dispatch, and the activity's own time to the
commit of the first delta (less the model's own time). The activity's start is split at
the moment the SDK hands it to the worker's outermost activity interceptor (one this
benchmark adds on both sides): before it, the server's reply to the workflow task that
carries the eagerly dispatched activity, the core SDK and the input's decoding; after it,
the worker's own interceptors (weft's recovery interceptor) until the method is entered.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import httpx  # noqa: E402
from floor import stock_sandbox  # noqa: E402
from support import local_stack, scratch_config, wait_until  # noqa: E402
from temporalio import client as temporal_client  # noqa: E402
from temporalio.api.enums.v1 import EventType  # noqa: E402
from temporalio.client import Client, WorkflowHistory  # noqa: E402
from temporalio.worker import (  # noqa: E402
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    Worker,
)
from ttft_floor import (  # noqa: E402
    SIGNAL_STOP,
    UPDATE_ASK,
    WORKFLOW,
    StreamActivities,
    TtftHandwritten,
)

from weft.activities.providers import ChatRequest, Delta, OpenAIChatProvider  # noqa: E402
from weft.client.threads import Threads, tail_events  # noqa: E402
from weft.contract.events import Event  # noqa: E402
from weft.definitions import (  # noqa: E402
    Definitions,
    define_agent,
    define_model,
    define_prompt,
)
from weft.workers.agent_worker import AgentWorker  # noqa: E402

SCRIPT = "bench_ttft"
TOKEN = "bench-ttft-token"
AGENT = "talker"
SYSTEM = "You are a talkative assistant."
TARGET_RATIO = 1.2
TARGET_MS = 40.0
REPLY = " ".join(f"word{i}" for i in range(120))  # about 900 characters


def definitions() -> Definitions:
    return Definitions().add(
        define_model(name="scripted", provider="scripted", model=SCRIPT),
        define_prompt(
            name="talker_prompt", toolDescription="talks", model="scripted", prompt=SYSTEM
        ),
        define_agent(name=AGENT, sideA={"prompt": "talker_prompt"}),
    )


def script(chunk_delay_ms: int) -> dict[str, Any]:
    return {"replies": [{"text": REPLY, "chunk_size": 8, "chunk_delay_ms": chunk_delay_ms}]}


@dataclass
class Phases:
    """Where one ask's time went, ms, from the history's server timestamps."""

    to_task: float = 0.0  # the ask sent -> the workflow task with it started on the worker
    workflow_task: float = 0.0  # that task, until it completed, scheduling the activity
    dispatch: float = 0.0  # the task completed -> the activity started
    in_activity: float = 0.0  # started -> first token (committed / handed over), less model
    local_activities: int = 0  # local activities recorded in the task
    # weft's activity, traced: started -> the SDK hands it to the interceptors -> its
    # method entered -> prepare begins, prepare, -> provider called, first delta -> commit.
    to_arrived: float = 0.0
    to_entered: float = 0.0
    to_prepare: float = 0.0
    prepare: float = 0.0
    to_request: float = 0.0
    to_commit: float = 0.0


@dataclass
class Round:
    model_ms: float
    hand_ms: float
    weft_commit_ms: float
    weft_stream_ms: float
    weft_http_ms: float
    weft_http_commit_ms: float  # the same POST until its first delta was committed
    hand: Phases
    weft: Phases

    @property
    def ratio(self) -> float:
        return (self.weft_commit_ms - self.model_ms) / (self.hand_ms - self.model_ms)

    @property
    def stream_ratio(self) -> float:
        return (self.weft_stream_ms - self.model_ms) / (self.hand_ms - self.model_ms)

    @property
    def http_ratio(self) -> float:
        return (self.weft_http_ms - self.model_ms) / (self.hand_ms - self.model_ms)


@dataclass
class FirstTokens:
    """First-token times heard from the hand-written activity and the store's commits."""

    loop: asyncio.AbstractEventLoop
    hand: dict[str, float] = field(default_factory=dict)
    hand_entered: dict[str, float] = field(default_factory=dict)  # wall clock
    committed: dict[str, float] = field(default_factory=dict)
    watching: set[str] = field(default_factory=set)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def hand_enter(self, ask_id: str) -> None:
        self.hand_entered.setdefault(ask_id, time.time())

    def hand_first(self, ask_id: str) -> None:
        self.hand.setdefault(ask_id, time.perf_counter())
        self.arrived.set()

    def on_commit(self, events: Sequence[Event]) -> None:
        """The store's commit hook (any thread): the first delta of a watched thread."""
        now = time.perf_counter()
        for event in events:
            if event.type == "model.delta" and event.thread_id in self.watching:
                with self.lock:
                    self.watching.discard(event.thread_id)
                    self.committed.setdefault(event.thread_id, now)
                self.loop.call_soon_threadsafe(self.arrived.set)

    async def wait(self, found: dict[str, float], key: str, timeout: float = 30) -> float:
        deadline = time.monotonic() + timeout
        while key not in found:
            self.arrived.clear()
            if key in found:
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no first token for {key}")
            try:
                await asyncio.wait_for(self.arrived.wait(), left)
            except TimeoutError:
                pass
        return found[key]


class Trace:
    """Wall-clock stamps inside weft's model activity, for the ask being traced: the
    request built (`ModelRequests.prepare`, in the activity), the provider called, its
    first delta. Wrapped on the classes' public methods, in this process only."""

    def __init__(self) -> None:
        self.stamps: dict[str, float] = {}
        self.armed = False

    def stamp(self, name: str) -> None:
        if self.armed:
            self.stamps.setdefault(name, time.time())

    def install(self) -> None:
        """Before the worker is built: it registers the wrapped activity method."""
        from weft.activities.model_call import ModelActivities
        from weft.activities.model_request import ModelRequests

        trace, prepare, complete = self, ModelRequests.prepare, OpenAIChatProvider.complete
        call_model = ModelActivities.call_model

        async def traced_call(self: Any, call: Any) -> Any:
            trace.stamp("entered")
            return await call_model(self, call)

        # The activity's definition rides on the function: the wrapper carries it too.
        functools.update_wrapper(traced_call, call_model)
        ModelActivities.call_model = traced_call  # type: ignore[method-assign]

        async def traced_prepare(self: Any, *args: Any, **kwargs: Any) -> Any:
            trace.stamp("prepare")
            try:
                return await prepare(self, *args, **kwargs)
            finally:
                trace.stamp("prepared")

        async def traced_complete(self: Any, request: Any, *, on_delta: Any = None) -> Any:
            trace.stamp("request")

            async def first(delta: Delta) -> None:
                if delta.text:
                    trace.stamp("delta")
                if on_delta is not None:
                    await on_delta(delta)

            return await complete(self, request, on_delta=first)

        ModelRequests.prepare = traced_prepare  # type: ignore[method-assign]
        OpenAIChatProvider.complete = traced_complete  # type: ignore[method-assign]


TRACE = Trace()


class Arrivals(temporal_client.Interceptor, Interceptor):
    """The outermost activity interceptor of a worker: when the SDK hands each activity to
    the interceptors (wall clock), by workflow id, the first of each armed ask. A client
    interceptor too, so it can ride on the connection AgentWorker is given (the SDK puts
    the client's worker interceptors first)."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Arrival(next, self.at)


class _Arrival(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, at: dict[str, float]) -> None:
        super().__init__(next)
        self._at = at

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        from temporalio import activity

        workflow_id = activity.info().workflow_id or ""
        self._at.setdefault(workflow_id, time.time())
        return await self.next.execute_activity(input)


ARRIVALS = Arrivals()


def stamped_client(client: Client) -> Client:
    """The same connection, with the arrival stamps outermost on the workers built on it."""
    config = client.config()
    config["interceptors"] = [ARRIVALS]
    return Client(**config)


async def model_alone(provider: OpenAIChatProvider) -> float:
    """The scripted model's own first-token time through weft's adapter, ms."""
    began, first = time.perf_counter(), 0.0

    async def on_delta(delta: Delta) -> None:
        nonlocal first
        if not first and delta.text:
            first = time.perf_counter()

    request = ChatRequest(
        model=SCRIPT,
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}],
    )
    await provider.complete(request, on_delta=on_delta)
    return (first - began) * 1000


async def ask_hand(client: Client, handle: Any, tokens: FirstTokens) -> tuple[float, Phases]:
    ask_id = uuid.uuid4().hex
    ARRIVALS.at.pop(handle.id, None)
    wall, began = time.time(), time.perf_counter()
    update = asyncio.create_task(
        handle.execute_update(UPDATE_ASK, {"text": "hello", "model": SCRIPT, "id": ask_id})
    )
    first = await tokens.wait(tokens.hand, ask_id)
    await update
    phases = phases_of(await handle.fetch_history(), wall, "ttft.stream", first - began)
    activity_started = wall + (phases.to_task + phases.workflow_task + phases.dispatch) / 1000
    phases.to_entered = (tokens.hand_entered[ask_id] - activity_started) * 1000
    phases.to_arrived = (ARRIVALS.at.get(handle.id, activity_started) - activity_started) * 1000
    return (first - began) * 1000, phases


async def ask_weft(
    client: Client, threads: Threads, store: Any, thread_id: str, tokens: FirstTokens, cursor: int
) -> tuple[float, float, Phases, int]:
    """One ask; (ms to the first delta's commit, ms to the Python stream, phases, cursor)."""
    stream_first: list[float] = []
    seen_delta = asyncio.Event()
    last = cursor

    async def tail() -> None:
        nonlocal last
        async for event in tail_events(store, thread_id, after=cursor):
            last = event.sequence or last
            if event.type == "model.delta" and not stream_first:
                stream_first.append(time.perf_counter())
                seen_delta.set()
            if event.type in ("turn.completed", "turn.failed"):
                return

    reader = asyncio.create_task(tail())
    await asyncio.sleep(0.1)  # the reader is waiting in the feed, as a client's would be
    with tokens.lock:
        tokens.committed.pop(thread_id, None)
        tokens.watching.add(thread_id)
    TRACE.stamps, TRACE.armed = {}, True
    ARRIVALS.at.pop(thread_id, None)
    wall, began = time.time(), time.perf_counter()
    asked = asyncio.create_task(threads.ask(thread_id, "hello"))
    committed = await tokens.wait(tokens.committed, thread_id)
    TRACE.armed = False
    await asyncio.wait_for(seen_delta.wait(), 30)
    result = await asked
    assert result.status == "completed", result
    await asyncio.wait_for(reader, 30)
    history = await client.get_workflow_handle(thread_id).fetch_history()
    phases = phases_of(history, wall, "model.call", committed - began)
    stamps, activity_started = TRACE.stamps, wall + phases.to_task / 1000
    activity_started += (phases.workflow_task + phases.dispatch) / 1000
    if {"entered", "prepare", "prepared", "request", "delta"} <= stamps.keys():
        phases.to_entered = (stamps["entered"] - activity_started) * 1000
        arrived = ARRIVALS.at.get(thread_id, activity_started)
        phases.to_arrived = (arrived - activity_started) * 1000
        phases.to_prepare = (stamps["prepare"] - stamps["entered"]) * 1000
        phases.prepare = (stamps["prepared"] - stamps["prepare"]) * 1000
        phases.to_request = (stamps["request"] - stamps["prepared"]) * 1000
        phases.to_commit = (wall + committed - began - stamps["delta"]) * 1000
    return (committed - began) * 1000, (stream_first[0] - began) * 1000, phases, last


async def ask_http(
    http: httpx.AsyncClient, thread_id: str, cursor: int, tokens: FirstTokens
) -> tuple[float, float, int]:
    """One turn over HTTP: (ms from the POST to the first `model.delta` on SSE, ms to its
    commit, cursor)."""
    first: list[float] = []
    connected = asyncio.Event()
    last = cursor

    async def read() -> None:
        nonlocal last
        headers = {"Accept": "text/event-stream", "Last-Event-ID": str(cursor)}
        url = f"/threads/{thread_id}/events"
        async with http.stream("GET", url, headers=headers, timeout=None) as response:
            assert response.status_code == 200, response.status_code
            async for line in response.aiter_lines():
                if line.startswith("retry:"):
                    connected.set()
                elif line.startswith("id: "):
                    last = int(line[4:])
                elif line.startswith("event: "):
                    kind = line[len("event: ") :]
                    if kind == "model.delta" and not first:
                        first.append(time.perf_counter())
                    if kind in ("turn.completed", "turn.failed"):
                        return

    reader = asyncio.create_task(read())
    await asyncio.wait_for(connected.wait(), 30)
    await asyncio.sleep(0.1)  # the stream waits in the feed, as a client's would
    with tokens.lock:
        tokens.committed.pop(thread_id, None)
        tokens.watching.add(thread_id)
    began = time.perf_counter()
    posted = await http.post(
        f"/threads/{thread_id}/turns", json={"role": "user", "content": "hello"}
    )
    assert posted.status_code == 202, posted.text
    committed = await tokens.wait(tokens.committed, thread_id)
    await asyncio.wait_for(reader, 30)
    return (first[0] - began) * 1000, (committed - began) * 1000, last


@asynccontextmanager
async def served_api(
    client: Client, store: Any, task_queue: str
) -> AsyncIterator[httpx.AsyncClient]:
    """`weft serve`'s app over this worker's store, in this process; an HTTP client of it."""
    from weft.api import create_api
    from weft.api.context import ApiContext
    from weft.api.event_feed import open_event_feed
    from weft.api.gateway import GatewayServer

    feed = await open_event_feed(store)
    ctx = ApiContext(
        store=store,
        client=client,
        threads=Threads(client, task_queue=task_queue, store=store),
        feed=feed,
        task_queue=task_queue,
    )
    try:
        async with (
            GatewayServer(create_api(ctx, TOKEN), port=0) as server,
            httpx.AsyncClient(
                base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
            ) as http,
        ):
            yield http
            server.stop()
    finally:
        await feed.close()


def phases_of(history: WorkflowHistory, wall: float, activity: str, total_s: float) -> Phases:
    """The ask's phases, from the workflow task that scheduled its activity: the server
    hands the update to a workflow task, whose completion schedules the activity."""
    events = {e.event_id: e for e in history.events}
    scheduled = next(
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == activity
        and _seconds(e) >= wall
    )
    completed = events[
        scheduled.activity_task_scheduled_event_attributes.workflow_task_completed_event_id
    ]
    task_started = events[completed.workflow_task_completed_event_attributes.started_event_id]
    started = next(
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id == scheduled.event_id
    )
    markers = sum(
        1
        for e in history.events
        if e.marker_recorded_event_attributes.workflow_task_completed_event_id == completed.event_id
        and e.marker_recorded_event_attributes.marker_name == "core_local_activity"
    )
    ms = 1000.0
    return Phases(
        to_task=(_seconds(task_started) - wall) * ms,
        workflow_task=(_seconds(completed) - _seconds(task_started)) * ms,
        dispatch=(_seconds(started) - _seconds(completed)) * ms,
        in_activity=(wall + total_s - _seconds(started)) * ms,
        local_activities=markers,
    )


def _seconds(event: Any) -> float:
    """An event's server time, seconds since the epoch."""
    stamp = event.event_time
    seconds: float = stamp.seconds + stamp.nanos / 1e9
    return seconds


async def main(rounds: int, chunk_delay_ms: int) -> None:
    loop = asyncio.get_running_loop()
    tokens = FirstTokens(loop)
    TRACE.install()
    defs = definitions()
    async with local_stack(max_records=0) as (client, scripted, _):
        scripted.set_script(SCRIPT, script(chunk_delay_ms))
        base_url = scripted.openai_base_url
        with tempfile.TemporaryDirectory() as tmp:
            hand_queue = f"ttft-hand-{uuid.uuid4().hex[:8]}"
            async with (
                httpx.AsyncClient(timeout=60) as http,
                Worker(
                    client,
                    task_queue=hand_queue,
                    workflows=[TtftHandwritten],
                    activities=[
                        StreamActivities(
                            http, base_url, tokens.hand_first, tokens.hand_enter
                        ).stream
                    ],
                    workflow_runner=stock_sandbox(),
                    interceptors=[ARRIVALS],
                ),
                AgentWorker(
                    stamped_client(client),
                    scratch_config(tmp),
                    definitions=defs,
                    task_queue=f"ttft-weft-{uuid.uuid4().hex[:8]}",
                    scripted=scripted,
                ) as worker,
            ):
                store = worker.store
                assert store is not None
                database = store.database
                chained = database.events_committed

                def on_commit(events: Sequence[Event]) -> None:
                    tokens.on_commit(events)
                    if chained is not None:
                        chained(events)

                database.events_committed = on_commit
                provider = OpenAIChatProvider(http, base_url=base_url, api_key=None)
                hand = await client.start_workflow(
                    WORKFLOW,
                    {"system": SYSTEM},
                    id=f"ttft-hand-{uuid.uuid4().hex}",
                    task_queue=hand_queue,
                )
                threads = Threads(client, task_queue=worker.task_queue, store=store)
                started = await threads.start(AGENT)
                thread_id = started.id
                await wait_until(started, lambda s: s.status == "waiting_input")
                cursor = 0
                async with served_api(client, store, worker.task_queue) as api:
                    print("warming up (3 asks each) ...", flush=True)
                    for _ in range(3):
                        await model_alone(provider)
                        await ask_hand(client, hand, tokens)
                        *_, cursor = await ask_weft(
                            client, threads, store, thread_id, tokens, cursor
                        )
                        *_, cursor = await ask_http(api, thread_id, cursor, tokens)
                    results: list[Round] = []
                    for n in range(rounds):
                        model_ms = await model_alone(provider)
                        hand_ms, hand_phases = await ask_hand(client, hand, tokens)
                        commit_ms, stream_ms, weft_phases, cursor = await ask_weft(
                            client, threads, store, thread_id, tokens, cursor
                        )
                        http_ms, http_commit_ms, cursor = await ask_http(
                            api, thread_id, cursor, tokens
                        )
                        results.append(
                            Round(
                                model_ms,
                                hand_ms,
                                commit_ms,
                                stream_ms,
                                http_ms,
                                http_commit_ms,
                                hand_phases,
                                weft_phases,
                            )
                        )
                        print(
                            f"round {n + 1}/{rounds}: model {model_ms:.1f} ms, hand-written "
                            f"{hand_ms:.1f}, weft to commit {commit_ms:.1f}, to stream "
                            f"{stream_ms:.1f}, over HTTP {http_ms:.1f}",
                            flush=True,
                        )
                await hand.signal(SIGNAL_STOP)
                await client.get_workflow_handle(thread_id).signal("terminate", {})
    report(results, chunk_delay_ms)


def report(results: list[Round], chunk_delay_ms: int) -> None:
    def med(values: Sequence[float]) -> float:
        return statistics.median(values)

    model = med([r.model_ms for r in results])
    hand = med([r.hand_ms - r.model_ms for r in results])
    commit = med([r.weft_commit_ms - r.model_ms for r in results])
    stream = med([r.weft_stream_ms - r.model_ms for r in results])
    over_http = med([r.weft_http_ms - r.model_ms for r in results])
    ratio, stream_ratio = med([r.ratio for r in results]), med([r.stream_ratio for r in results])
    print(
        f"\n== time to first token, {len(results)} rounds (medians; the scripted reply streams "
        f"8-character chunks {chunk_delay_ms} ms apart)"
    )
    print(f"the model alone (its own first-token time, subtracted below) {model:8.1f} ms")
    print(f"hand-written workflow: ask -> first delta in its activity   {hand:8.1f} ms")
    print(f"weft: thread.ask -> first model.delta committed             {commit:8.1f} ms")
    print(f"weft: thread.ask -> first model.delta on the Python stream  {stream:8.1f} ms")
    print(f"weft: POST /threads/{{id}}/turns -> first model.delta on SSE {over_http:7.1f} ms")
    http_commit = med([r.weft_http_commit_ms - r.model_ms for r in results])
    print(f"weft: POST /threads/{{id}}/turns -> first model.delta committed {http_commit:5.1f} ms")
    stream_lag = med([r.weft_stream_ms - r.weft_commit_ms for r in results])
    sse_lag = med([r.weft_http_ms - r.weft_http_commit_ms for r in results])
    print(f"delivery after the commit: Python stream {stream_lag:.1f} ms, SSE {sse_lag:.1f} ms")
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    print(
        f"ratio weft (commit) / hand-written: {ratio:.2f}x, median of paired ratios "
        f"(target <= {TARGET_RATIO}x: {verdict})"
    )
    print(f"ratio weft (Python stream) / hand-written: {stream_ratio:.2f}x")
    print(f"ratio weft (HTTP and SSE) / hand-written: {med([r.http_ratio for r in results]):.2f}x")
    absolute = "met" if commit < TARGET_MS else "NOT met"
    print(
        f"weft absolute (commit, less the model): {commit:.1f} ms (target < {TARGET_MS:.0f} ms: {absolute})"
    )
    print("\nwhere the time goes, ms (medians; history timestamps):")
    print(f"  {'phase':44}{'hand-written':>14}{'weft':>10}")
    rows = [
        ("ask sent -> its workflow task started", "to_task"),
        ("the workflow task (to the activity scheduled)", "workflow_task"),
        ("activity scheduled -> started (dispatch)", "dispatch"),
        ("activity started -> first token, less model", "in_activity"),
    ]
    for label, name in rows:
        h = med([getattr(r.hand, name) for r in results])
        w = med([getattr(r.weft, name) for r in results])
        if name == "in_activity":
            h -= model
            w -= model
        print(f"  {label:44}{h:14.1f}{w:10.1f}")
    print("  the activity, traced in process:")
    arrived = [med([getattr(r, side).to_arrived for r in results]) for side in ("hand", "weft")]
    label = "started -> the SDK hands it to interceptors"
    print(f"    {label:42}{arrived[0]:14.1f}{arrived[1]:10.1f}")
    entered = [med([getattr(r, side).to_entered for r in results]) for side in ("hand", "weft")]
    print(f"    {'started -> the activity method entered':42}{entered[0]:14.1f}{entered[1]:10.1f}")
    for label, name in (
        ("entered -> request preparation begins", "to_prepare"),
        ("preparing the request (reads, writes first)", "prepare"),
        ("prepared -> provider called", "to_request"),
        ("first delta received -> committed", "to_commit"),
    ):
        print(f"    {label:42}{'':14}{med([getattr(r.weft, name) for r in results]):10.1f}")
    markers = med([r.weft.local_activities for r in results])
    print(f"  local activities before the model call (weft, median count): {markers:.0f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=20, help="paired rounds (medians)")
    parser.add_argument(
        "--chunk-delay-ms", type=int, default=4, help="the scripted stream's pause between chunks"
    )
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.chunk_delay_ms))
