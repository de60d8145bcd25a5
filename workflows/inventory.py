"""The thread's tool inventory and execution environment, from the thread's memory.

Pure: the workflow's queries answer with them, and the close writes them to the store.
They follow what the thread does: the tools are those `model.call` offers the active
agent's side (`contract/tool_catalog.py`, the MCP catalogues of `McpBook`), and each one's
permission is what `HumanGate.permit` would decide. Env is listed by name, never value.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from weft.contract.actions import PermissionMode
from weft.contract.budget import BudgetState
from weft.contract.carry_parts import ActionBook
from weft.contract.definitions import AgentDef, DefinitionSnapshot, PromptDef, ToolRef, ToolSpec
from weft.contract.events import Event
from weft.contract.inventory import (
    KIND_EXECUTION_ENVIRONMENT,
    KIND_TOOL_INVENTORY,
    EnvLayer,
    EnvVariable,
    ExecutionEnvironment,
    InventoryTool,
    McpServerState,
    ToolInventory,
    ToolKind,
    ToolPermission,
    ToolSource,
    content_ref,
)
from weft.contract.mcp import McpToolSpec, offered_mcp_tools, servers_of
from weft.contract.mcp_book import McpBook
from weft.contract.messages import Side
from weft.contract.permissions import EffectivePolicy, effective_policy, evaluate
from weft.contract.thread import ThreadStartInput
from weft.contract.thread_env import merge_env, prompt_env
from weft.contract.tool_catalog import enabled_subagents, offered_tools, subagent_configs
from weft.workflows.open_calls import OpenCalls
from weft.workflows.views import AgentInForce

NOT_LOADED = "tools: the thread's definitions are not loaded yet (it is preparing)"
RUN_CODE_UNSEEN = (
    "runCode runs inside a tool call's activity on a worker; the workflow sees the tool "
    "call, not the run"
)
RUN_CODE_LIMITS = (
    "set by the worker's sandbox pool (docs/run-code.md: 64 MiB heap and no CPU cap unless "
    "configured), and each call may set memoryLimitBytes / cpuTimeLimitMs"
)


class InventoryShown(AgentInForce, Protocol):
    """What the inventory and the environment read of the thread (read-only)."""

    @property
    def thread_id(self) -> str: ...

    @property
    def start(self) -> ThreadStartInput: ...

    @property
    def actions(self) -> ActionBook: ...

    @property
    def mcp(self) -> McpBook: ...

    @property
    def open_calls(self) -> OpenCalls: ...

    @property
    def budget(self) -> BudgetState | None: ...

    def timestamp(self) -> str: ...


class SnapshotWriter(InventoryShown, Protocol):
    """The close writes both read models as events."""

    def emit(self, event_type: str, payload: Any = None, **ids: Any) -> Event: ...


def tool_inventory(mem: InventoryShown) -> ToolInventory:
    """Every tool the active agent's side can call now, with its permission and source."""
    snapshot, side = mem.snapshot, mem.active_side or "a"
    if snapshot is None:
        return _inventory(mem, mem.start.agent, side, "", "no_policy", [], [], [NOT_LOADED])
    agent = snapshot.agent_def(mem.active_agent)
    prompt = snapshot.prompts[agent.side(side).prompt]
    # The thread's own agent's prompt decides permissions, as `HumanGate.permit` does.
    policy = effective_policy(snapshot.agent, snapshot.prompts[snapshot.agent.side(side).prompt])
    env = prompt_env(prompt, agent, mem.start.env)
    configs = subagent_configs(snapshot, prompt)
    flags = {name: config.optional for name, config in configs.items() if config.optional}
    tools = [
        _tool(
            snapshot.tools[name],
            _permission(policy, name, snapshot.tools[name].builtin, mem),
            optional=flags.get(name),
        )
        for name in offered_tools(snapshot, prompt, agent.side(side).lifecycle_tools(), env)
    ]
    enabled = enabled_subagents(snapshot, prompt, env)
    for name, flag in flags.items():
        if name not in enabled and name in snapshot.tools:
            off = _tool(snapshot.tools[name], _permission(policy, name, True, mem), optional=flag)
            reason = f"env flag {flag!r} is not true, 1 or yes"
            tools.append(off.model_copy(update={"enabled": False, "disabled_reason": reason}))
    taken = {t.name for t in tools}
    for spec in offered_mcp_tools(prompt.tools, mem.mcp.catalogs):
        if spec.name not in taken:
            tools.append(_mcp_tool(spec, _permission(policy, spec.name, False, mem)))
    servers, unknown = _servers(mem, snapshot, prompt)
    mode: PermissionMode | Literal["no_policy"] = policy.mode if policy else "no_policy"
    return _inventory(mem, agent.name, side, prompt.name, mode, tools, servers, unknown)


