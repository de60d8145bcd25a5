"""The `subagent_job_summary` of a real thread: a boss spawns two subagents (one reports
and ends, one spawns a subagent of its own and then waits on a person) and creates a task
with the task tools. The summary shows the graph, each child's recoverability and the task
with its attempt thread, through `weft.Thread`, `Threads`, HTTP (tenant-scoped) and the CLI;
the same summary is rebuilt from the events alone; after the boss closes it is read from
the store; an unknown thread is a 404."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import yaml
from api_support import api_stack
from support import add_script, until, weft_cli

import weft
from weft.client.subagent_summary import summary_from_store
from weft.client.threads import Threads
from weft.contract.events import Event
from weft.contract.rebuild import thread_read_from_events
from weft.contract.subagent_summary import (
    CLOSED_THREAD_STATUSES,
    JOBS_LINKED,
    LIVENESS_UNKNOWN,
    ChildFacts,
    SubagentJobSummary,
    build_summary,
    last_sessions,
    pending_action_kinds,
    recoverability,
)
from weft.contract.task_tools import plan_task_id
from weft.contract.tasks import TaskRecord, rebuild
from weft.definitions import Definitions, define_agent, define_model, define_prompt
from weft.store import Store
from weft.store.attempt_threads import attempt_entries

SPECS = Path(__file__).parent / "specs" / "agentruntime"
BOSS = {
    "turns": [
        {"match": "regex:Summarise", "replies": [{"text": "Summary."}]},
        {"match": "regex:Subagent", "replies": [{"text": "noted"}]},
        {
            "match": "*",
            "replies": [
                {
                    "tool_calls": [
                        {"name": "researcher", "arguments": {"message": "Rome?"}},
                        {"name": "researcher", "arguments": {"message": "Ask the boss"}},
                        {
                            "name": "create_task",
                            "arguments": {"name": "summary", "objective": "Summarise Rome."},
                        },
                    ]
                },
                {"text": "Started."},
            ],
        },
    ]
}
CHILD = {
    "turns": [
        {
            "match": "regex:Rome",
            "replies": [{"tool_calls": [{"name": "report", "arguments": {"summary": "21 C"}}]}],
        },
        {
            "match": "regex:Ask",
            "replies": [
                {"tool_calls": [{"name": "scout", "arguments": {"message": "Rome deep"}}]},
                {"tool_calls": [{"name": "ask_human", "arguments": {"question": "Which?"}}]},
            ],
        },
        {"match": "*", "replies": [{"text": "ok"}]},
    ]
}


def _dual(name: str, prompt: str) -> Any:
    return define_agent(
        **{
            "name": name,
            "type": "dual_ai",
            "exposeAsTool": True,
            "toolDescription": f"{name} works.",
            "maxSessionTurns": 3,
            "sideA": {
                "prompt": prompt,
                "sessionStop": {"name": "report", "messageProperty": "summary"},
            },
            "sideB": {"prompt": "critic_prompt"},
        }
    )


def _definitions(boss: str, child: str) -> Definitions:
    return Definitions().add(
        define_model(name="boss_model", provider="scripted", model=boss),
        define_model(name="child_model", provider="scripted", model=child),
        define_prompt(
            name="boss_prompt",
            toolDescription="leads",
            model="boss_model",
            prompt="You lead.",
            tools=[{"name": "researcher", "blocking": False}, "tasks"],
        ),
        define_prompt(
            name="researcher_prompt",
            toolDescription="researches",
            model="child_model",
            prompt="You research.",
            tools=["scout", "ask_human"],
        ),
        define_prompt(
            name="scout_prompt", toolDescription="scouts", model="child_model", prompt="Scout."
        ),
        define_prompt(
            name="critic_prompt", toolDescription="critic", model="child_model", prompt="Judge."
        ),
        define_agent(name="boss", sideA={"prompt": "boss_prompt"}),
        _dual("researcher", "researcher_prompt"),
        _dual("scout", "scout_prompt"),
    )


def _validate(summary: dict[str, Any]) -> None:
    """The summary as the snapshot schema's `subagentJobSummary`."""
    schema = json.loads((SPECS / "agentruntime-snapshot.schema.json").read_text())
    snapshot = {
        "schemaVersion": "weft-0.1.0",
        "sessionId": "session-x",
        "threads": [],
        "subagentJobSummary": summary,
    }
    jsonschema.Draft202012Validator(schema).validate(snapshot)


