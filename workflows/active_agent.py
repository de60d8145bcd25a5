"""The definitions a thread runs with now: its snapshot and the agent a handoff chose."""

from __future__ import annotations

from typing import Protocol

from temporalio.exceptions import ApplicationError

from weft.contract.definitions import AgentDef, DefinitionSnapshot, PromptDef, SideConfig
from weft.contract.hooks import HookName, hook_ids_in_scope
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


class ActiveAgent:
    """Reads the snapshot for the agent that runs the thread now."""

    def __init__(self, mem: AgentView) -> None:
        self._mem = mem

    def snapshot(self) -> DefinitionSnapshot:
        """The thread's definitions.

        They are loaded by `thread.init` before the first step (or carried into a continued
        run), so only code that runs before the thread is ready can find them missing.
        """
        if self._mem.snapshot is None:
            raise ApplicationError("thread definitions are not loaded yet", type="NotStarted")
        return self._mem.snapshot

    def agent(self) -> AgentDef:
        """The agent that runs the thread now (its own, or a handoff target)."""
        return self.snapshot().agent_def(self._mem.active_agent)

    def side(self, side: Side) -> SideConfig:
        return self.agent().side(side)

    def prompt(self, side: Side) -> PromptDef:
        return self.snapshot().prompts[self.side(side).prompt]

    def env(self, side: Side) -> dict[str, EnvEntry]:
        """This thread's env as the workflow knows it: prompt, agent, then thread values."""
        return prompt_env(self.prompt(side), self.agent(), self._mem.start.env)

    def hook_ids(self, side: Side, hook: HookName) -> list[str]:
        """The ids of `hook` hooks in scope for the side's prompt (its list, else the agent's)."""
        snapshot = self.snapshot()
        ids = hook_ids_in_scope(self.prompt(side).hooks, self.agent().hooks)
        return [i for i in ids if i in snapshot.hooks and snapshot.hooks[i].hook == hook]