def execution_environment(mem: InventoryShown) -> ExecutionEnvironment:
    """Env names (never values), the thread's filesystem, its limits and what runs."""
    snapshot, side = mem.snapshot, mem.active_side or "a"
    unknown = [f"runCode: {RUN_CODE_UNSEEN}"]
    if mem.start.scoped_env_request:
        unknown.append(
            "env: the scoped variables of request "
            f"{mem.start.scoped_env_request!r} join the env in the activities, unseen here"
        )
    env: list[EnvVariable] = []
    missing: list[str] = []
    limits: dict[str, Any] = _thread_limits(mem)
    prompt_name = ""
    agent_name = mem.start.agent
    if snapshot is None:
        unknown.append("env: the thread's definitions are not loaded yet (it is preparing)")
    else:
        agent = snapshot.agent_def(mem.active_agent)
        prompt = snapshot.prompts[agent.side(side).prompt]
        agent_name, prompt_name = agent.name, prompt.name
        env, missing = _env(prompt, agent, mem.start.env)
        if any(isinstance(t, ToolRef) and t.env for t in prompt.tools):
            unknown.append("env: a tool entry's own `env` is given to that tool alone, not here")
        limits |= {
            "maxStepsPerTurn": agent.side(side).max_steps,
            "maxSessionTurns": agent.max_session_turns,
        }
    return ExecutionEnvironment(
        thread_id=mem.thread_id,
        agent=agent_name,
        side=side,
        prompt=prompt_name,
        thread_status=mem.status,
        env=env,
        missing_variables=missing,
        cwd=None,
        workspace_roots=[
            {
                "kind": "thread_filesystem",
                "root": "/",
                "threadId": mem.thread_id,
                "storage": "store",
                "note": "the thread's own files (ThreadState file API), kept in the store; "
                "no host directory is mounted",
            }
        ],
        limits=limits,
        processes={
            "runCode": {"status": "unknown", "reason": RUN_CODE_UNSEEN},
            # The calls of the last model reply still waiting for results: any of them
            # may be running code now.
            "toolCallsAwaitingResults": sorted(mem.open_calls.waiting),
            "activeTurnId": mem.active_turn,
        },
        unknown=unknown,
        updated_at=mem.timestamp(),
    )


# ---- tools ------------------------------------------------------------------------------


def _inventory(
    mem: InventoryShown,
    agent: str,
    side: Side,
    prompt: str,
    mode: PermissionMode | Literal["no_policy"],
    tools: list[InventoryTool],
    servers: list[McpServerState],
    unknown: list[str],
) -> ToolInventory:
    content = [
        mode,
        [t.model_dump(mode="json", by_alias=True) for t in tools],
        [s.model_dump(mode="json", by_alias=True) for s in servers],
    ]
    return ToolInventory(
        inventory_ref=content_ref("toolinv", content),
        thread_id=mem.thread_id,
        agent=agent,
        side=side,
        prompt=prompt,
        mode=mode,
        thread_status=mem.status,
        tools=tools,
        mcp_servers=servers,
        unknown=unknown,
        updated_at=mem.timestamp(),
    )


def _tool(spec: ToolSpec, permission: ToolPermission, *, optional: str | None) -> InventoryTool:
    kind: ToolKind
    if spec.kind == "prompt":
        kind, source = "prompt", ToolSource(type="prompt", prompt=spec.target or spec.name)
    elif spec.kind in ("subagent", "handoff"):
        kind, source = "agent", ToolSource(type="agent", agent=spec.target or spec.name)
    elif spec.kind in ("subagent_create", "subagent_message"):  # resumable subagents
        kind, source = "agent", ToolSource(type="runtime")
    elif spec.builtin:
        kind, source = "builtin", ToolSource(type="runtime")
    else:
        kind, source = "function", ToolSource(type="definition")
    return InventoryTool(
        name=spec.name,
        kind=kind,
        runtime_kind=spec.kind,
        description=spec.description,
        source=source,
        optional=optional,
        permission=permission,
    )


def _mcp_tool(spec: McpToolSpec, permission: ToolPermission) -> InventoryTool:
    return InventoryTool(
        name=spec.name,
        kind="mcp",
        runtime_kind="mcp",
        description=spec.description,
        source=ToolSource(type="mcp", server=spec.server, tool=spec.tool),
        permission=permission,
    )


