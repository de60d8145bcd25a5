"""Subagents as child workflows (Runtime §7, §8, §10) on the real dev server."""

from __future__ import annotations

import json

import pytest
from subagent_support import BRIEF, RESULT, NoArgs, family, file_tools, look_around, start_boss
from support import add_script, event_schema_validator, idle_after, read, start_thread, wait_until

from activities.definitions import define_agent, define_model, define_prompt, define_tool
from workflows.search_attributes import AGENT


def _tool_result(store, thread_id: str, name: str) -> dict:
    found = [m for m in store.list_messages(thread_id) if m.role == "tool" and m.name == name]
    assert found, f"no {name} tool result in {thread_id}"
    return json.loads(found[-1].content)


def _delegate_then_acknowledge(scripted_server, task: str, acknowledgement: str) -> str:
    """A parent script: call the researcher with `task`, say "started", and answer the
    child's queued completion with `acknowledgement`."""
    return add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "go",
                    "replies": [
                        {"tool_calls": [{"name": "researcher", "arguments": {"message": task}}]},
                        {"text": "started"},
                    ],
                },
                {"match": "completed:", "replies": [{"text": acknowledgement}]},
            ]
        },
    )


async def test_blocking_subagent_answers_its_parent(start_worker, temporal_client, scripted_server):
    """The child's sessionStop payload becomes the parent's tool result; the child ends."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "researcher",
                            "arguments": {"message": "How warm is Rome?", "label": "Rome desk"},
                        }
                    ]
                },
                {"text": "Rome is warm."},
            ]
        },
    )
    child = add_script(
        scripted_server,
        {"replies": [{"tool_calls": [{"name": "report", "arguments": {"summary": "Rome: 21 C"}}]}]},
    )
    worker = await start_worker(family(parent, child, subagent={"initAgentNameProperty": "label"}))
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(1))
    result = _tool_result(worker.store, handle.id, "researcher")
    assert result["status"] == "success", result
    assert result["result"]["response"] == "Rome: 21 C"
    [entry] = state.children
    assert entry["name"] == "Rome desk" and entry["status"] == "completed"
    assert entry["blocking"] is True and entry["resumable"] is False
    assert entry["lastResult"] == "Rome: 21 C"
    child_handle = temporal_client.get_workflow_handle(entry["reference"])
    done = await child_handle.result()
    assert done["status"] == "cancelled"
    # The child's usage rolled up into the parent's totals.
    assert state.usage.input_tokens > entry["usage"]["inputTokens"] > 0
    assert worker.store.list_messages(handle.id)[-1].content == "Rome is warm."


async def test_non_blocking_subagent_reports_later_as_a_queued_message(
    start_worker, temporal_client, scripted_server
):
    """blocking: false returns the reference at once; the result is queued to the parent."""
    parent = _delegate_then_acknowledge(scripted_server, "Rome?", "thanks for the report")
    child = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "progress", "arguments": {"note": "halfway"}}]},
                {
                    "delay_ms": 300,
                    "tool_calls": [{"name": "report", "arguments": {"summary": "Rome: 21 C"}}],
                },
            ]
        },
    )
    worker = await start_worker(family(parent, child, subagent={"blocking": False}))
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(2))
    started = _tool_result(worker.store, handle.id, "researcher")
    assert started["status"] == "success" and started["result"]["status"] == "running"
    messages = worker.store.list_messages(handle.id)
    [queued] = [m for m in messages if m.metadata.get("subagent", {}).get("kind") == "completed"]
    assert queued.role == "user" and "Rome: 21 C" in queued.content
    assert started["result"]["reference"] in queued.content
    assert messages[-1].content == "thanks for the report"
    assert state.children[0]["status"] == "completed"
    # sessionStatus updated the registry without ending the child's session (§8.3).
    assert state.children[0]["statusNote"] == "halfway"
    notes = [
        e.payload.get("note")
        for e in worker.store.read_events(handle.id, types=["subagent.status"])
    ]
    assert "halfway" in notes


async def test_resumable_subagents_and_max_instances(
    start_worker, temporal_client, scripted_server
):
    """subagent_create needs a name, honours maxInstances, and subagent_message resumes."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "subagent_create",
                            "arguments": {"agent": "researcher", "name": " "},
                        },
                        {
                            "name": "subagent_create",
                            "arguments": {"agent": "researcher", "name": "ann", "message": "q1"},
                        },
                        {
                            "name": "subagent_create",
                            "arguments": {"agent": "researcher", "name": "bob"},
                        },
                        {
                            "name": "subagent_message",
                            "arguments": {"reference": "ann", "message": "q2"},
                        },
                    ]
                },
                {"text": "done"},
            ]
        },
    )
    child = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "q1",
                    "replies": [
                        {"tool_calls": [{"name": "report", "arguments": {"summary": "r1"}}]}
                    ],
                },
                {
                    "match": "q2",
                    "replies": [
                        {"tool_calls": [{"name": "report", "arguments": {"summary": "r2"}}]}
                    ],
                },
            ]
        },
    )
    worker = await start_worker(family(parent, child, subagent={"resumable": {"maxInstances": 1}}))
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(1))
    results = [
        json.loads(m.content) for m in worker.store.list_messages(handle.id) if m.role == "tool"
    ]
    assert [r["status"] for r in results] == ["error", "success", "error", "success"]
    assert "non-empty `name`" in results[0]["error"]
    assert results[1]["result"]["response"] == "r1"
    assert results[2]["error_code"] == "max_instances_reached"
    assert "maxInstances is 1" in results[2]["error"] and "subagent_message" in results[2]["error"]
    assert results[3]["result"]["response"] == "r2"
    [entry] = state.children
    assert entry["name"] == "ann" and entry["resumable"] is True and entry["status"] == "idle"
    # The resumable child stays open, idle between messages.
    child_state = await read(temporal_client.get_workflow_handle(entry["reference"]))
    assert child_state.status == "waiting_input" and child_state.counters.turns >= 2
    assert child_state.parent_thread_id == handle.id


