"""Agent tools (Runtime §5.3, §7.2-§7.4): subagents, handoffs, `subagent_create`,
`subagent_message` and `immediate` subagents.

They run in the workflow, not in an activity: what they do is start, signal or await
workflows. Each call either runs or raises `ToolRefused`, whose error result is what the
model sees.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from temporalio import workflow

from weft.contract.activities import ToolResult
from weft.contract.carry_parts import SubagentBook
from weft.contract.definitions import ToolSpec
from weft.contract.messages import Message, QueuedMessage, Side, ToolCall
from weft.contract.subagents import (
    ERROR_MAX_INSTANCES,
    ERROR_UNKNOWN_SUBAGENT,
    SUBAGENT_CREATE_TOOL,
    RegistryEntry,
    SpawnRequest,
    SubagentToolConfig,
)
from weft.contract.thread import SIGNAL_QUEUE_MESSAGE
from weft.contract.thread_env import EnvEntry
from weft.contract.tool_catalog import enabled_subagents, handoff_config
from weft.workflows import search_attributes
from weft.workflows.active_agent import ActiveAgent
from weft.workflows.subagents.common import LIVE, ToolRefused, refuse
from weft.workflows.subagents.files import MissingFile, copy_files
from weft.workflows.subagents.registry import SubagentRegistry, UnknownChild
from weft.workflows.subagents.spawner import SubagentSpawner
from weft.workflows.views import Facts, Transcript


class AgentToolsView(Facts, Transcript, Protocol):
    """What the agent tools read of the thread; a handoff assigns `active_agent`."""

    active_agent: str | None

    @property
    def thread_id(self) -> str: ...

    @property
    def subagents(self) -> SubagentBook: ...


class AgentTools:
    """The parent's half of subagents: the tools the workflow runs itself."""

    def __init__(
        self,
        mem: AgentToolsView,
        agents: ActiveAgent,
        registry: SubagentRegistry,
        spawner: SubagentSpawner,
    ) -> None:
        self._mem = mem
        self._agents = agents
        self._registry = registry
        self._spawner = spawner

    async def run(
        self, call: ToolCall, spec: ToolSpec, *, side: Side, turn_id: str, step_id: str
    ) -> ToolResult:
        """Run a subagent, handoff, `subagent_create` or `subagent_message` call."""
        try:
            args = _arguments(call)
            if spec.kind == "handoff":
                return self._handoff(call, spec, args, turn_id=turn_id, step_id=step_id)
            configs = enabled_subagents(
                self._agents.snapshot(), self._agents.prompt(side), self._agents.env(side)
            )
            if spec.kind == "subagent":
                name = call.function.name
                config = configs.get(spec.target or name)
                if config is None or config.resumable is not False:
                    raise refuse(ERROR_UNKNOWN_SUBAGENT, f"subagent {name!r} is not enabled here")
                return await self._call_subagent(config, args, call, turn_id=turn_id)
            if spec.kind == "subagent_create":
                return await self._subagent_create(configs, args, call, turn_id=turn_id)
            return await self._subagent_message(args, call, turn_id=turn_id)
        except ToolRefused as refused:
            return refused.result

    async def _call_subagent(
        self, config: SubagentToolConfig, args: dict[str, Any], call: ToolCall, *, turn_id: str
    ) -> ToolResult:
        message = args.get(config.message_property())
        if not isinstance(message, str) or not message.strip():
            raise refuse(
                "invalid_arguments",
                f"{config.name!r} needs a non-empty string argument "
                f"{config.message_property()!r}: the task for the subagent",
            )
        attachments = _paths(args, config.init_attachments_property)
        label = args.get(config.init_agent_name_property or "") or config.name
        spawned = await self._spawner.spawn(
            SpawnRequest(
                config=config,
                name=str(label),
                tool=config.name,
                message=message,
                attachments=attachments,
                tool_call_id=call.id,
                arguments=args,
            ),
            turn_id=turn_id,
        )
        if not config.blocking:
            return _started(spawned)
        return await self._registry.result_when_done(spawned)

    async def _subagent_create(
        self,
        configs: dict[str, SubagentToolConfig],
        args: dict[str, Any],
        call: ToolCall,
        *,
        turn_id: str,
    ) -> ToolResult:
        resumable = {n: c for n, c in configs.items() if c.resumable is not False}
        agent = args.get("agent")
        if agent is None and len(resumable) == 1:
            agent = next(iter(resumable))
        config = resumable.get(str(agent))
        if config is None or config.resumable is False:
            raise refuse(
                ERROR_UNKNOWN_SUBAGENT,
                f"subagent_create: unknown agent {agent!r}; resumable subagents here: "
                f"{', '.join(sorted(resumable)) or '(none)'}",
            )
        name = args.get("name")
        if not isinstance(name, str) or not name.strip():
            raise refuse(
                "invalid_arguments", "subagent_create needs a non-empty `name` for the subagent"
            )
        name = name.strip()
        live = self._registry.live_of(config.name)
        taken = next((e for e in live if e.name == name), None)
        if taken is not None:
            raise refuse(
                "name_taken",
                f"a {config.name} subagent named {name!r} already exists (reference "
                f"{taken.reference}); send it work with subagent_message, or pick another name",
            )
        limit = config.resumable.max_instances
        if limit is not None and len(live) >= limit:
            listed = ", ".join(f"{e.name!r} ({e.reference}, {e.status})" for e in live)
            return ToolResult(
                status="error",
                error_code=ERROR_MAX_INSTANCES,
                error=f"cannot create another {config.name} subagent: maxInstances is {limit} "
                f"and these are live: {listed}. Reuse one with subagent_message "
                "(reference or name), or wait until one finishes.",
                error_data={
                    "maxInstances": limit,
                    "instances": [{"reference": e.reference, "name": e.name} for e in live],
                },
            )
        message = args.get("message")
        if message is not None and not isinstance(message, str):
            raise refuse("invalid_arguments", "subagent_create: `message` must be a string")
        attachments = _paths(args, "attachments")
        description = args.get("description")
        spawned = await self._spawner.spawn(
            SpawnRequest(
                config=config,
                name=name,
                tool=SUBAGENT_CREATE_TOOL,
                message=message or None,
                attachments=attachments,
                description=description if isinstance(description, str) else None,
                tool_call_id=call.id,
                arguments=args,
            ),
            turn_id=turn_id,
        )
        if not config.blocking or not message:
            return _started(spawned)
        return await self._registry.result_when_done(spawned)

    async def _subagent_message(
        self, args: dict[str, Any], call: ToolCall, *, turn_id: str
    ) -> ToolResult:
        wanted, message = args.get("reference"), args.get("message")
        try:
            entry = self._registry.find(wanted)
        except UnknownChild as err:
            raise refuse(ERROR_UNKNOWN_SUBAGENT, f"subagent_message: {err}") from None
        if not isinstance(message, str) or not message.strip():
            raise refuse("invalid_arguments", "subagent_message needs a non-empty `message`")
        if entry.closed or entry.status not in LIVE:
            raise refuse(
                "subagent_closed",
                f"subagent {entry.name!r} ({entry.reference}) is {entry.status} and takes no "
                "more messages; create a new one with subagent_create",
            )
        attachments = _paths(args, "attachments")
        try:
            copied = await copy_files(
                self._mem.thread_id, entry.reference, attachments, f"{call.id}:in"
            )
        except MissingFile as err:
            raise refuse("attachment_not_found", str(err)) from None
        role = "assistant" if entry.receives_messages == "side_b" else "user"
        outgoing = QueuedMessage(role=role, content=message, attachments=copied)
        await workflow.get_external_workflow_handle(entry.reference).signal(
            SIGNAL_QUEUE_MESSAGE, outgoing.model_dump(mode="json", by_alias=True)
        )
        self._registry.set_status(entry, "running")
        self._registry.emit(entry, "subagent.input", turn_id=turn_id, messageChars=len(message))
        await self._registry.publish()
        if not entry.blocking:
            return _started(entry)
        return await self._registry.result_when_done(entry)

    def _handoff(
        self, call: ToolCall, spec: ToolSpec, args: dict[str, Any], *, turn_id: str, step_id: str
    ) -> ToolResult:
        """Runtime §5.3: an ai_human agent called as a tool takes over this same thread."""
        snapshot = self._agents.snapshot()
        target = spec.target or call.function.name
        previous = self._agents.agent().name
        config = handoff_config(self._agents.prompt("a"), target)
        note = args.get(config.init_user_message_property or "message")
        self._mem.active_agent = None if target == snapshot.agent.name else target
        self._mem.emit(
            "thread.updated",
            {"handoff": {"from": previous, "to": target, "note": note}},
            turn_id=turn_id,
            step_id=step_id,
            tool_call_id=call.id,
        )
        search_attributes.upsert_agent(target)
        return ToolResult(
            status="success",
            result={"handedOffTo": target, "from": previous, "note": note},
        )

    # ---- immediate subagents (Runtime §7.3) ------------------------------------------

    async def start_immediate(
        self, side: Side, turn_id: str, new_messages: list[Message]
    ) -> list[Message]:
        """Start the active prompt's `immediate` subagents before its first model step.

        Each child gets the newest queued text as its first message. A blocking one is
        awaited and its payload joins this step's new messages; a non-blocking one reports
        later, like any subagent. Children run their own immediates the same way, which
        makes the activation recursive.
        """
        prompt = self._agents.prompt(side)
        done = self._mem.subagents.immediate_done
        if prompt.name in done:
            return new_messages
        done.add(prompt.name)
        mem, env = self._mem, self._agents.env(side)
        trigger = next((m.content for m in reversed(new_messages) if m.content), None)
        added: list[Message] = []
        for config in enabled_subagents(self._agents.snapshot(), prompt, env).values():
            immediate = config.immediate_config()
            if immediate is None:
                continue
            name = _env_text(env, immediate.name_env) or config.name
            request = SpawnRequest(
                config=config,
                name=name,
                tool=config.name,
                message=trigger,
                description=_env_text(env, immediate.description_env),
            )
            try:
                spawned = await self._spawner.spawn(request, turn_id=turn_id)
            except ToolRefused as refused:
                text = f"Immediate subagent {config.name!r} did not start: {refused.result.error}"
            else:
                if not (config.blocking and trigger):
                    continue
                result = await self._registry.result_when_done(spawned)
                text = f"Immediate subagent {name!r} ({spawned.reference}) answered: " + (
                    json.dumps(result.result) if result.status == "success" else str(result.error)
                )
            added.append(
                mem.new_message(
                    role="user",
                    content=text,
                    side=None,
                    turn_id=turn_id,
                    metadata={"subagent": {"name": name, "kind": "immediate"}},
                )
            )
        return [*new_messages, *added]


