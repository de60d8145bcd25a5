"""Hooks on a live thread: each of the twelve at its place, scoping, failures, filters that
break tool pairs, and before_* hooks that refuse a write (stop reason hook_blocked)."""

from __future__ import annotations

from typing import Any

from hook_support import hook_definitions, hook_runs, tool_message, valid_events
from subagent_support import family, start_boss
from support import add_script, idle_after, start_thread, wait_until

from weft.activities.hooks.model_hooks import CHAT_ROLES
from weft.definitions import define_agent, define_prompt


def sent(scripted_server: Any, script: str) -> list[dict[str, Any]]:
    """The requests the scripted model got for `script`, oldest first."""
    return [r for r in scripted_server.requests if r["model"] == script]


def system_of(request: dict[str, Any]) -> str:
    content: str = next(m["content"] for m in request["messages"] if m["role"] == "system")
    return content


async def test_model_call_hooks_see_and_reshape_the_request(
    start_worker, temporal_client, scripted_server
):
    """after_thread_created, filter_messages, after_system_message, prefilter_llm_history and
    the create hooks run in thread.init and model.call with the data the contract names."""
    script = add_script(scripted_server, {"replies": [{"text": "hello there"}]})
    worker = await start_worker(
        hook_definitions(
            script,
            agent_hooks=[
                "created_audit",
                "window_seen",
                "system_tag",
                "redact",
                "stamp",
                "created_log",
            ],
        )
    )
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        messages=[{"role": "user", "content": "my secret plan"}],
    )
    await wait_until(handle, idle_after(1))
    store = worker.store
    value = lambda key: store.values.get(handle.id, key)  # noqa: E731
    assert value("after_thread_created") == [
        {"threadId": handle.id, "agent": "helper", "parentThreadId": None}
    ]
    assert value("filter_messages") == [["user"]]
    assert value("prefilter_llm_history") == [["system", "user"]]
    [request] = sent(scripted_server, script)
    assert system_of(request) == "You are a helpful agent. [tagged helper_prompt]"
    assert request["messages"][-1]["content"] == "my [redacted] plan"
    user, reply = store.messages.list(handle.id)
    assert user.content == "my secret plan"  # the prefilter changed the request only
    assert user.metadata["stamped"] == "user" and reply.metadata["stamped"] == "assistant"
    assert value("after_create_message") == [
        {"id": user.id, "role": "user", "stamped": "user"},
        {"id": reply.id, "role": "assistant", "stamped": "assistant"},
    ]
    events = valid_events(store, handle.id)
    for hook_id in ("created_audit", "window_seen", "system_tag", "redact"):
        [run] = hook_runs(events, hook_id)
        assert run["type"] == "hook.completed" and run["payload"]["durationMs"] >= 0
    [redacted] = hook_runs(events, "redact")
    assert redacted["payload"]["outcome"] == "replaced"
    assert [r["payload"]["messageId"] for r in hook_runs(events, "stamp")] == [user.id, reply.id]
    started = [e for e in events if e["type"] == "hook.started"]
    assert len(started) == len([e for e in events if e["type"] == "hook.completed"]) == 8


