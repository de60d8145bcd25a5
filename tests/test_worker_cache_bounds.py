"""A worker's per-thread caches follow its workflow cache (store/thread_cache_budget.py).

Idle threads the workflow cache has dropped leave nothing in the worker's transcripts, env
rows, thread links, message views, kept windows or frames; a thread woken after its
eviction reads everything again and answers as before.
"""

from __future__ import annotations

from typing import Any

from support import (
    add_script,
    agent_definitions,
    idle_after,
    start_thread,
    store_of,
    until,
    wait_until,
)

from weft.activities.context_window import Frames
from weft.activities.message_views import MessageViews, WindowTails
from weft.contract.definitions import AgentDef, DefinitionSnapshot, ModelDef, PromptDef
from weft.contract.messages import Message
from weft.store.thread_cache_budget import MIN_THREADS, ThreadCacheBudget
from weft.store.thread_env_rows import ThreadEnvRow, ThreadEnvRows
from weft.store.transcripts import MessageJson, message_json

WEATHER = {
    "turns": [
        {
            "match": "regex:(?i)weather",
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
                {"text": "It is sunny in Paris."},
            ],
        },
        {"match": "*", "replies": [{"text": "ok"}]},
    ]
}
CACHE = 2  # the worker's workflow cache: fewer threads than the test runs
THREADS = 6
# Every per-thread cache of a worker (store/store.py, activities/model_request.py).
CACHES = {
    "transcripts",
    "env rows",
    "thread links",
    "message views",
    "window tails",
    "frames",
}


async def test_idle_threads_the_workflow_cache_dropped_leave_nothing_behind(
    start_worker: Any, temporal_client: Any, scripted_server: Any
) -> None:
    script = add_script(scripted_server, WEATHER)
    worker = await start_worker(agent_definitions(script), max_cached_workflows=CACHE)
    caches = store_of(worker).caches
    assert set(caches.held()) == CACHES
    handles = []
    for i in range(THREADS):
        handle = await start_thread(
            temporal_client,
            worker.task_queue,
            messages=[{"role": "user", "content": f"Weather in Paris, thread {i}?"}],
        )
        await wait_until(handle, idle_after(1))
        handles.append(handle)

    # Every thread used each cache; now idle, each holds what the workflow cache holds.
    def bounded() -> dict[str, int] | None:
        held = caches.held()
        return held if max(held.values()) <= CACHE else None

    held = await until(bounded, f"every cache holds at most {CACHE} threads: {caches.held()}")
    assert held["transcripts"] >= 1 and held["env rows"] >= 1, held

    # The first thread was evicted long ago: woken, it replays, reads its transcript
    # again and sends the whole conversation.
    first = handles[0]
    scripted_server.clear_requests()
    await first.signal("queue_message", {"role": "user", "content": "And the weather now?"})
    state = await wait_until(first, idle_after(2))
    assert state.stop_reason == "stop_on_response"
    stored = store_of(worker).messages.list(first.id)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"] * 2
    assert stored[-1].content == "It is sunny in Paris."
    sent = [r for r in scripted_server.requests if r["model"] == script]
    assert len(sent) == 2
    # The wake's last request: the system prompt, then every stored message before the
    # answer, as the model reads it.
    last = sent[-1]["messages"]
    assert [m["role"] for m in last] == ["system"] + [m.role for m in stored[:-1]]
    assert last[1]["content"] == "Weather in Paris, thread 0?"
    assert last[-3]["content"] == "And the weather now?"
    assert max(caches.held().values()) <= CACHE + 1


# -- the bounded structures -------------------------------------------------------------


def _texts(thread_id: str, count: int, start: int = 0) -> list[MessageJson]:
    return [
        message_json(
            Message(
                id=f"{thread_id}-{i}",
                thread_id=thread_id,
                position=i,
                role="user" if i % 2 == 0 else "assistant",
                content=f"message {i} of {thread_id}",
                created_at=1,
            )
        )
        for i in range(start, start + count)
    ]


class _Kept:
    def __init__(self) -> None:
        self.forgotten: list[str] = []

    def forget(self, thread_id: str) -> None:
        self.forgotten.append(thread_id)

    def threads_held(self) -> int:
        return 3