def _arguments(call: ToolCall) -> dict[str, Any]:
    name = call.function.name
    try:
        args = json.loads(call.function.arguments or "{}")
    except ValueError as err:
        raise refuse(
            "invalid_arguments", f"arguments of {name!r} are not valid JSON: {err}"
        ) from None
    if not isinstance(args, dict):
        raise refuse("invalid_arguments", f"arguments of {name!r} must be a JSON object")
    return args


def _env_text(env: dict[str, EnvEntry], name: str | None) -> str | None:
    # nameEnv/descriptionEnv are model-visible hints by definition (§7.4).
    entry = env.get(name) if name else None
    return str(entry.value) if entry is not None and entry.value is not None else None


def _paths(args: dict[str, Any], prop: str | None) -> list[str]:
    if not prop or args.get(prop) is None:
        return []
    value = args[prop]
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise refuse("invalid_arguments", f"{prop!r} must be a list of file paths")
    return list(value)


def _started(entry: RegistryEntry) -> ToolResult:
    return ToolResult(
        status="success",
        result={
            "reference": entry.reference,
            "name": entry.name,
            "status": entry.status,
            "note": (
                "the subagent runs on its own; its result arrives as a message"
                if entry.parent_communication == "implicit"
                else "the subagent runs on its own and reports only when it chooses to"
            ),
        },
    )