async def test_tool_hooks_replace_results_before_they_are_stored(
    start_worker, temporal_client, scripted_server
):
    """after_tool_call_success/failure replace results, before_store_tool_result sees what
    they left, and the create hooks see the result messages."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {"name": "weather", "arguments": {"city": "Lima"}},
                        {"name": "explode", "arguments": {"text": "x"}},
                    ]
                },
                {"text": "done"},
            ]
        },
    )
    hooks = ["success_audit", "failure_soften", "store_log", "stamp", "created_log"]
    worker = await start_worker(hook_definitions(script, agent_hooks=hooks))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    await wait_until(handle, idle_after(1))
    store = worker.store
    forecast = {"city": "Lima", "forecast": "sunny", "celsius": 21}
    weather, weather_meta = tool_message(store, handle.id, "weather")
    assert weather == {"status": "success", "result": {"audited": True, "original": forecast}}
    exploded, _ = tool_message(store, handle.id, "explode")
    assert exploded == {
        "status": "error",
        "error": "the tool failed (details withheld)",
        "error_code": "hidden",
    }
    assert store.values.get(handle.id, "before_store_tool_result") == [
        {
            "tool": "weather",
            "status": "success",
            "result": {"audited": True, "original": forecast},
            "error": None,
        },
        {
            "tool": "explode",
            "status": "error",
            "result": None,
            "error": "the tool failed (details withheld)",
        },
    ]
    assert weather_meta["stamped"] == "tool"
    logged = store.values.get(handle.id, "after_create_message")
    assert [entry["role"] for entry in logged] == ["user", "assistant", "tool", "tool", "assistant"]
    # The model saw the replaced results.
    second = sent(scripted_server, script)[1]
    results = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert '"audited":true' in results[0] and "details withheld" in results[1]
    events = valid_events(store, handle.id)
    [explode_run] = hook_runs(events, "failure_soften")
    assert explode_run["toolCallId"] and explode_run["payload"]["outcome"] == "replaced"


async def test_update_message_runs_the_update_hooks(start_worker, temporal_client, scripted_server):
    """ThreadState.update_message: before_update_message rewrites or refuses the patch,
    after_update_message sees the result; only content and metadata may change."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "edit_first",
                            "arguments": {"text": "edited text", "then": "forbidden words"},
                        }
                    ]
                },
                {"text": "edited"},
            ]
        },
    )
    worker = await start_worker(
        hook_definitions(script, agent_hooks=["update_upper", "updated_log"])
    )
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "please edit"}]
    )
    await wait_until(handle, idle_after(1))
    store = worker.store
    result, _ = tool_message(store, handle.id, "edit_first")
    assert result["status"] == "success", result
    assert result["result"]["content"] == "EDITED TEXT"
    assert "refused to update message" in result["result"]["refused"]
    assert "no forbidden edits" in result["result"]["refused"]
    assert "content and metadata only, not role" in result["result"]["wrongField"]
    assert store.messages.list(handle.id)[0].content == "EDITED TEXT"
    assert store.values.get(handle.id, "after_update_message") == ["EDITED TEXT"]
    events = valid_events(store, handle.id)
    [updated] = [e for e in events if e["type"] == "artifact.changed"]
    assert updated["payload"]["change"] == "message.updated"
    assert updated["payload"]["fields"] == ["content"]
    outcomes = [r["payload"].get("outcome") for r in hook_runs(events, "update_upper")]
    assert outcomes == ["replaced", "blocked"]


async def test_subagent_hooks_run_in_the_child_and_in_the_parent(
    start_worker, temporal_client, scripted_server
):
    """The child's after_thread_created runs in the child; the parent's
    after_subagent_created runs with the parent's state, events in the parent's log."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "researcher", "arguments": {"message": "Rome?"}}]},
                {"text": "Rome is warm."},
            ]
        },
    )
    child = add_script(
        scripted_server,
        {"replies": [{"tool_calls": [{"name": "report", "arguments": {"summary": "21 C"}}]}]},
    )
    base = hook_definitions("unused", agent_hooks=[])
    definitions = family(
        parent, child, child={"hooks": ["created_audit"]}, extra=list(base.hooks.values())
    )
    definitions.agents["boss"] = definitions.agents["boss"].model_copy(
        update={"hooks": ["spawned_log"]}
    )
    worker = await start_worker(definitions)
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(1))
    child_id = state.children[0]["reference"]
    store = worker.store
    expected = {"threadId": child_id, "agent": "researcher", "parentThreadId": handle.id}
    assert store.values.get(handle.id, "after_subagent_created") == [expected]
    assert store.values.get(child_id, "after_thread_created") == [expected]
    assert store.values.get(handle.id, "after_thread_created") is None  # boss does not list it
    [run] = hook_runs(valid_events(store, handle.id), "spawned_log")
    assert run["subagentId"] == child_id and run["toolCallId"]
    assert hook_runs(valid_events(store, child_id), "created_audit")


async def test_prompt_hooks_replace_the_agents_and_unnamed_hooks_never_run(
    start_worker, temporal_client, scripted_server
):
    """A prompt's hooks list replaces the agent's (even when empty); a hook named nowhere
    never runs."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    definitions = hook_definitions(
        script, agent_hooks=["tag_agent"], prompt_hooks=["tag_prompt"], agent="prompt_scoped"
    )
    definitions.add(
        define_prompt(name="plain_prompt", toolDescription="t", model="scripted", prompt="Plain."),
        define_prompt(
            name="silent_prompt",
            toolDescription="t",
            model="scripted",
            prompt="Silent.",
            hooks=[],
        ),
        define_agent(name="agent_scoped", sideA={"prompt": "plain_prompt"}, hooks=["tag_agent"]),
        define_agent(name="none_scoped", sideA={"prompt": "silent_prompt"}, hooks=["tag_agent"]),
    )
    worker = await start_worker(definitions)
    systems = {}
    for agent in ("prompt_scoped", "agent_scoped", "none_scoped"):
        handle = await start_thread(
            temporal_client,
            worker.task_queue,
            agent=agent,
            messages=[{"role": "user", "content": f"hi from {agent}"}],
        )
        await wait_until(handle, idle_after(1))
        [request] = [
            r for r in sent(scripted_server, script) if agent in r["messages"][-1]["content"]
        ]
        systems[agent] = system_of(request)
        events = valid_events(worker.store, handle.id)
        assert not hook_runs(events, "tag_unused")
    assert systems == {
        "prompt_scoped": "You are a helpful agent. [prompt]",
        "agent_scoped": "Plain. [agent]",
        "none_scoped": "Silent.",
    }
    # The snapshot freezes the hooks its agent and prompts name, and no other.
    assert set(definitions.snapshot("prompt_scoped").hooks) == {"tag_agent", "tag_prompt"}


