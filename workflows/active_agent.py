"""The definitions a thread runs with now: its snapshot and the agent a handoff chose.

`ActiveAgent.in_force(side)` resolves them once into an `InForce` value (snapshot, agent,
side, prompt, model) that a step hands to the parts it calls, instead of each part looking
the agent up again. The value is kept until the snapshot or the running agent changes (a
move to newer definitions, a handoff), so asking again within a step costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from temporalio.exceptions import ApplicationError

from weft.contract.definitions import AgentDef, DefinitionSnapshot, ModelDef, PromptDef, SideConfig
from weft.contract.hooks import HookName, hook_ids_in_scope
from weft.contract.mcp import servers_of
from weft.contract.messages import Side
from weft.contract.thread import ThreadStartInput
from weft.contract.thread_env import EnvEntry, prompt_env


class AgentView(Protocol):
    """What the definitions in force are read from: the snapshot, a handoff's agent and
    the thread's own env."""

    @property
    def snapshot(self) -> DefinitionSnapshot | None: ...

    @property
    def active_agent(self) -> str | None: ...

    @property
    def start(self) -> ThreadStartInput: ...


@dataclass(frozen=True)
class InForce:
    """One side of the agent in force, resolved from one snapshot: what a step runs with."""

    snapshot: DefinitionSnapshot
    agent: AgentDef
    side: SideConfig
    prompt: PromptDef
    # The prompt's own model (its fallbacks are in `snapshot.models`).
    model: ModelDef
    # The MCP servers the prompt uses, in order (`McpBook` keeps their catalogues).
    mcp_servers: tuple[str, ...]

    @classmethod
    def resolve(cls, snapshot: DefinitionSnapshot, agent_name: str | None, side: Side) -> InForce:
        agent = snapshot.agent_def(agent_name)
        config = agent.side(side)
        prompt = snapshot.prompts[config.prompt]
        servers = tuple(servers_of(prompt.tools, snapshot.mcp_servers))
        return cls(snapshot, agent, config, prompt, snapshot.models[prompt.model], servers)


class ActiveAgent:
    """Reads the snapshot for the agent that runs the thread now."""

    def __init__(self, mem: AgentView) -> None:
        self._mem = mem
        # Resolved sides of (snapshot, running agent): dropped when either changes.
        self._resolved: dict[Side, InForce] = {}
        self._resolved_for: tuple[DefinitionSnapshot, str | None] | None = None

    def snapshot(self) -> DefinitionSnapshot:
        """The thread's definitions.

        They are loaded by `thread.init` before the first step (or carried into a continued
        run), so only code that runs before the thread is ready can find them missing.
        """
        if self._mem.snapshot is None:
            raise ApplicationError("thread definitions are not loaded yet", type="NotStarted")
        return self._mem.snapshot

    def in_force(self, side: Side) -> InForce:
        """The agent in force on `side`: resolved once per snapshot and running agent."""
        snapshot, running = self.snapshot(), self._mem.active_agent
        cached = self._resolved_for
        if cached is None or cached[0] is not snapshot or cached[1] != running:
            self._resolved, self._resolved_for = {}, (snapshot, running)
        found = self._resolved.get(side)
        if found is None:
            found = self._resolved[side] = InForce.resolve(snapshot, running, side)
        return found

    def agent(self) -> AgentDef:
        """The agent that runs the thread now (its own, or a handoff target)."""
        return self.in_force("a").agent

    def side(self, side: Side) -> SideConfig:
        return self.in_force(side).side

    def prompt(self, side: Side) -> PromptDef:
        return self.in_force(side).prompt

    def env(self, side: Side) -> dict[str, EnvEntry]:
        """This thread's env as the workflow knows it: prompt, agent, then thread values."""
        in_force = self.in_force(side)
        return prompt_env(in_force.prompt, in_force.agent, self._mem.start.env)

    def hook_ids(self, side: Side, hook: HookName) -> list[str]:
        """The ids of `hook` hooks in scope for the side's prompt (its list, else the agent's)."""
        in_force = self.in_force(side)
        hooks = in_force.snapshot.hooks
        ids = hook_ids_in_scope(in_force.prompt.hooks, in_force.agent.hooks)
        return [i for i in ids if i in hooks and hooks[i].hook == hook]