async def test_explicit_communication_only_notify_parent_reaches_the_parent(
    start_worker, temporal_client, scripted_server
):
    """parentCommunication: explicit stops the automatic completion message (§7.2, §8.2)."""
    parent = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "go",
                    "replies": [
                        {
                            "tool_calls": [
                                {
                                    "name": "subagent_create",
                                    "arguments": {
                                        "agent": "researcher",
                                        "name": "ann",
                                        "message": "dig",
                                    },
                                }
                            ]
                        },
                        {"text": "waiting"},
                    ],
                },
                {"match": "need a map", "replies": [{"text": "noted"}]},
            ]
        },
    )
    child = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "escalate", "arguments": {"text": "need a map"}}]},
                {"tool_calls": [{"name": "report", "arguments": {"summary": "secret result"}}]},
            ]
        },
    )
    worker = await start_worker(
        family(
            parent,
            child,
            subagent={"blocking": False, "resumable": {"parentCommunication": "explicit"}},
        )
    )
    handle = await start_boss(temporal_client, worker)
    await wait_until(handle, lambda s: bool(s.children) and s.children[0]["status"] == "idle")
    state = await wait_until(handle, idle_after(2))
    from_child = [m for m in worker.store.list_messages(handle.id) if "subagent" in m.metadata]
    assert [m.metadata["subagent"]["kind"] for m in from_child] == ["notify"]
    assert "need a map" in from_child[0].content
    assert all(
        "secret result" not in (m.content or "") for m in worker.store.list_messages(handle.id)
    )
    entry = state.children[0]
    assert entry["statusNote"] == "escalated" and entry["lastResult"] == "secret result"


