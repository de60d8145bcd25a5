"""A continue-as-new is recorded by the run that exists, once: asks sent back to
back race the run's completion, and a refused continue-as-new leaves no trace in the log."""

from __future__ import annotations

from support import (
    add_script,
    agent_definitions,
    event_schema_validator,
    idle_after,
    run_histories,
    start_thread,
    wait_until,
)

from weft.client.threads import Threads
from weft.contract.thread import SIGNAL_TERMINATE


async def test_each_continue_as_new_is_recorded_once_by_the_new_run(
    start_worker, temporal_client, scripted_server
):
    """Eight turns back to back on a thread that continues as new every 20 events: the log
    has one `continuedAsNew` per run after the first, each written by that run and naming
    the run it continued, and no run writes anything after a transition it announced."""
    script = add_script(scripted_server, {"turns": [{"match": "*", "replies": [{"text": "ok"}]}]})
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, options={"continueAsNewEvents": 20}
    )
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=worker.store)
    for n in range(8):
        # A submit_turn update the moment the previous turn ends: it races the run's
        # continue-as-new, which Temporal then refuses and the run goes on.
        await threads.submit_turn(handle.id, f"question {n}")
        await wait_until(handle, idle_after(n + 1))
    await handle.signal(SIGNAL_TERMINATE, {})
    await handle.result()

    first = handle.first_execution_run_id or ""
    histories = await run_histories(temporal_client, handle.id, first)
    run_ids = [first] + [
        h.events[-1].workflow_execution_continued_as_new_event_attributes.new_execution_run_id
        for h in histories[:-1]
    ]
    assert len(run_ids) >= 2, "the thread never continued as new"
    events = worker.store.events.read(handle.id, limit=10_000)
    continued = [
        e for e in events if e.type == "thread.updated" and "continuedAsNew" in (e.payload or {})
    ]
    assert [e.run_id for e in continued] == run_ids[1:]
    assert [e.payload["continuedAsNew"]["previousRunId"] for e in continued] == run_ids[:-1]
    assert [e.payload["continuedAsNew"]["run"] for e in continued] == list(
        range(2, len(run_ids) + 1)
    )
    # Run ids in the log only ever move forward: no run wrote after its successor began.
    order = {run_id: n for n, run_id in enumerate(run_ids)}
    seen = [order[e.run_id] for e in events if e.run_id in order]
    assert seen == sorted(seen)
    validator = event_schema_validator()
    for event in continued:
        validator.validate(event.to_wire())
