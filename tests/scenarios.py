"""The scenarios whose histories tests/histories/ holds, as drivers a caller probes.

tests/record_histories.py runs them to record histories; tests/test_rebuild_read_model.py
runs them to compare the read model rebuilt from the event log with the live one. Each
driver takes a `Probe`: `quiet` is called where the thread is idle (not for a thread that
is terminated mid-call), `closed` once the terminated thread has closed, with what the
recorder needs (the first run's id of a continued thread, a subagent's handle).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from support import (
    add_script,
    agent_definitions,
    idle_after,
    quick_weather_tool,
    start_thread,
    store_of,
    wait_until,
)

from weft.contract.definitions import ToolRef
from weft.workers.agent_worker import AgentWorker
from weft.workers.scripted_model import ScriptedModelServer

Quiet = Callable[[AgentWorker, Any], Awaitable[None]]
Closed = Callable[[AgentWorker, Any, dict[str, Any]], Awaitable[None]]


async def _nothing(*args: Any) -> None:
    return None


@dataclass
class Probe:
    """What the caller does at a scenario's quiet point and once its thread has closed."""

    queue: str  # task queue prefix: each scenario runs its own worker
    quiet: Quiet = _nothing
    closed: Closed = field(default=_nothing)


async def terminate(probe: Probe, worker: AgentWorker, handle: Any, **extra: Any) -> None:
    """Terminate the thread, wait for it to close (and for `waiting`, a caller waiting on a
    turn), then hand it to `probe.closed` while its worker still runs."""
    waiting = extra.pop("waiting", None)
    await handle.signal("terminate", {"reason": "recorded"})
    if waiting is not None:
        await waiting
    await handle.result()
    await probe.closed(worker, handle, extra)


SCENARIOS: dict[str, dict[str, Any]] = {
    "tool_then_answer": {
        "replies": [
            {"tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
            {"text": "Sunny in Paris."},
            {"text": "Oslo is cold."},
        ]
    },
    "queued_while_busy": {
        "turns": [
            {
                "match": "*",
                "replies": [
                    {
                        "tool_calls": [{"name": "note", "arguments": {"text": "first"}}],
                        "delay_ms": 300,
                    },
                    {"text": "noted both"},
                    {"text": "Oslo is cold."},
                ],
            }
        ]
    },
    "terminated_mid_call": {"replies": [{"text": "never", "delay_ms": 10_000}]},
    "model_error_then_fallback": {"replies": [{"error": {"status": 400, "body": "bad"}}]},
}

# Continue-as-new: a 12-step turn with a tiny event threshold, so the thread continues as
# new between steps and again when idle; every run's history is recorded.
LONG_THREAD = "continued_as_new"
LONG_SCRIPT: dict[str, Any] = {
    "replies": [
        {"tool_calls": [{"name": "note", "arguments": {"text": "n"}}], "repeat": 12},
        {"text": "all noted"},
        {"text": "still here"},
    ]
}

# Human-in-the-loop scenarios: (script, extra agent_definitions arguments).
HITL: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "hitl_ask_and_approve": (
        {
            "replies": [
                {"tool_calls": [{"name": "ask_human", "arguments": {"question": "City?"}}]},
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Rome"}}]},
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
                {"text": "done"},
            ]
        },
        {
            "tools": ["weather", "ask_human"],
            "permissions": {"mode": "auto", "rules": [{"tool": "weather", "decision": "ask"}]},
        },
    ),
    "hitl_permission_timeout": (
        {
            "replies": [
                {"tool_calls": [{"name": "note", "arguments": {"text": "x"}}]},
                {"text": "denied"},
            ]
        },
        {"permissions": {"mode": "default", "askTimeoutSeconds": 1}},
    ),
    "hitl_interrupt_and_queue_edits": (
        {
            "turns": [
                {
                    "match": "hello",
                    "replies": [{"text": "slow " * 20, "chunk_size": 5, "chunk_delay_ms": 150}],
                },
                {"match": "*", "replies": [{"text": "quick"}]},
            ]
        },
        {},
    ),
}


def _scenario_worker(
    client: Any, scripted: ScriptedModelServer, config: Any, queue: str, definitions: Any
) -> AgentWorker:
    """A scenario's own worker: its definitions on its own task queue, the scripted model."""
    return AgentWorker(client, config, definitions=definitions, task_queue=queue, scripted=scripted)