async def test_attachments_are_copied_both_ways(start_worker, temporal_client, scripted_server):
    """Parent → child and child → parent copies (Runtime §8.1, §8.2); bytes are checked."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {"name": "write_brief", "arguments": {"path": "/attachments/brief.bin"}}
                    ]
                },
                {
                    "tool_calls": [
                        {
                            "name": "researcher",
                            "arguments": {
                                "message": "check it",
                                "files": ["/attachments/brief.bin"],
                            },
                        }
                    ]
                },
                {"text": "got the file"},
            ]
        },
    )
    child = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {"name": "inspect_brief", "arguments": {"path": "/attachments/brief.bin"}}
                    ]
                },
                {
                    "tool_calls": [
                        {
                            "name": "report",
                            "arguments": {
                                "summary": "checked",
                                "files": ["/attachments/result.bin"],
                            },
                        }
                    ]
                },
            ]
        },
    )
    definitions = family(
        parent,
        child,
        subagent={"initAttachmentsProperty": "files"},
        parent_tools=[{"name": "researcher", "initAttachmentsProperty": "files"}, "write_brief"],
        extra=file_tools(),
    )
    definitions.prompts["researcher_prompt"].tools.append("inspect_brief")
    worker = await start_worker(definitions)
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(1))
    reference = state.children[0]["reference"]
    # Parent → child: the child's own copy, read by the child's tool.
    inspected = _tool_result(worker.store, reference, "inspect_brief")
    assert inspected["result"] == {"same": True, "size": len(BRIEF)}
    assert worker.store.files.read_file(reference, "/attachments/brief.bin") == BRIEF
    [first] = [m for m in worker.store.list_messages(reference) if m.role == "user"]
    assert first.attachments == ["/attachments/brief.bin"]
    # Child → parent: a parent-local path in the tool result, holding the child's bytes.
    result = _tool_result(worker.store, handle.id, "researcher")
    [path] = result["result"]["attachments"]
    assert worker.store.files.read_file(handle.id, path) == RESULT
    # Each side holds its own copy under its own path.
    assert worker.store.files.read_file(reference, "/attachments/result.bin") == RESULT
    assert worker.store.files.read_file(handle.id, "/attachments/brief.bin") == BRIEF


async def test_a_missing_attachment_is_a_tool_error_not_a_stuck_thread(
    start_worker, temporal_client, scripted_server
):
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "researcher",
                            "arguments": {"message": "x", "files": ["/attachments/nope.txt"]},
                        }
                    ]
                },
                {"text": "ok"},
            ]
        },
    )
    child = add_script(scripted_server, {"replies": [{"text": "unused"}]})
    worker = await start_worker(
        family(parent, child, subagent={"initAttachmentsProperty": "files"}, extra=file_tools())
    )
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(1))
    result = _tool_result(worker.store, handle.id, "researcher")
    assert result["error_code"] == "attachment_not_found" and "nope.txt" in result["error"]
    assert state.children == []


async def test_handoff_changes_the_agent_of_the_same_thread(
    start_worker, temporal_client, scripted_server
):
    """An ai_human agent called as a tool takes over: the next step runs as that agent."""
    parent = add_script(
        scripted_server,
        {"replies": [{"tool_calls": [{"name": "specialist", "arguments": {"message": "yours"}}]}]},
    )
    # The script picks a reply by the assistant messages after the last user message: the
    # specialist speaks after the boss's handoff call, so its first reply is #1.
    specialist = add_script(
        scripted_server, {"replies": [{"text": "not me"}, {"text": "specialist here"}]}
    )
    child = add_script(scripted_server, {"replies": [{"text": "unused"}]})
    extra = [
        define_model(name="spec_model", provider="scripted", model=specialist),
        define_prompt(
            name="spec_prompt",
            toolDescription="specializes",
            model="spec_model",
            prompt="You specialize.",
        ),
        define_agent(
            name="specialist",
            exposeAsTool=True,
            toolDescription="A specialist",
            sideA={"prompt": "spec_prompt"},
        ),
    ]
    worker = await start_worker(family(parent, child, parent_tools=["specialist"], extra=extra))
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(1))
    assert state.agent == "specialist" and state.children == []
    assert worker.store.list_messages(handle.id)[-1].content == "specialist here"
    [request] = [r for r in scripted_server.requests if r["model"] == specialist]
    assert request["messages"][0] == {"role": "system", "content": "You specialize."}
    # The specialist sees the conversation so far, the handoff call and its result included.
    assert [m["role"] for m in request["messages"][1:]] == ["user", "assistant", "tool"]
    handoffs = [
        e.payload["handoff"]
        for e in worker.store.read_events(handle.id, types=["thread.updated"])
        if "handoff" in e.payload
    ]
    assert handoffs == [{"from": "boss", "to": "specialist", "note": "yours"}]
    described = await handle.describe()
    assert described.typed_search_attributes.get(AGENT) == "specialist"


async def test_dual_ai_debate_projects_roles_per_side(
    start_worker, temporal_client, scripted_server
):
    """Three exchanges; each side sees itself as assistant, the other as user, and never the
    other side's tool calls (Runtime §4)."""
    side_a = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "topic",
                    "replies": [
                        {"tool_calls": [{"name": "weather", "arguments": {"city": "Rome"}}]},
                        {"text": "alpha-1"},
                    ],
                },
                {"match": "beta-1", "replies": [{"text": "alpha-2"}]},
                {"match": "beta-2", "replies": [{"text": "alpha-3"}]},
            ]
        },
    )
    side_b = add_script(
        scripted_server,
        {"turns": [{"match": f"alpha-{i}", "replies": [{"text": f"beta-{i}"}]} for i in (1, 2, 3)]},
    )
    worker = await start_worker(family(side_a, side_a, side_b))
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        agent="researcher",
        messages=[{"role": "user", "content": "topic"}],
    )
    state = await wait_until(
        handle, lambda s: s.status == "waiting_input" and s.counters.turns >= 6
    )
    assert state.stop_reason == "max_session_turns"
    assert (state.counters.side_a_turns, state.counters.side_b_turns) == (3, 3)

    def conversation(script: str) -> list[tuple[str, str | None]]:
        last = [r for r in scripted_server.requests if r["model"] == script][-1]
        return [(m["role"], m.get("content")) for m in last["messages"][1:]]

    assert conversation(side_b) == [
        ("user", "topic"),
        ("user", "alpha-1"),
        ("assistant", "beta-1"),
        ("user", "alpha-2"),
        ("assistant", "beta-2"),
        ("user", "alpha-3"),
    ]
    seen_by_a = conversation(side_a)
    assert seen_by_a[-4:] == [
        ("assistant", "alpha-1"),
        ("user", "beta-1"),
        ("assistant", "alpha-2"),
        ("user", "beta-2"),
    ]
    assert ("tool", seen_by_a[2][1]) == seen_by_a[2]  # A sees its own tool result
    b_requests = [r for r in scripted_server.requests if r["model"] == side_b]
    assert all(
        m["role"] != "tool" and not m.get("tool_calls") for r in b_requests for m in r["messages"]
    )