async def test_a_raising_hook_is_recorded_and_the_data_is_kept(
    start_worker, temporal_client, scripted_server
):
    """A hook that raises is hook.failed with its error; the original data is used and the
    thread goes on."""
    script = add_script(scripted_server, {"replies": [{"text": "fine"}]})
    worker = await start_worker(
        hook_definitions(script, agent_hooks=["broken_system", "broken_filter", "system_tag"])
    )
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hi"}]
    )
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason != "hook_blocked"
    [request] = sent(scripted_server, script)
    # The broken hook left the prompt as it was; the next hook still ran on it.
    assert system_of(request) == "You are a helpful agent. [tagged helper_prompt]"
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    events = valid_events(worker.store, handle.id)
    for hook_id in ("broken_system", "broken_filter"):
        [failed] = hook_runs(events, hook_id)
        assert failed["type"] == "hook.failed"
        assert failed["payload"]["error"].startswith("RuntimeError: hook bug")
    assert worker.store.messages.list(handle.id)[-1].content == "fine"


async def test_filters_that_break_tool_pairs_are_repaired_before_sending(
    start_worker, temporal_client, scripted_server
):
    """A filter_messages that drops tool results and a prefilter that drops tool calls:
    the provider still gets a valid transcript, and a runtime.warning names the hook."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "text": "Let me check.",
                    "tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}],
                },
                {"text": "It is sunny."},
            ]
        },
    )
    for hook_id in ("drop_results", "drop_calls"):
        worker = await start_worker(hook_definitions(script, agent_hooks=[hook_id]))
        handle = await start_thread(
            temporal_client, worker.task_queue, messages=[{"role": "user", "content": hook_id}]
        )
        await wait_until(handle, idle_after(1))
        second = [
            r for r in sent(scripted_server, script) if r["messages"][1]["content"] == hook_id
        ]
        messages = second[-1]["messages"]
        assert all(m["role"] in CHAT_ROLES for m in messages)
        assert [m["role"] for m in messages] == ["system", "user", "assistant"]
        assert messages[-1]["content"] == "Let me check." and not messages[-1].get("tool_calls")
        assert second[-1]["status"] == 200
        stored = worker.store.messages.list(handle.id)
        assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
        warnings = [
            e
            for e in valid_events(worker.store, handle.id)
            if e["type"] == "runtime.warning" and e["payload"].get("hookId") == hook_id
        ]
        assert warnings and warnings[0]["payload"]["code"] == "hook_output_repaired"
        assert any("tool" in r for r in warnings[0]["payload"]["repairs"])


async def test_a_refused_message_ends_the_turn_and_the_thread_goes_on(
    start_worker, temporal_client, scripted_server
):
    """before_create_message refusing a user message, then an assistant reply: each turn
    ends with hook_blocked, nothing refused is stored, and the next message is answered."""
    script = add_script(
        scripted_server,
        {
            "turns": [
                {"match": "say it", "replies": [{"text": "a forbidden reply"}]},
                {"match": "*", "replies": [{"text": "ok"}]},
            ]
        },
    )
    worker = await start_worker(hook_definitions(script, agent_hooks=["guard"]))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hello"}]
    )
    await wait_until(handle, idle_after(1))
    for turn, text in ((2, "a forbidden thing"), (3, "say it")):
        await handle.signal("queue_message", {"role": "user", "content": text})
        state = await wait_until(handle, idle_after(turn))
        assert state.stop_reason == "hook_blocked", state
    await handle.signal("queue_message", {"role": "user", "content": "hello again"})
    state = await wait_until(handle, idle_after(4))
    assert state.stop_reason != "hook_blocked"
    stored = worker.store.messages.list(handle.id)
    assert [(m.role, m.content) for m in stored] == [
        ("user", "hello"),
        ("assistant", "ok"),
        ("user", "say it"),
        ("user", "hello again"),
        ("assistant", "ok"),
    ]
    events = valid_events(worker.store, handle.id)
    blocked = [r for r in hook_runs(events, "guard") if r["payload"].get("outcome") == "blocked"]
    assert [b["payload"]["reason"] for b in blocked] == [
        "a user message may not say that",
        "a assistant message may not say that",
    ]
    # The model was never shown the refused message.
    assert not [r for r in sent(scripted_server, script) if "forbidden thing" in str(r["messages"])]


async def test_a_refused_tool_result_is_stored_as_an_error_and_the_turn_ends(
    start_worker, temporal_client, scripted_server
):
    """before_store_tool_result refusing: the stored result says which hook refused and
    why, the turn ends with hook_blocked, and the next turn sees a valid transcript."""
    script = add_script(
        scripted_server,
        {
            "turns": [
                {"match": "again", "replies": [{"text": "fine"}]},
                {
                    "match": "*",
                    "replies": [{"tool_calls": [{"name": "explode", "arguments": {"text": "x"}}]}],
                },
            ]
        },
    )
    worker = await start_worker(hook_definitions(script, agent_hooks=["refuse_explosions"]))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "boom"}]
    )
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason == "hook_blocked"
    result, _ = tool_message(worker.store, handle.id, "explode")
    assert result["status"] == "error" and result["error_code"] == "hook_blocked"
    assert "'refuse_explosions'" in result["error"]
    assert "explosions are not recorded" in result["error"]
    await handle.signal("queue_message", {"role": "user", "content": "again"})
    state = await wait_until(handle, idle_after(2))
    assert state.stop_reason != "hook_blocked"
    last = sent(scripted_server, script)[-1]
    assert last["status"] == 200
    assert [m["role"] for m in last["messages"]] == ["system", "user", "assistant", "tool", "user"]
    valid_events(worker.store, handle.id)


async def test_inside_a_prompt_tool_its_prompt_chooses_the_hooks(
    start_worker, temporal_client, scripted_server
):
    """A prompt tool's model and tool calls run the hooks its own prompt lists, in place of
    the agent's; the caller's calls keep the agent's."""
    from prompt_tool_support import prompt_tool_definitions

    main = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "advisor", "arguments": {"message": "Check Paris"}}]},
                {"text": "The advisor says sunny."},
            ]
        },
    )
    advisor = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
                {"text": "Paris is sunny."},
            ]
        },
    )
    definitions = prompt_tool_definitions(
        main, advisor, advisor_fields={"hooks": ["tag_prompt", "success_audit"]}
    )
    definitions.add(*hook_definitions("unused", agent_hooks=[]).hooks.values())
    definitions.agents["helper"] = definitions.agents["helper"].model_copy(
        update={"hooks": ["tag_agent"]}
    )
    worker = await start_worker(definitions)
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    await wait_until(handle, idle_after(1), timeout=60)
    assert {system_of(r) for r in sent(scripted_server, main)} == {
        "You are a helpful agent. [agent]"
    }
    assert {system_of(r) for r in sent(scripted_server, advisor)} == {
        "You are the advisor. [prompt]"
    }
    weather, _ = tool_message(worker.store, handle.id, "weather")
    assert weather["result"]["audited"] is True
    events = valid_events(worker.store, handle.id)
    [audit] = hook_runs(events, "success_audit")
    assert audit["payload"]["depth"] == 1  # the prompt tool's events say where they ran