async def _scenario(
    client: Any,
    scripted: ScriptedModelServer,
    config: Any,
    probe: Probe,
    name: str,
    script: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> None:
    model = add_script(scripted, script)
    async with _scenario_worker(
        client, scripted, config, f"{probe.queue}-{name}", agent_definitions(model, **(extra or {}))
    ) as worker:
        handle = await start_thread(
            client,
            worker.task_queue,
            options={"modelMaxAttempts": 1},
            messages=[{"role": "user", "content": "hello"}],
        )
        if extra is not None:
            await _drive_hitl(name, handle)
        elif name == "queued_while_busy":
            await wait_until(handle, lambda s: s.status == "running")
            await handle.signal("queue_message", {"role": "user", "content": "second"})
            await handle.signal("queue_message", {"role": 5})
            await handle.execute_update("submit_turn", {"role": "user", "content": "third"})
        if extra is not None:
            pass
        elif name == "terminated_mid_call":
            await wait_until(handle, lambda s: s.status == "running")
        else:
            await wait_until(
                handle,
                lambda s: (
                    s.status == "waiting_input"
                    and not s.queue
                    and (s.counters.turns >= 1 or s.stop_reason == "step_error")
                ),
            )
            await handle.signal("queue_tool", {"name": "weather", "args": {"city": "Oslo"}})
            await wait_until(handle, idle_after(0))
        if name != "terminated_mid_call":  # that one is never quiet: its call never ends
            await probe.quiet(worker, handle)
        await terminate(probe, worker, handle)


async def _two_turns(
    client: Any,
    scripted: ScriptedModelServer,
    config: Any,
    probe: Probe,
    name: str,
    script: dict[str, Any],
    options: dict[str, Any],
    *,
    runs: int | None = None,
) -> None:
    """A thread over several runs: a first message, a second queued once the first turn is
    done; quiet once the second turn is done (on run `runs`, when given), then terminated."""
    model = add_script(scripted, script)
    async with _scenario_worker(
        client, scripted, config, f"{probe.queue}-{name}", agent_definitions(model)
    ) as worker:
        started = await start_thread(
            client,
            worker.task_queue,
            options=options,
            messages=[{"role": "user", "content": "hello"}],
        )
        handle = client.get_workflow_handle(started.id)  # follows the newest run
        await wait_until(handle, idle_after(1), timeout=60)
        await handle.signal("queue_message", {"role": "user", "content": "are you there?"})
        await wait_until(
            handle,
            lambda s: idle_after(2)(s) and runs in (None, s.counters.runs),
            timeout=60,
        )
        await probe.quiet(worker, handle)
        await terminate(probe, worker, handle, first_run_id=started.first_execution_run_id)


async def _long_thread(
    client: Any, scripted: ScriptedModelServer, config: Any, probe: Probe
) -> None:
    """Two turns on a thread that continues as new every 30 events."""
    options = {"modelMaxAttempts": 1, "continueAsNewEvents": 30}
    await _two_turns(client, scripted, config, probe, LONG_THREAD, LONG_SCRIPT, options)


IDLE_CONTINUED = "continued_idle"


async def _idle_thread(
    client: Any, scripted: ScriptedModelServer, config: Any, probe: Probe
) -> None:
    """Two turns, the second asked while the first quiet while runs (its timer, never
    cancelled, fires during or after the second turn and sleeps what is left of the newer
    quiet while); three seconds after the second turn, the run continues as new. The new
    run has run no turn: it arms nothing, and is terminated."""
    script = {"turns": [{"match": "*", "replies": [{"text": "ok"}]}]}
    options = {"continueAsNewIdleSeconds": 3}
    await _two_turns(client, scripted, config, probe, IDLE_CONTINUED, script, options, runs=2)


SUBAGENTS = "subagents"


async def _subagents(client: Any, scripted: ScriptedModelServer, config: Any, probe: Probe) -> None:
    """A parent with a blocking subagent (status, report) and a live resumable one that the
    parent's terminate reaches; records the parent's and the first child's histories."""
    from subagent_support import family

    parent = add_script(
        scripted,
        {
            "replies": [
                {"tool_calls": [{"name": "researcher", "arguments": {"message": "q"}}]},
                {
                    "tool_calls": [
                        {"name": "subagent_create", "arguments": {"agent": "keeper", "name": "k"}}
                    ]
                },
                {"text": "done"},
            ]
        },
    )
    child = add_script(
        scripted,
        {
            "replies": [
                {"tool_calls": [{"name": "progress", "arguments": {"note": "busy"}}]},
                {"tool_calls": [{"name": "report", "arguments": {"summary": "fine"}}]},
            ]
        },
    )
    definitions = family(parent, child, parent_tools=["researcher", "keeper"])
    keeper = definitions.agents["researcher"].model_copy(update={"name": "keeper"})
    definitions.add(keeper)
    definitions.prompts["boss_prompt"].tools[1] = ToolRef.model_validate(
        {"name": "keeper", "resumable": True}
    )
    async with _scenario_worker(
        client, scripted, config, f"{probe.queue}-{SUBAGENTS}", definitions
    ) as worker:
        handle = await start_thread(
            client, worker.task_queue, agent="boss", messages=[{"role": "user", "content": "go"}]
        )
        state = await wait_until(handle, idle_after(1), timeout=60)
        await probe.quiet(worker, handle)
        first_child = client.get_workflow_handle(state.children[0]["reference"])
        await terminate(probe, worker, handle, child=first_child)


PROMPT_TOOL = "prompt_tool"


async def _prompt_tool(
    client: Any, scripted: ScriptedModelServer, config: Any, probe: Probe
) -> None:
    """A prompt tool that runs a tool of its own and calls a nested prompt tool, then
    answers; the caller answers after its one result."""
    from prompt_tool_support import prompt_tool_definitions

    main = add_script(
        scripted,
        {
            "replies": [
                {"tool_calls": [{"name": "advisor", "arguments": {"message": "Check Paris"}}]},
                {"text": "The advisor says sunny."},
            ]
        },
    )
    advisor = add_script(
        scripted,
        {
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
                {"tool_calls": [{"name": "deep", "arguments": {"message": "Go deeper"}}]},
                {"text": "Paris is sunny."},
            ]
        },
    )
    deep = add_script(
        scripted,
        {
            "replies": [
                {"tool_calls": [{"name": "note", "arguments": {"text": "deep"}}]},
                {"text": "Deep done."},
            ]
        },
    )
    definitions = prompt_tool_definitions(main, advisor, deep=deep)
    async with _scenario_worker(
        client, scripted, config, f"{probe.queue}-{PROMPT_TOOL}", definitions
    ) as worker:
        handle = await start_thread(
            client, worker.task_queue, messages=[{"role": "user", "content": "hello"}]
        )
        await wait_until(handle, idle_after(1), timeout=60)
        await probe.quiet(worker, handle)
        await terminate(probe, worker, handle)