def _by_message(summary: SubagentJobSummary, store: Store) -> dict[str, Any]:
    """Each node, keyed by the first message its parent gave it."""
    nodes = {}
    for node in summary.children:
        entry = store.subagents.find(node.parent_thread_id, node.thread_id) or {}
        nodes[str((entry.get("arguments") or {}).get("message"))] = node
    return nodes


def _from_events(store: Store, thread_id: str) -> SubagentJobSummary:
    """The summary from the event logs alone: subagent entries, sessions, statuses and
    actions from each thread's events, tasks folded from their own logs."""
    children: list[ChildFacts] = []

    def walk(parent: str, depth: int) -> None:
        events = store.events.read(parent, limit=100_000)
        entries: dict[str, dict[str, Any]] = {}
        for event in events:
            entry = (event.payload or {}).get("entry")
            if event.type.startswith("subagent.") and isinstance(entry, dict):
                entries[str(entry["reference"])] = entry
        sessions = last_sessions(events)
        for reference, entry in sorted(entries.items(), key=lambda e: e[1]["createdAt"]):
            own = store.events.read(reference, limit=100_000)
            children.append(
                ChildFacts(
                    entry=entry,
                    parent_thread_id=parent,
                    depth=depth,
                    last_session=sessions.get(reference),
                    thread_status=thread_read_from_events(own).status,
                    pending_actions=[] if entry.get("closed") else pending_action_kinds(own),
                )
            )
            walk(reference, depth + 1)
        # Then the threads the tasks it created ran their attempts in, from the tasks' logs.
        record = rebuild([e.to_wire() for e in store.tasks.events(plan_task_id(parent, "summary"))])
        for entry in attempt_entries(record, closed) if record is not None else []:
            own = store.events.read(entry["reference"], limit=100_000)
            children.append(
                ChildFacts(
                    entry=entry,
                    parent_thread_id=parent,
                    depth=depth,
                    thread_status=thread_read_from_events(own).status,
                    pending_actions=[] if entry["closed"] else pending_action_kinds(own),
                )
            )
            walk(entry["reference"], depth + 1)

    def closed(thread_id: str) -> bool:
        own = store.events.read(thread_id, limit=100_000)
        return thread_read_from_events(own).status in CLOSED_THREAD_STATUSES

    walk(thread_id, 1)
    creators = {thread_id, *(str(c.entry["reference"]) for c in children)}
    task_ids = [plan_task_id(t, "summary") for t in creators]
    tasks = [r for r in (rebuild([e.to_wire() for e in store.tasks.events(t)]) for t in task_ids)]
    own_status = thread_read_from_events(store.events.read(thread_id, limit=100_000)).status
    return build_summary(
        thread_id,
        thread_status=own_status,
        children=children,
        tasks=[t for t in tasks if t is not None],
        updated_at="",
    )


def _comparable(summary: SubagentJobSummary) -> dict[str, Any]:
    data = summary.model_dump(mode="json", by_alias=True)
    data.pop("updatedAt")
    return data


