"""A step reads the same from the store however long its thread is.

Counted, not timed: the SQL statements a worker issues for a turn of K tool steps, and the
transcript rows it loads. Were any per-step read to grow with the thread, the statements
would grow faster than K and the rows loaded would grow with K squared. The transcript's
own reads run on the DBAPI cursor (store/driver_sql.py), which the engine's events do
not see: the transcript cache's counts (rows loaded, full reads) stand for them, and the
closed-thread fence (on the cursor too) is counted at its function.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from sqlalchemy import event
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

from weft.store import budgets as budget_store
from weft.store import events as event_store
from weft.store.urls import WRITE_OPTION
from weft.workers.scripted_model import ScriptedModelServer


async def _turn_of(
    start_worker: StartWorker,
    temporal_client: Client,
    scripted_server: ScriptedModelServer,
    steps: int,
) -> dict[str, int]:
    """Run one turn of `steps` tool steps and an answer on a fresh worker; what it read."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "note", "arguments": {"text": "n"}}], "repeat": steps},
                {"text": "finished"},
            ]
        },
    )
    worker = await start_worker(agent_definitions(script))
    statements: Counter[str] = Counter()

    def count(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        statements[statement.split(None, 1)[0].upper()] += 1
        if statement.startswith("SELECT threads."):
            statements["thread_rows"] += 1

    def began(conn: Any) -> None:
        # BEGIN runs on the driver's connection (store/urls.py): a write asks for IMMEDIATE.
        statements["BEGIN"] += 1
        if conn.get_execution_options().get(WRITE_OPTION, False):  # a SQLite write
            statements["writes"] += 1

    def counted(fence: Callable[..., bool]) -> Callable[..., bool]:
        # The closed-thread fence of a tool or model call's final write
        # (store/outcome_fence.py): one indexed lookup per call.
        def any_closed(*args: Any) -> bool:
            statements["closed_fences"] += 1
            return fence(*args)

        return any_closed

    fences = [(m, m.any_closed) for m in (event_store, budget_store)]

    handle = await start_thread(
        temporal_client, worker.task_queue, options={"maxTotalSteps": steps + 5}
    )
    await wait_until(handle, lambda s: s.status == "waiting_input")
    event.listen(store_of(worker).engine, "before_cursor_execute", count)
    event.listen(store_of(worker).engine, "begin", began)
    for module, fence in fences:
        module.any_closed = counted(fence)  # type: ignore[attr-defined]
    try:
        await handle.signal("queue_message", {"role": "user", "content": "take notes"})
        state = await wait_until(handle, idle_after(1), timeout=240)
    finally:
        event.remove(store_of(worker).engine, "before_cursor_execute", count)
        event.remove(store_of(worker).engine, "begin", began)
        for module, fence in fences:
            module.any_closed = fence  # type: ignore[attr-defined]
    assert state.counters.steps == steps + 1
    transcripts = store_of(worker).transcripts.stats
    return {
        "selects": statements["SELECT"],
        "statements": sum(n for kind, n in statements.items() if kind != "writes"),
        "writes": statements["writes"],
        "thread_rows": statements["thread_rows"],
        "closed_fences": statements["closed_fences"],
        "rows_loaded": transcripts.rows_loaded,
        "misses": transcripts.misses,
    }


async def test_store_reads_per_step_do_not_grow_with_the_thread(
    start_worker, temporal_client, scripted_server
):
    """Turns of 4, 8 and 12 steps: the same statements for each 4 more steps, and every
    transcript row loaded once."""
    turns = [
        await _turn_of(start_worker, temporal_client, scripted_server, steps)
        for steps in (4, 8, 12)
    ]
    print(turns)
    for key in ("selects", "statements"):
        first, second = turns[1][key] - turns[0][key], turns[2][key] - turns[1][key]
        assert first > 0
        # Streamed text is stored in time-based batches, so a slow moment can add a
        # statement or two; a read that grew with the thread would add one per earlier
        # step, 16 or more between these turns.
        assert second <= first + 4, (key, turns)
    # A quick step writes once for its model call and once for its tool call (whose
    # set_value is a write of its own): the start events ride on the final write
    # (activities/pending_events.py). 4 more steps are 12 writes; the margin is for a
    # slow moment in either turn (a call past 0.5 s stores its start events early; each
    # turn runs on a fresh worker, whose first calls are the slowest).
    for earlier, later in zip(turns, turns[1:], strict=False):
        assert 10 <= later["writes"] - earlier["writes"] <= 14, turns
    # Model and tool calls read the thread row's env once per run and count of env writes,
    # then use the copy the worker kept (store/thread_env_rows.py): a turn on a fresh
    # worker reads it as often whatever its steps, and 4 more steps read it no more.
    assert turns[0]["thread_rows"] > 0, turns
    for earlier, later in zip(turns, turns[1:], strict=False):
        assert later["thread_rows"] == earlier["thread_rows"], turns
    for steps, turn in zip((4, 8, 12), turns, strict=True):
        # One per tool call and one per model call (steps + 1 of them, with the answer).
        assert turn["closed_fences"] == 2 * steps + 1
        # One full read when the turn begins (a new worker), then only what each step
        # appended: the user message, and an assistant message and a tool result a step.
        assert turn["misses"] == 1
        assert turn["rows_loaded"] == 1 + 2 * steps