HOOKS = "hooks"


async def _hooks(client: Any, scripted: ScriptedModelServer, config: Any, probe: Probe) -> None:
    """A thread with hooks: results replaced, a user message refused (hook_blocked in the
    model step), then a tool result refused (hook_blocked after the tool), then answered."""
    from hook_support import hook_definitions

    model = add_script(
        scripted,
        {
            "turns": [
                {
                    "match": "boom",
                    "replies": [{"tool_calls": [{"name": "explode", "arguments": {"text": "x"}}]}],
                },
                {
                    "match": "*",
                    "replies": [
                        {"tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
                        {"text": "Sunny in Paris."},
                    ],
                },
            ]
        },
    )
    definitions = hook_definitions(
        model, agent_hooks=["created_audit", "stamp", "guard", "success_audit", "refuse_explosions"]
    )
    async with _scenario_worker(
        client, scripted, config, f"{probe.queue}-{HOOKS}", definitions
    ) as worker:
        handle = await start_thread(
            client, worker.task_queue, messages=[{"role": "user", "content": "hello"}]
        )
        await wait_until(handle, idle_after(1), timeout=60)
        for turns, text in ((2, "a forbidden thing"), (3, "boom"), (4, "thanks")):
            await handle.signal("queue_message", {"role": "user", "content": text})
            await wait_until(handle, idle_after(turns), timeout=60)
        await probe.quiet(worker, handle)
        await terminate(probe, worker, handle)


ASKS = "asks"


async def _asks(client: Any, scripted: ScriptedModelServer, config: Any, probe: Probe) -> None:
    """submit_turn with wait=completed: an answered tool turn, a message that joins a running
    turn, a refused one (policy reject), then terminate while one waits (aborted)."""
    from weft.client.threads import Threads

    model = add_script(
        scripted,
        {
            "turns": [
                {
                    "match": "weather",
                    "replies": [
                        {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
                        {"text": "Sunny in Oslo."},
                    ],
                },
                {
                    "match": "slow",
                    "replies": [
                        {
                            "text": "looking it up, one moment please, nearly there",
                            "tool_calls": [{"name": "weather", "arguments": {"city": "Rome"}}],
                            "chunk_size": 4,
                            "chunk_delay_ms": 100,
                        }
                    ],
                },
                {"match": "joined", "replies": [{"text": "both answered"}]},
                {"match": "*", "replies": [{"text": "never", "delay_ms": 10_000}]},
            ]
        },
    )
    async with _scenario_worker(
        client, scripted, config, f"{probe.queue}-{ASKS}", agent_definitions(model)
    ) as worker:
        handle = await start_thread(client, worker.task_queue, options={"modelMaxAttempts": 1})
        threads = Threads(client, task_queue=worker.task_queue)
        await threads.ask(handle.id, "weather in Oslo?", update_id="ask-weather")
        slow = asyncio.create_task(threads.ask(handle.id, "slow one", update_id="ask-slow"))
        await wait_until(handle, lambda s: s.status == "running")
        await threads.ask(handle.id, "now", policy="reject", update_id="ask-rejected")
        await threads.ask(handle.id, "joined too", update_id="ask-joined")
        await slow
        waiting = asyncio.create_task(threads.ask(handle.id, "hang", update_id="ask-aborted"))
        await wait_until(handle, lambda s: s.status == "running")
        await terminate(probe, worker, handle, waiting=waiting)


async def _drive_hitl(name: str, handle: Any) -> None:
    def pending(s: Any) -> bool:
        return bool(s.pending_actions)

    if name == "hitl_ask_and_approve":
        action = (await wait_until(handle, pending)).pending_actions[0]
        await handle.signal("respond_action", {"actionId": "nope", "decision": "deny"})
        await handle.signal(
            "respond_action",
            {"actionId": action["actionId"], "decision": "answer", "answer": "Rome"},
        )
        approval = (
            await wait_until(handle, lambda s: pending(s) and s.pending_actions[0] != action)
        ).pending_actions[0]
        await handle.execute_update(
            "respond_action_checked",
            {"actionId": approval["actionId"], "decision": "approve", "scope": "session"},
        )
    elif name == "hitl_interrupt_and_queue_edits":
        await wait_until(handle, lambda s: s.status == "running")
        await asyncio.sleep(0.5)  # let the model call start streaming
        await handle.signal("queue_message", {"role": "user", "content": "a"})
        await handle.signal("queue_message", {"role": "user", "content": "b"})
        queued = (await wait_until(handle, lambda s: len(s.queue) == 2)).queue
        await handle.signal("promote_queued_turn", {"queueId": queued[1].queue_id})
        await handle.signal("remove_queued_turn", {"queueId": queued[0].queue_id})
        await handle.execute_update(
            "submit_turn", {"role": "user", "content": "no", "policy": "reject"}
        )
        await handle.execute_update(
            "submit_turn", {"role": "user", "content": "now", "policy": "interrupt"}
        )
    await wait_until(handle, idle_after(1), timeout=60)


EFFECTS = "effects"


async def _effects(client: Any, scripted: ScriptedModelServer, config: Any, probe: Probe) -> None:
    """A tool schedules an effect that fires on the idle thread and starts a turn; an effect
    that fails once is retried; one is removed; one is pending when the thread terminates."""
    from effect_support import effect_definitions

    plan = {"effect": "remind", "args": {"text": "reminder"}, "delay_ms": 300}
    model = add_script(
        scripted,
        {
            "turns": [
                {
                    "match": "hello",
                    "replies": [
                        {"tool_calls": [{"name": "plan", "arguments": plan}]},
                        {"text": "planned"},
                    ],
                },
                {"match": "reminder", "replies": [{"text": "reminded"}]},
            ]
        },
    )
    async with _scenario_worker(
        client, scripted, config, f"{probe.queue}-{EFFECTS}", effect_definitions(model)
    ) as worker:
        handle = await start_thread(
            client, worker.task_queue, messages=[{"role": "user", "content": "hello"}]
        )
        await wait_until(handle, idle_after(2), timeout=60)
        schedule = "schedule_effect_checked"
        await handle.execute_update(schedule, {"name": "flaky", "args": {"fail_attempts": 1}})
        await wait_until(handle, lambda s: not s.scheduled_effects, timeout=60)
        removed = await handle.execute_update(schedule, {"name": "remind", "delayMs": 60_000})
        await handle.execute_update("remove_scheduled_effect_checked", {"id": removed["id"]})
        await handle.execute_update(schedule, {"name": "remind", "delayMs": 60_000})
        await probe.quiet(worker, handle)
        await terminate(probe, worker, handle)


MCP = "mcp"


async def _mcp(client: Any, scripted: ScriptedModelServer, config: Any, probe: Probe) -> None:
    """MCP tools: the catalogue listed when the prompt first calls its model, a call, a call
    that makes the server report list_changed (listed again), an elicitation answered by a
    person, and a refresh_tools signal before the next turn."""
    from mcp_support import stdio_server

    model = add_script(
        scripted,
        {
            "turns": [
                {
                    "match": "start",
                    "replies": [
                        {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
                        {"tool_calls": [{"name": "add_tool", "arguments": {"name": "shiny"}}]},
                        {"tool_calls": [{"name": "ask_name", "arguments": {}}]},
                        {"text": "done"},
                    ],
                },
                {"match": "*", "replies": [{"text": "refreshed"}]},
            ]
        },
    )
    definitions = agent_definitions(model, tools=["weather", {"mcp": "tools"}])
    definitions.add(stdio_server(allow=["add", "add_tool", "ask_name", "shiny"]))
    async with _scenario_worker(
        client, scripted, config, f"{probe.queue}-{MCP}", definitions
    ) as worker:
        handle = await start_thread(
            client, worker.task_queue, messages=[{"role": "user", "content": "start"}]
        )
        state = await wait_until(handle, lambda s: bool(s.pending_actions), timeout=60)
        await handle.signal(
            "respond_action",
            {
                "actionId": state.pending_actions[0]["actionId"],
                "decision": "answer",
                "answer": {"name": "Ada"},
            },
        )
        await wait_until(handle, idle_after(1), timeout=60)
        await handle.signal("refresh_tools", {})
        await handle.signal("queue_message", {"role": "user", "content": "again"})
        await wait_until(handle, idle_after(2), timeout=60)
        await probe.quiet(worker, handle)
        await terminate(probe, worker, handle)


TRUTHFUL = "truthful_log"


class _Wait(BaseModel):
    seconds: float


async def _wait(state: Any, args: _Wait) -> str:
    """A tool that waits until its activity is cancelled (or `seconds` pass)."""
    await asyncio.sleep(args.seconds)
    return "waited"


async def _truthful(client: Any, scripted: ScriptedModelServer, config: Any, probe: Probe) -> None:
    """The truthful-log patch (workflows/agent_thread.py): a refused signal while idle is
    written at once, and terminate waits for the in-flight tool call to stop."""
    from weft.definitions import define_tool

    model = add_script(
        scripted,
        {
            "turns": [
                {"match": "hello", "replies": [{"text": "hi"}]},
                {
                    "match": "*",
                    "replies": [{"tool_calls": [{"name": "wait", "arguments": {"seconds": 60}}]}],
                },
            ]
        },
    )
    definitions = agent_definitions(model, tools=["weather", "wait"]).add(
        define_tool(name="wait", description="Waits", args=_Wait, execute=_wait)
    )
    async with _scenario_worker(
        client, scripted, config, f"{probe.queue}-{TRUTHFUL}", definitions
    ) as worker:
        handle = await start_thread(
            client, worker.task_queue, messages=[{"role": "user", "content": "hello"}]
        )
        await wait_until(handle, idle_after(1))
        await handle.signal("queue_message", {"role": "wizard", "content": "refused"})
        await wait_until(handle, lambda s: s.warnings == 1)
        await handle.signal("queue_message", {"role": "user", "content": "wait please"})
        for _ in range(600):  # the tool call has started: its event is stored
            if store_of(worker).events.read(handle.id, types=["tool.started"]):
                break
            await asyncio.sleep(0.05)
        await terminate(probe, worker, handle)


# A quick tool (`define_tool(quick=True)`): its calls are local activities, beside an
# activity call in the same step.
QUICK_TOOL = "quick_tool"
QUICK_SCRIPT: dict[str, Any] = {
    "replies": [
        {
            "tool_calls": [
                {"name": "quick_weather", "arguments": {"city": "Rome"}},
                {"name": "weather", "arguments": {"city": "Oslo"}},
                {"name": "quick_weather", "arguments": {"city": "Bergen"}},
            ]
        },
        {"tool_calls": [{"name": "quick_weather", "arguments": {"city": "Paris"}}]},
        {"text": "all sunny"},
    ]
}


async def _quick_tool(
    client: Any, scripted: ScriptedModelServer, config: Any, probe: Probe
) -> None:
    model = add_script(scripted, QUICK_SCRIPT)
    definitions = agent_definitions(model, tools=["weather", "quick_weather"]).add(
        quick_weather_tool()
    )
    async with _scenario_worker(
        client, scripted, config, f"{probe.queue}-{QUICK_TOOL}", definitions
    ) as worker:
        handle = await start_thread(
            client, worker.task_queue, messages=[{"role": "user", "content": "weather?"}]
        )
        await wait_until(handle, idle_after(1))
        await probe.quiet(worker, handle)
        await terminate(probe, worker, handle)


DEFINITIONS_CHECK = "definitions_check"


async def _definitions_check(
    client: Any, scripted: ScriptedModelServer, config: Any, probe: Probe
) -> None:
    """The definitions check in a session's first `model.call`: a session on the worker
    that started the thread (the check passes), then one on a worker with a changed prompt
    (the call is refused unsent, the thread moves, `policy.changed`, the call again)."""
    model = add_script(scripted, {"replies": [{"text": "ok"}]})
    queue = f"{probe.queue}-{DEFINITIONS_CHECK}"
    async with AgentWorker(
        client, config, definitions=agent_definitions(model), task_queue=queue, scripted=scripted
    ):
        handle = await start_thread(client, queue, messages=[{"role": "user", "content": "one"}])
        await wait_until(handle, idle_after(1))
        await handle.signal("queue_message", {"role": "user", "content": "two"})
        await wait_until(handle, idle_after(2))
    changed = agent_definitions(model, tools=["weather", "note"])
    async with AgentWorker(
        client, config, definitions=changed, task_queue=queue, scripted=scripted
    ) as worker:
        await handle.signal("queue_message", {"role": "user", "content": "three"})
        await wait_until(handle, idle_after(3))
        await probe.quiet(worker, handle)
        await terminate(probe, worker, handle)


Driver = Callable[[Any, ScriptedModelServer, Any, Probe], Awaitable[None]]


def _simple(name: str) -> Driver:
    def drive(client: Any, scripted: ScriptedModelServer, config: Any, probe: Probe) -> Any:
        return _scenario(client, scripted, config, probe, name, SCENARIOS[name])

    return drive


def _hitl(name: str) -> Driver:
    def drive(client: Any, scripted: ScriptedModelServer, config: Any, probe: Probe) -> Any:
        script, extra = HITL[name]
        return _scenario(client, scripted, config, probe, name, script, extra)

    return drive


# Every scenario by name, in the order the recorder runs them.
DRIVERS: dict[str, Driver] = {
    **{name: _simple(name) for name in SCENARIOS},
    LONG_THREAD: _long_thread,
    IDLE_CONTINUED: _idle_thread,
    **{name: _hitl(name) for name in HITL},
    SUBAGENTS: _subagents,
    PROMPT_TOOL: _prompt_tool,
    HOOKS: _hooks,
    ASKS: _asks,
    EFFECTS: _effects,
    MCP: _mcp,
    TRUTHFUL: _truthful,
    DEFINITIONS_CHECK: _definitions_check,
    QUICK_TOOL: _quick_tool,
}