@pytest.mark.parametrize(
    ("immediate", "flag", "enabled"),
    [(True, "YES", True), (True, "0", False), (False, "yes", True), (False, None, False)],
)
async def test_immediate_and_optional_flags(
    start_worker, temporal_client, scripted_server, immediate, flag, enabled
):
    """optional enables the subagent from env (true/1/yes, any case); immediate runs it before
    the first model step and puts its answer in that step's context."""
    parent = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    child = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "report", "arguments": {"summary": "pre-read done"}}]}
            ]
        },
    )
    config = {"optional": "RESEARCH", "immediate": immediate}
    worker = await start_worker(family(parent, child, subagent=config))
    env = {} if flag is None else {"RESEARCH": {"value": flag, "type": "text"}}
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        agent="boss",
        messages=[{"role": "user", "content": "go"}],
        env=env,
    )
    state = await wait_until(handle, idle_after(1))
    [request] = [r for r in scripted_server.requests if r["model"] == parent]
    offered = [t["function"]["name"] for t in request["tools"]]
    assert ("researcher" in offered) is enabled
    ran = immediate and enabled
    assert len(state.children) == (1 if ran else 0)
    texts = [m.get("content") or "" for m in request["messages"]]
    assert any("pre-read done" in t for t in texts) is ran


async def test_terminating_the_parent_terminates_running_children(
    start_worker, temporal_client, scripted_server
):
    """terminate propagates down (§10); the children's closure reaches the parent registry."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {"name": "researcher", "arguments": {"message": "slow one"}},
                        {"name": "researcher", "arguments": {"message": "slow two"}},
                    ]
                },
                {"text": "both running"},
            ]
        },
    )
    child = add_script(scripted_server, {"replies": [{"delay_ms": 60_000, "text": "never"}]})
    worker = await start_worker(family(parent, child, subagent={"blocking": False}))
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, lambda s: len(s.children) == 2 and idle_after(1)(s))
    children = [temporal_client.get_workflow_handle(e["reference"]) for e in state.children]
    for child_handle in children:
        await wait_until(child_handle, lambda s: s.status == "running")
    await handle.signal("terminate", {"reason": "stop everything"})
    result = await handle.result()
    assert result["status"] == "cancelled"
    for child_handle in children:
        done = await child_handle.result()
        assert done["status"] == "cancelled" and "stop everything" not in (done["reason"] or "")
        assert handle.id in done["reason"]
    closed = [
        e.payload["entry"] for e in worker.store.read_events(handle.id, types=["subagent.closed"])
    ]
    assert sorted(e["reference"] for e in closed) == sorted(c.id for c in children)
    assert {e["status"] for e in closed} == {"terminated"}


async def test_a_failing_child_is_a_failure_the_parent_can_act_on(
    start_worker, temporal_client, scripted_server
):
    """A child whose model fails past retries reports `failed`; the parent's tool result is a
    `subagent_failed` error and the parent carries on."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "researcher", "arguments": {"message": "try"}}]},
                {"text": "the researcher failed, I will answer myself"},
            ]
        },
    )
    child = add_script(
        scripted_server, {"replies": [{"error": {"status": 400, "body": "bad request from test"}}]}
    )
    worker = await start_worker(family(parent, child))
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(1))
    result = _tool_result(worker.store, handle.id, "researcher")
    assert result["status"] == "error" and result["error_code"] == "subagent_failed"
    assert "step_error" in result["error"] and "bad request from test" in result["error"]
    assert state.children[0]["status"] == "failed"
    assert worker.store.list_messages(handle.id)[-1].content.startswith("the researcher failed")
    assert worker.store.read_events(handle.id, types=["subagent.failed"])