def test_a_budget_has_a_floor_and_tells_every_cache_of_an_eviction() -> None:
    assert ThreadCacheBudget(0).threads == MIN_THREADS  # max_cached_workflows=0 still keeps
    assert ThreadCacheBudget(250).threads == 250
    assert ThreadCacheBudget(250).per_thread(200) == 50_000
    budget = ThreadCacheBudget(4)
    one, two, other = _Kept(), _Kept(), _Kept()
    budget.join("views", one)
    budget.join("views", two)  # two workers' requests on one store: summed
    budget.join("frames", other)
    budget.evicted("t1")
    assert one.forgotten == two.forgotten == other.forgotten == ["t1"]
    assert budget.held() == {"views": 6, "frames": 3}


def _parts(views: MessageViews, thread_id: str, texts: list[MessageJson], offset: int = 0) -> None:
    views.parts(texts, 1000, side="a", dual=False, images=None, offset=offset, thread_id=thread_id)


def test_message_views_are_kept_per_thread_for_as_many_threads_as_the_budget() -> None:
    views = MessageViews(max_threads=2, max_views=1000)
    for thread in ("t1", "t2", "t3"):
        _parts(views, thread, _texts(thread, 5))
    assert views.threads_held() == 2 and views.held() == 10  # t1 dropped for t3
    views.forget("t2")
    assert views.threads_held() == 1 and views.held() == 5
    views.forget("unknown")  # a thread never kept: nothing to do
    assert views.held() == 5


def test_a_whole_window_replaces_what_its_thread_kept() -> None:
    views = MessageViews(max_threads=4, max_views=1000)
    texts = _texts("t", 6)
    _parts(views, "t", texts[:4])
    _parts(views, "t", texts[4:], offset=4)  # a window's end adds to it
    assert views.held() == 6
    # A new boundary: the window starts at message 4; the parts before it go.
    _parts(views, "t", texts[4:] + _texts("t", 1, start=6))
    assert views.held() == 3


def test_message_views_drop_other_threads_beyond_the_parts_bound() -> None:
    views = MessageViews(max_threads=10, max_views=8)
    _parts(views, "t1", _texts("t1", 5))
    _parts(views, "t2", _texts("t2", 5))
    assert views.threads_held() == 1 and views.held() == 5
    _parts(views, "t3", _texts("t3", 20))  # alone over the bound: its window is in use
    assert views.threads_held() == 1 and views.held() == 20


def test_kept_windows_follow_the_thread_bound_and_forget() -> None:
    views = MessageViews(max_threads=2)
    tails = WindowTails(views, max_messages=1000, max_threads=2)
    for thread in ("t1", "t2", "t3"):
        tails.sums(thread, _texts(thread, 4), 1000, side="a", dual=False, images=None)
    assert tails.threads_held() == 2 and tails.held() == 8
    tails.forget("t3")
    assert tails.threads_held() == 1 and tails.held() == 4
    # Forgotten, a thread's window is worked out afresh, and the same.
    again = tails.sums("t3", _texts("t3", 4), 1000, side="a", dual=False, images=None)
    fresh = WindowTails(MessageViews()).sums(
        "t3", _texts("t3", 4), 1000, side="a", dual=False, images=None
    )
    assert again == fresh


def _snapshot() -> DefinitionSnapshot:
    return DefinitionSnapshot(
        snapshot_id="snap_1",
        agent=AgentDef.model_validate({"name": "helper", "sideA": {"prompt": "p"}}),
        prompts={"p": PromptDef(name="p", tool_description="helps", prompt="Hi.", model="m")},
        models={"m": ModelDef(name="m", provider="openai", model="gpt")},
        tools={},
    )


def test_frames_are_kept_per_thread_and_forgotten_with_it() -> None:
    frames = Frames(max_threads=2, max_frames=2)
    snap = _snapshot()
    for thread in ("t1", "t2", "t3"):
        for key in ("k1", "k2", "k3"):
            frames.get(thread, key, snap, None, None, "a")
    assert frames.threads_held() == 2
    kept = frames.get("t3", "k3", snap, None, None, "a")
    assert frames.get("t3", "k3", snap, None, None, "a") is kept
    frames.forget("t3")
    assert frames.threads_held() == 1
    assert frames.get("t3", "k3", snap, None, None, "a") is not kept


def test_env_rows_follow_the_thread_bound_and_forget() -> None:
    rows = ThreadEnvRows(max_threads=2)
    for thread in ("t1", "t2", "t3"):
        rows.keep(thread, 1, ThreadEnvRow(user_id=None))
    assert rows.threads_held() == 2 and rows.get("t1", 1) is None
    rows.forget("t2")
    assert rows.threads_held() == 1