async def test_summary_live_rebuilt_and_closed(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """The graph (two children, a grandchild, the task's attempt thread), recoverability,
    the task with its attempt thread, over every surface; rebuilt from events; then from the store once closed."""
    boss, child = add_script(scripted_server, BOSS), add_script(scripted_server, CHILD)
    worker = await start_worker(_definitions(boss, child))
    store = worker.store
    thread = await weft.Thread.start(
        temporal_client, "boss", task_queue=worker.task_queue, store=store
    )
    await thread.send("Go.")
    task_id = plan_task_id(thread.id, "summary")

    def settled() -> bool:
        found = summary_from_store(store, thread.id)
        if found is None or len(found.children) != 4:
            return False
        # Settled: both ended children's closes recorded by their parents, the boss idle
        # after the report queued to it, the task done.
        states = sorted(c.recoverability.state for c in found.children)
        done = bool(found.tasks.items) and found.tasks.items[0].status == "completed"
        closes = sum(c.closed for c in found.children) == 3
        noted = store.messages.list(thread.id)[-1].content == "noted"
        idle = found.thread_status == "waiting_input"
        settled = states == ["closed", "closed", "closed", "waiting_on_person"]
        return settled and done and closes and noted and idle

    await until(settled, "two children, a grandchild and the task settled", 60)
    summary = await thread.subagent_summary()
    assert summary is not None
    nodes = _by_message(summary, store)
    done, waiting, deep = nodes["Rome?"], nodes["Ask the boss"], nodes["Rome deep"]
    assert (done.depth, waiting.depth, deep.depth) == (1, 1, 2)
    assert done.parent_thread_id == waiting.parent_thread_id == thread.id
    assert deep.parent_thread_id == waiting.thread_id and deep.agent == "scout"
    assert done.status == "completed" and done.last_session == "completed" and done.closed
    assert done.ended_at and done.started_at <= done.ended_at
    assert done.recoverability.can_progress is False and done.recoverability.retry is None
    assert waiting.pending_actions == ["ask_human"] and not waiting.closed
    assert waiting.thread_status == "waiting_input" and waiting.workflow_status == "RUNNING"
    assert waiting.recoverability.can_progress is True and waiting.ended_at is None
    [task] = summary.tasks.items
    assert task.task_id == task_id and task.created_by == thread.id
    assert summary.tasks.counts == {"completed": 1} and summary.tasks.total == 1
    assert task.current_attempt is not None and task.current_attempt.status == "completed"
    attempt_row = store.threads.get(task.assigned_thread_id or "")
    assert attempt_row is not None and attempt_row.agent == "boss"
    assert summary.jobs.reason == JOBS_LINKED and summary.jobs.items == []  # none made
    assert summary.unknown == []  # Temporal was asked about the open child
    _validate(summary.model_dump(mode="json", by_alias=True))

    # The same summary from the events alone (less liveness, which only Temporal knows).
    from_store = summary_from_store(store, thread.id)
    assert from_store is not None and from_store.unknown == [LIVENESS_UNKNOWN]
    assert _comparable(_from_events(store, thread.id)) == _comparable(from_store)

    threads = Threads(temporal_client, task_queue=worker.task_queue, store=store)
    config = tmp_path / "cli.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": worker.task_queue}
    config.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )
    async with api_stack(temporal_client, weft_config, worker.task_queue, store=store) as stack:
        same = await threads.subagent_summary(thread.id)
        assert same is not None and _comparable(same) == _comparable(summary)
        (text_code, text, err), (json_code, out, _) = await asyncio.gather(
            weft_cli(config, "thread", "subagents", thread.id),
            weft_cli(config, "thread", "subagents", thread.id, "--json"),
        )
        assert text_code == 0, err
        assert f"  {waiting.thread_id} " in text and "waiting_on_person" in text
        assert f"    {deep.thread_id} " in text and f"{task_id} completed" in text
        assert json_code == 0 and _comparable(SubagentJobSummary.model_validate_json(out)) == (
            _comparable(summary)
        )
        reply = await stack.http.get(f"/threads/{thread.id}/subagents")
        assert reply.status_code == 200, reply.text
        assert len(reply.json()["children"]) == 4
        _validate(reply.json())
        globex = stack.store.api_keys.create("globex", ["threads:read"]).secret
        headers = {"Authorization": f"Bearer {globex}"}
        async with httpx.AsyncClient(timeout=60, base_url=stack.url, headers=headers) as other:
            hidden = await other.get(f"/threads/{thread.id}/subagents")
            assert hidden.status_code == 404, hidden.text
        missing = await stack.http.get("/threads/no-such-thread/subagents")
        assert missing.status_code == 404, missing.text
        code, _, err = await weft_cli(config, "thread", "subagents", "no-such-thread")
        assert code == 1 and err.startswith("weft:"), err

        # Closed: the soft terminate closes the waiting child; read from the store.
        await thread.terminate("done")
        await thread.result()
        closed = await threads.subagent_summary(thread.id)
        assert closed is not None and closed.thread_status == "cancelled"
        closed_nodes = _by_message(closed, store)
        assert closed_nodes["Ask the boss"].recoverability.state == "closed"
        assert closed_nodes["Ask the boss"].status == "terminated"
        assert closed.tasks.items[0].assigned_thread_id == task.assigned_thread_id
        over_http = await stack.http.get(f"/threads/{thread.id}/subagents")
        assert over_http.status_code == 200 and over_http.json()["threadStatus"] == "cancelled"