async def test_subagent_events_validate_against_the_schema(
    start_worker, temporal_client, scripted_server
):
    """subagent.* events carry parent and child ids and validate (seed 001 schema)."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "researcher", "arguments": {"message": "q"}}]},
                {"text": "done"},
            ]
        },
    )
    child = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "progress", "arguments": {"note": "busy"}}]},
                {"tool_calls": [{"name": "report", "arguments": {"summary": "fine"}}]},
            ]
        },
    )
    worker = await start_worker(family(parent, child))
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(1))
    reference = state.children[0]["reference"]
    child_handle = temporal_client.get_workflow_handle(reference)
    await child_handle.result()
    await wait_until(handle, lambda s: s.children[0]["closed"])
    await handle.signal("terminate", {})
    await handle.result()
    validator = event_schema_validator()
    events = worker.store.read_events(handle.id, limit=10_000)
    events += worker.store.read_events(reference, limit=10_000)
    for event in events:
        errors = [
            e.message
            for e in validator.iter_errors(
                event.model_dump(mode="json", by_alias=True, exclude_none=True)
            )
        ]
        assert not errors, (event.type, errors)
    kinds = [e.type for e in events if e.type.startswith("subagent.")]
    assert {"subagent.spawned", "subagent.status", "subagent.completed", "subagent.closed"} <= set(
        kinds
    )
    for event in events:
        if event.type.startswith("subagent."):
            assert event.payload["parentThreadId"] == handle.id
            assert event.payload["childThreadId"] == reference
    # The registry row in the store follows the events.
    [row] = await _children_of(worker.store, handle.id)
    assert row["reference"] == reference and row["status"] == "completed" and row["closed"]


async def _children_of(store, thread_id: str) -> list[dict]:
    from activities.store import registry

    return registry.children(store.engine, thread_id)


async def test_children_registry_survives_continue_as_new(
    start_worker, temporal_client, scripted_server
):
    """A child's result reaches the parent's next run; the registry was carried over."""
    parent = _delegate_then_acknowledge(scripted_server, "slow", "received")
    child = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "delay_ms": 1500,
                    "tool_calls": [{"name": "report", "arguments": {"summary": "late"}}],
                }
            ]
        },
    )
    worker = await start_worker(family(parent, child, subagent={"blocking": False}))
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        agent="boss",
        messages=[{"role": "user", "content": "go"}],
        options={"continueAsNewEvents": 20},
    )
    state = await wait_until(handle, idle_after(2), timeout=60)
    assert state.counters.runs >= 2
    [entry] = state.children
    assert entry["status"] == "completed" and entry["lastResult"] == "late"
    assert worker.store.list_messages(handle.id)[-1].content == "received"


async def test_thread_state_lookups_and_receiving_side(
    start_worker, temporal_client, scripted_server
):
    """ThreadState reads the registry and the parent; receives_messages: side_b makes the
    child's first message an assistant one, so side B speaks first (§7.1, §7.2)."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "subagent_create",
                            "arguments": {
                                "agent": "researcher",
                                "name": "sim",
                                "message": "opening line",
                            },
                        },
                        {"name": "look_around", "arguments": {}},
                    ]
                },
                {"text": "ok"},
            ]
        },
    )
    side_a = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "look_around", "arguments": {}}]},
                {"tool_calls": [{"name": "report", "arguments": {"summary": "a done"}}]},
            ]
        },
    )
    side_b = add_script(scripted_server, {"replies": [{"text": "the simulated user answers"}]})
    definitions = family(
        parent,
        side_a,
        side_b,
        parent_tools=[
            {"name": "researcher", "resumable": {"receives_messages": "side_b"}},
            "look_around",
        ],
        extra=[
            define_tool(name="look_around", description="Look", args=NoArgs, execute=look_around)
        ],
    )
    definitions.prompts["researcher_prompt"].tools.append("look_around")
    worker = await start_worker(definitions)
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(1))
    [entry] = state.children
    parent_view = _tool_result(worker.store, handle.id, "look_around")["result"]
    assert parent_view["children"] == [{"name": "sim", "status": entry["status"]}]
    assert parent_view["child_thread_agent"] == "researcher" and parent_view["parent"] is None
    child_view = _tool_result(worker.store, entry["reference"], "look_around")["result"]
    assert child_view["parent"] == handle.id and child_view["children"] == []
    assert child_view["arguments"] == {
        "agent": "researcher",
        "name": "sim",
        "message": "opening line",
    }
    assert parent_view["arguments"] == {}
    child_messages = worker.store.list_messages(entry["reference"])
    assert child_messages[0].role == "assistant" and child_messages[0].content == "opening line"
    first_b = next(r for r in scripted_server.requests if r["model"] == side_b)
    assert first_b["messages"][1:] == [{"role": "user", "content": "opening line"}]
    assert entry["lastResult"] == "a done"


