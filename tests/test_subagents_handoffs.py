"""Agents run in the same thread (Runtime §4, §7): handoffs and dual_ai role projection."""

from __future__ import annotations

from subagent_support import family, start_boss
from support import add_script, idle_after, start_thread, wait_until

from weft.definitions import define_agent, define_model, define_prompt
from weft.workflows.search_attributes import AGENT


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
    assert worker.store.messages.list(handle.id)[-1].content == "specialist here"
    [request] = [r for r in scripted_server.requests if r["model"] == specialist]
    assert request["messages"][0] == {"role": "system", "content": "You specialize."}
    # The specialist sees the conversation so far, the handoff call and its result included.
    assert [m["role"] for m in request["messages"][1:]] == ["user", "assistant", "tool"]
    handoffs = [
        e.payload["handoff"]
        for e in worker.store.events.read(handle.id, types=["thread.updated"])
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
