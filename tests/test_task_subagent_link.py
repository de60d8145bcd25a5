"""A task a thread creates and delegates runs its attempt in a thread of its own, started
by the task's run: that thread is listed as a subagent of the thread that created the task,
from the task's record (no event of the thread's own says so), in its
`subagent_job_summary` (Python, HTTP, CLI read it alike) and in `ThreadState.children()`."""

from __future__ import annotations

import asyncio

from planner_agents import planner_definitions
from support import add_script, idle_after, start_thread, store_of, until, wait_until

from weft.activities.thread_hierarchy import ThreadHierarchy
from weft.activities.thread_intents import IntentSink
from weft.activities.thread_scope import ThreadScope
from weft.client.subagent_summary import subagent_summary
from weft.client.tasks import Tasks
from weft.contract.task_tools import plan_task_id

SCRIPT = {
    "turns": [
        {
            "match": "Plan the research",
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "create_task",
                            "arguments": {
                                "name": "research",
                                "objective": "Research the topic.",
                                "start": False,
                            },
                        }
                    ]
                },
                {
                    "tool_calls": [
                        {
                            "name": "delegate_task",
                            "arguments": {"task": "research", "agent": "writer"},
                        }
                    ]
                },
                {"text": "Delegated."},
            ],
        },
        {"match": "Research the topic", "replies": [{"text": "Findings."}]},
    ]
}


async def test_a_delegated_tasks_attempt_thread_is_the_delegators_subagent(
    start_worker, temporal_client, scripted_server
):
    worker = await start_worker(planner_definitions(add_script(scripted_server, SCRIPT)))
    store = store_of(worker)
    tasks = Tasks(temporal_client, store, task_queue=worker.task_queue)
    thread = await start_thread(
        temporal_client,
        worker.task_queue,
        agent="planner",
        messages=[{"role": "user", "content": "Plan the research."}],
    )
    await wait_until(thread, idle_after(1), timeout=60)
    task_id = plan_task_id(thread.id, "research")
    done = await asyncio.wait_for(tasks.wait(task_id), timeout=60)
    assert done.status == "completed" and done.delegated_to == "writer"
    attempt = done.attempts[0]

    def attempt_closed() -> bool:
        row = store.threads.get(attempt.thread_id)
        return row is not None and row.status in ("completed", "cancelled", "failed")

    await until(attempt_closed, "the task closed its attempt's thread", 60)

    summary = await subagent_summary(temporal_client, store, thread.id)
    assert summary is not None
    [node] = summary.children  # the planner spawned no subagent itself
    assert node.thread_id == attempt.thread_id and node.parent_thread_id == thread.id
    assert node.agent == "writer" and node.depth == 1
    assert node.name == f"{task_id} attempt 1" and node.status == "completed"
    assert node.closed and node.recoverability.state == "closed"
    assert node.status_note == f"attempt 1 of task {task_id}, delegated to writer: completed"
    assert node.started_at == attempt.started_at and node.ended_at == attempt.ended_at
    assert summary.tasks.items[0].assigned_thread_id == attempt.thread_id

    scope = ThreadScope(
        store=store,
        thread_id=thread.id,
        session_id=None,
        turn_id=None,
        tool_call_id=None,
        event_prefix="test",
        intents=IntentSink(),
    )
    hierarchy = ThreadHierarchy(scope)
    [entry] = await hierarchy.children()
    assert entry["reference"] == attempt.thread_id and entry["tool"] == "tasks"
    assert entry["taskId"] == task_id and entry["attemptId"] == attempt.attempt_id
    assert entry["lastResult"] == "Findings."
    found = await hierarchy.get_child_thread(f"{task_id} attempt 1")
    assert found is not None and found["thread"]["agent"] == "writer"
    assert await hierarchy.get_child_thread("no-such-child") is None
    # The writer's thread has no parent of its own: the task, not the planner, started it.
    assert store.subagents.list(thread.id) == []