async def test_malformed_subagent_signals_become_warnings(
    start_worker, temporal_client, scripted_server
):
    """Reports and bootstrap signals from nowhere never fail a task: each is a warning."""
    parent = add_script(scripted_server, {"replies": [{"text": "hi"}]})
    worker = await start_worker(family(parent, parent))
    handle = await start_boss(temporal_client, worker)
    await wait_until(handle, idle_after(1))
    await handle.signal("subagent_report", {"reference": "thread_x", "kind": "explode"})
    await handle.signal(
        "subagent_report", {"reference": "thread_x", "kind": "completed", "reportId": "r1"}
    )
    await handle.signal("variables_provided", {"requestId": "varreq_unknown"})
    await handle.signal("variables_provided", ["not", "an", "object"])
    state = await wait_until(handle, lambda s: s.warnings >= 4)
    codes = [i["code"] for i in state.incidents]
    assert codes[-4:] == [
        "malformed_signal",
        "unknown_subagent",
        "unknown_variable_request",
        "malformed_signal",
    ]
    assert state.status == "waiting_input" and state.children == []


def test_definition_errors_name_the_file_and_field():
    """A subagent that is not exposed, or a misspelt config field, fails at start-up."""
    from activities.definitions import DefinitionError

    hidden = family("p", "c", child={"exposeAsTool": False})
    with pytest.raises(DefinitionError, match=r"tools\[0\].*set exposeAsTool: true"):
        hidden.validate()
    misspelt = family("p", "c", subagent={"blockin": False})
    with pytest.raises(DefinitionError, match=r"tools\[0\].*blockin"):
        misspelt.validate()
    reserved = family("p", "c", parent_tools=["subagent_create"])
    with pytest.raises(DefinitionError, match="added by the runtime"):
        reserved.validate()


async def test_a_child_that_reported_still_continues_as_new(
    start_worker, temporal_client, scripted_server
):
    """Reports sent in the background must not block the child's continue-as-new forever."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "subagent_create",
                            "arguments": {"agent": "researcher", "name": "ann", "message": "q1"},
                        },
                        {
                            "name": "subagent_message",
                            "arguments": {"reference": "ann", "message": "q2"},
                        },
                    ]
                },
                {"text": "done"},
            ]
        },
    )
    child = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "q1",
                    "replies": [
                        {"tool_calls": [{"name": "progress", "arguments": {"note": "working"}}]},
                        {"tool_calls": [{"name": "report", "arguments": {"summary": "r1"}}]},
                    ],
                },
                {
                    "match": "q2",
                    "replies": [
                        {"tool_calls": [{"name": "report", "arguments": {"summary": "r2"}}]}
                    ],
                },
            ]
        },
    )
    worker = await start_worker(family(parent, child, subagent={"resumable": True}))
    handle = await start_boss(temporal_client, worker, options={"continueAsNewEvents": 20})
    state = await wait_until(handle, idle_after(1), timeout=60)
    [entry] = state.children
    assert entry["lastResult"] == "r2" and entry["statusNote"] == "working"
    child_state = await read(temporal_client.get_workflow_handle(entry["reference"]))
    assert child_state.counters.runs >= 2