def _facts(entry: dict[str, Any], **fields: Any) -> ChildFacts:
    base = {"reference": "c-1", "name": "c", "agent": "a", "createdAt": "t0", "resumable": False}
    return ChildFacts(entry={**base, **entry}, parent_thread_id="p", depth=1, **fields)


def test_recoverability_is_honest():
    """Lost (Temporal closed it, no close recorded), a failed child, an idle resumable one
    whose last session failed, a close the parent has not recorded, and a running child
    whose liveness no one asked about."""
    lost = recoverability(_facts({"status": "running"}, workflow_status="TERMINATED"))
    assert (lost.state, lost.retry, lost.can_progress) == ("lost", "not_possible", False)
    failed = recoverability(_facts({"status": "failed", "closed": True}))
    assert (failed.state, failed.retry) == ("closed", "not_possible")
    idle = recoverability(_facts({"status": "idle", "resumable": True}, last_session="failed"))
    assert (idle.state, idle.retry, idle.can_progress) == ("idle", "possible", True)
    stale = recoverability(_facts({"status": "running"}, thread_status="cancelled"))
    assert stale.state == "closed" and "not recorded" in stale.reason
    running = recoverability(_facts({"status": "running"}))
    assert running.state == "running" and running.can_progress is None


@pytest.fixture(params=["sqlite", "postgres"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_databases: Callable[[], str]
) -> Iterator[Store]:
    """A fresh migrated store on each backend."""
    sqlite = f"sqlite:///{tmp_path / 'summary.db'}"
    opened = Store.open(sqlite if request.param == "sqlite" else postgres_databases())
    try:
        yield opened
    finally:
        opened.close()


def test_tasks_are_found_by_their_creating_thread(backend: Store) -> None:
    """`tasks_created_by` reads the tasks whose `scope.threadId` is one of the threads, on
    SQLite and PostgreSQL, and no other thread's task or a task with no thread."""
    at = "2026-11-27T10:00:00.000Z"
    for task_id, scope in [
        ("task-aaaaaaaaaaaa", {"threadId": "boss-1", "sessionId": "s"}),
        ("task-bbbbbbbbbbbb", {"threadId": "child-1"}),
        ("task-cccccccccccc", {"threadId": "other-1"}),
        ("task-dddddddddddd", {"sessionId": "s"}),
    ]:
        record = TaskRecord.model_validate(
            {
                "taskId": task_id,
                "objective": "Do it.",
                "assignee": "helper",
                "scope": scope,
                "createdAt": at,
                "updatedAt": at,
            }
        )
        created = Event.model_validate(
            {
                "type": "task.created",
                "eventId": f"{task_id}:created",
                "timestamp": at,
                "threadId": task_id,
                "taskId": task_id,
                "payload": {"task": record.model_dump(mode="json", by_alias=True)},
            }
        )
        backend.tasks.create(created)
    found = backend.subagents.tasks_created_by(["boss-1", "child-1"])
    assert [t["taskId"] for t in found] == ["task-aaaaaaaaaaaa", "task-bbbbbbbbbbbb"]
    assert backend.subagents.tasks_created_by([]) == []