def _permission(
    policy: EffectivePolicy | None, name: str, builtin: bool, mem: InventoryShown
) -> ToolPermission:
    """What `HumanGate.permit` decides for a call of `name` whose arguments match no
    argument pattern; the rules that look at arguments are listed beside it."""
    if builtin:  # lifecycle, ask_human, agent and prompt tools: the runtime's own
        return ToolPermission(decision="allow", decided_by="runtime")
    if policy is None:
        return ToolPermission(decision="allow", decided_by="no_policy")
    verdict = evaluate(policy, name, {}, mem.actions.session_allowed_tools)
    return ToolPermission(
        decision=verdict.decision,
        decided_by=verdict.decided_by,
        mode=verdict.mode,
        rule=verdict.rule,
        argument_rules=[
            {"origin": origin, "index": index, **rule.model_dump(mode="json", exclude_none=True)}
            for origin, index, rule in policy.rules
            # A rule that names the tool but looks at arguments too.
            if rule.args and rule.model_copy(update={"args": {}}).matches(name, {})
        ],
    )


def _servers(
    mem: InventoryShown, snapshot: DefinitionSnapshot, prompt: PromptDef
) -> tuple[list[McpServerState], list[str]]:
    """The prompt's MCP servers as last listed; one not listed yet is unknown, not empty."""
    states: list[McpServerState] = []
    unknown: list[str] = []
    for server in servers_of(prompt.tools, snapshot.mcp_servers):
        catalog = mem.mcp.catalogs.get(server)
        due = mem.mcp.due.get(server)
        if catalog is None:
            states.append(McpServerState(server=server, status="not_listed", refresh_due=due))
            unknown.append(
                f"mcpServers.{server}: not listed yet; its tools are listed when the prompt "
                "first calls its model"
            )
            continue
        states.append(
            McpServerState(
                server=server,
                status=catalog.status,
                error=catalog.error,
                tools=len(catalog.tools),
                catalog_id=catalog.catalog_id,
                resolved_at=catalog.resolved_at,
                refresh_due=due,
            )
        )
        if due is not None:
            unknown.append(f"mcpServers.{server}: listed again before its next use ({due})")
    return states, unknown


# ---- environment ------------------------------------------------------------------------


def _env(
    prompt: PromptDef, agent: AgentDef, thread_env: dict[str, Any]
) -> tuple[list[EnvVariable], list[str]]:
    """The names of the env the prompt's tools see, each with the layer that won."""
    layers: tuple[tuple[EnvLayer, dict[str, Any]], ...] = (
        ("prompt", prompt.env),
        ("agent", agent.env),
        ("thread", thread_env),
    )
    merged = merge_env(*(values for _, values in layers))
    winner: dict[str, EnvLayer] = {name: layer for layer, values in layers for name in values}
    variables = [
        EnvVariable(
            name=name,
            type=entry.type,
            layer=winner[name],
            declared=name in prompt.variables,
            required=name in prompt.variables and prompt.variables[name].required,
        )
        for name, entry in sorted(merged.items())
    ]
    missing = sorted(n for n, v in prompt.variables.items() if v.required and n not in merged)
    return variables, missing


def _thread_limits(mem: InventoryShown) -> dict[str, Any]:
    options = mem.start.options
    budget = mem.budget
    return {
        "maxTotalSteps": options.max_total_steps,
        "modelTimeoutSeconds": options.model_timeout_seconds,
        "toolTimeoutSeconds": options.tool_timeout_seconds,
        "toolMaxAttempts": options.tool_max_attempts,
        "budget": budget.model_dump(mode="json", by_alias=True, exclude_none=True)
        if budget and not budget.limits.is_empty()
        else None,
        "runCode": {"status": "unknown", "reason": RUN_CODE_LIMITS},
    }


def emit_snapshots(mem: SnapshotWriter) -> None:
    """Put both read models in the event stream (the close does), so the store serves them
    once no worker can answer the queries."""
    inventory = tool_inventory(mem).model_dump(mode="json", by_alias=True)
    mem.emit("snapshot.updated", {"kind": KIND_TOOL_INVENTORY, "toolInventory": inventory})
    environment = execution_environment(mem).model_dump(mode="json", by_alias=True)
    mem.emit(
        "snapshot.updated",
        {"kind": KIND_EXECUTION_ENVIRONMENT, "executionEnvironment": environment},
    )
